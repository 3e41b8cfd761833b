"""memlab: long-term user memory for LLM assistants."""
