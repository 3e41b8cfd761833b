"""LLM access for readers and extractors."""

from memlab.llm.base import LLM, ChatMessage, LLMResponse

__all__ = ["LLM", "ChatMessage", "LLMResponse"]
