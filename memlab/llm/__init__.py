"""LLM access for readers and extractors.

``make_llm(LLMConfig(...))`` is the one way code obtains an LLM: an OpenAI-compatible endpoint, any
LangChain chat model, or a local Hugging Face / GGUF model, wrapped in the persistent response
cache, retries with backoff, bounded concurrency and cost accounting (``ManagedLLM``).
Provider modules import their heavy dependencies, so they are imported only when used.
"""

from memlab.llm.base import LLM, ChatMessage, LLMResponse
from memlab.llm.cache import ResponseCache, set_default_cache_dir
from memlab.llm.config import LLMConfig, make_llm, release_local_models
from memlab.llm.errors import LLMConfigError, LLMError, LLMRequestFailed, TransientLLMError
from memlab.llm.managed import ManagedLLM
from memlab.llm.pricing import DEFAULT_PRICES, Price
from memlab.llm.retry import RetryPolicy

__all__ = [
    "LLM",
    "ChatMessage",
    "LLMResponse",
    "LLMConfig",
    "make_llm",
    "release_local_models",
    "ManagedLLM",
    "ResponseCache",
    "set_default_cache_dir",
    "RetryPolicy",
    "Price",
    "DEFAULT_PRICES",
    "LLMError",
    "LLMConfigError",
    "LLMRequestFailed",
    "TransientLLMError",
]
