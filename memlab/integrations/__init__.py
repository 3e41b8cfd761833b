"""Adapters that plug a memlab memory into other frameworks (LangChain)."""
