"""Plugins for the run-pipeline tests (tests/test_run_pipeline.py; the plugin guide's tests use
``NoneRetrieveMemory`` too), in an importable module so subprocess runs and executor workers can
register them. ``python tests/run_helpers.py ARGS`` is ``memlab ARGS`` with these plugins
registered. Also the run settings and ``memlab run`` argument lists that several test files build
the same way."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from memlab.memory import BackendConfig, Memory
from memlab.readers.base import Reader, ReaderConfig
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig
from memlab.types import Answer, MemoryItem, Question, Retrieval, Session

DATASET = "synthetic:personas=2,seed=3"
HASHING_READER = ReaderSpec(name="embedding", config={"embedder": "hashing"})  # model-free


def run_config(out: Path, backend: BackendSpec, reader: ReaderSpec, **settings: Any) -> RunConfig:
    """The run of ``DATASET`` through one backend and one reader into ``out``, without a progress bar."""
    return RunConfig(dataset=DATASET, backends=[backend], reader=reader, out=out, progress=False, **settings)


def run_args(out: Path, *more: str, dataset: str = DATASET, backends: str = "none") -> list[str]:
    """``memlab run`` arguments: ``dataset`` through ``backends`` into ``out`` without a progress bar or
    plots, then ``more``."""
    return [
        "run",
        "--dataset",
        dataset,
        "--backends",
        backends,
        "--out",
        str(out),
        "--no-progress",
        "--no-plots",
        *more,
    ]


def llm_reader_args(base_url: str, model: str) -> list[str]:
    """``memlab run`` arguments choosing the ``llm`` reader on the OpenAI-compatible server at ``base_url``."""
    return ["--reader", "llm", "--llm.base-url", base_url, "--llm.model", model]


class SlowConfig(ReaderConfig):
    delay: float = Field(default=0.2, ge=0, description="seconds per answer")


class SlowReader(Reader):
    """Answers (a) after ``delay`` seconds: gives a test time to signal a run in flight."""

    name = "slow"
    description = "answers (a), slowly"
    Config = SlowConfig

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        time.sleep(self.config.delay)  # type: ignore[attr-defined]
        return Answer(choice=0, scores=[1.0, 0.0, 0.0, 0.0])


class BrokenRetrieveMemory(Memory):
    """A plugin bug: ``_retrieve`` raises."""

    name = "broken_retrieve"
    description = "raises in _retrieve"

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        pass

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        raise RuntimeError("plugin bug in _retrieve")

    def _reset(self, user_id: str) -> None:
        pass


class NoneRetrieveMemory(BrokenRetrieveMemory):
    """A plugin bug: ``_retrieve`` returns None instead of a Retrieval."""

    name = "none_retrieve"
    description = "returns None from _retrieve"

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        return None  # type: ignore[return-value]


class MeteredMemory(Memory):
    """Keeps every turn; reports one 'ingest prompt token' per message ingested (cost accounting)."""

    name = "metered"
    description = "turn store that reports ingest usage"
    log: ClassVar[list[int]] = []

    def __init__(self, config: BackendConfig | None = None, *, data_dir=None, cache_dir=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        self.items: list[MemoryItem] = []

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        for offset, message in enumerate(session.messages):
            self.items.append(
                MemoryItem(
                    id=f"{session.id}:{first_turn + offset}",
                    text=message.content,
                    source={"session_id": session.id, "turn_index": first_turn + offset},
                )
            )
        self.record_llm_usage(prompt_tokens=len(session.messages), completion_tokens=1, cost_usd=0.001)

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        items = self.items[-k:]
        return Retrieval(items=items, context="\n".join(i.text for i in items))

    def _reset(self, user_id: str) -> None:
        self.items.clear()


PLUGINS = {"backend": [BrokenRetrieveMemory, NoneRetrieveMemory, MeteredMemory], "reader": [SlowReader]}


def register() -> None:
    from memlab.registry import backends, readers

    for cls in PLUGINS["backend"]:
        if cls.name not in backends.names():
            backends.register(cls.name, cls)
    for cls in PLUGINS["reader"]:
        if cls.name not in readers.names():
            readers.register(cls.name, cls)


def unregister() -> None:
    from memlab.registry import backends, readers

    for cls in PLUGINS["backend"]:
        backends.unregister(cls.name)
    for cls in PLUGINS["reader"]:
        readers.unregister(cls.name)


if __name__ == "__main__":
    import run_helpers  # the importable copy, so workers can re-register its classes

    run_helpers.register()
    from memlab.cli import main

    sys.exit(main(sys.argv[1:]))
