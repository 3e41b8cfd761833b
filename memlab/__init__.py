"""memlab: long-term user memory for LLM assistants.

The core is small: ``Memory`` (the backend interface), typed data (``Session``, ``Message``,
``Retrieval``, ``Question``), plugin registries, and the evaluation runner. Heavier parts (the
chatbot client, the REST service, LLM providers) are imported on first use.
"""

from __future__ import annotations

from typing import Any

from memlab.memory import BackendConfig, Capability, IngestReport, Memory
from memlab.registry import create_backend, create_reader
from memlab.types import Answer, MemoryItem, Message, Question, Retrieval, Session

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "BackendConfig",
    "Capability",
    "IngestReport",
    "Memory",
    "MemoryChat",
    "MemoryClient",
    "MemoryItem",
    "Message",
    "Question",
    "Retrieval",
    "Session",
    "create_backend",
    "create_reader",
]


def __getattr__(name: str) -> Any:  # lazy: keeps `import memlab` light
    if name in ("MemoryClient", "MemoryChat"):
        from memlab import client

        return getattr(client, name)
    raise AttributeError(f"module 'memlab' has no attribute {name!r}")
