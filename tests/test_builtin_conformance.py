"""Every built-in backend passes the reusable Memory conformance suite."""

from __future__ import annotations

from pathlib import Path

from memlab.memory import Memory
from memlab.registry import create_backend
from memlab.testing import MemoryConformance


class TestNoneBackend(MemoryConformance):
    remembers = False

    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("none", data_dir=data_dir)


class TestFullContextBackend(MemoryConformance):
    returns_everything = True

    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("full_context", {"max_tokens": 10_000}, data_dir=data_dir)


class TestRagBackendHashing(MemoryConformance):
    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("rag", {"embedder": "hashing", "top_k": 3}, data_dir=data_dir)


class TestRagBackendMiniLM(MemoryConformance):
    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("rag", {"top_k": 3}, data_dir=data_dir)
