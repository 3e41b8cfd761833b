"""A backend that fails on purpose, for the executor tests (tests/test_distributed.py).

It lives in its own importable module (not in the test file) because executor workers must import
it to re-register it: the driver registers it in-process with ``backends.register``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from memlab.memory import MemoryFilter
from memlab.types import Retrieval
from memlab_plugins.rag import RagConfig, RagMemory


class FlakyConfig(RagConfig):
    marker_dir: str = Field(description="where attempts are counted (shared by all worker processes)")
    fail_attempts: int = Field(default=1, ge=0, description="the first N attempts of each history fail")
    fail_after: int = Field(default=3, ge=0, description="a failing attempt raises after this many retrievals")
    crash: bool = Field(default=False, description="kill the worker process instead of raising")


class FlakyMemory(RagMemory):
    """RAG that raises (or kills its process) partway through its first ``fail_attempts`` attempts."""

    name = "flaky"
    description = "RAG that fails on purpose partway through a replay (executor tests)."
    Config = FlakyConfig
    config: FlakyConfig

    def __init__(self, config=None, *, data_dir=None, embedder=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir, embedder=embedder)
        # One counter file per history: the state dir is named after the history's user id.
        history = Path(data_dir).name if data_dir is not None else "default"
        counter = Path(self.config.marker_dir) / f"{history}.attempts"
        counter.parent.mkdir(parents=True, exist_ok=True)
        with counter.open("a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        self.attempt = len(counter.read_text(encoding="utf-8").splitlines())
        self.retrievals = 0

    def _retrieve(self, query: str, *, user_id: str, k: int, filters: MemoryFilter | None = None) -> Retrieval:
        self.retrievals += 1
        if self.attempt <= self.config.fail_attempts and self.retrievals > self.config.fail_after:
            if self.config.crash:
                os._exit(3)
            raise RuntimeError(f"injected failure on attempt {self.attempt}")
        return super()._retrieve(query, user_id=user_id, k=k, filters=filters)


def attempts(marker_dir: str | Path) -> dict[str, int]:
    """Attempts made per history so far."""
    return {
        path.name.removesuffix(".attempts"): len(path.read_text(encoding="utf-8").splitlines())
        for path in Path(marker_dir).glob("*.attempts")
    }
