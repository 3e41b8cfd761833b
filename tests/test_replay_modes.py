"""``--replay once|rebuild``: with rebuild, every question sees exactly the memory a fresh replay of
the turns before its end index builds (sessions whole as that replay sees them); a backend whose
memory depends only on the set of turns reuses the single replay. Checked with spy backends that
chunk per turn and per ingested session part."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from memlab.memory import BackendConfig, Memory
from memlab.registry import backends
from memlab.results import RunSummary
from memlab.run.driver import run
from memlab.run.job import cached_dataset, user_id_for
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig
from memlab.types import Retrieval, Session

DATASET = "synthetic:personas=2,seed=5"


class SessionChunkSpy(Memory):
    """Stores one chunk per ingest call (a session part), like rag's session chunking."""

    name = "spy_sessions"
    description = "spy: one chunk per ingested session part"
    seen: ClassVar[list[tuple[str, str]]] = []  # (user id, memory state) at every retrieve
    built: ClassVar[int] = 0

    def __init__(self, config: BackendConfig | None = None, *, data_dir=None, cache_dir=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        type(self).built += 1
        self.chunks: list[list[str]] = []

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        self.chunks.append([m.content for m in session.messages])

    def state(self) -> str:
        return json.dumps(self.chunks)

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        type(self).seen.append((user_id, self.state()))
        return Retrieval()

    def _reset(self, user_id: str) -> None:
        self.chunks.clear()


class TurnSpy(SessionChunkSpy):
    """Stores turns: its memory is the set of stored turns, and it says so."""

    name = "spy_turns"
    description = "spy: one item per turn"
    seen: ClassVar[list[tuple[str, str]]] = []
    built: ClassVar[int] = 0

    @classmethod
    def memory_depends_only_on_turns(cls, config: BackendConfig) -> bool:
        return True

    def state(self) -> str:
        return json.dumps(sorted(turn for chunk in self.chunks for turn in chunk))


@pytest.fixture(autouse=True)
def _spies():
    backends.register(SessionChunkSpy.name, SessionChunkSpy)
    backends.register(TurnSpy.name, TurnSpy)
    yield
    backends.unregister(SessionChunkSpy.name)
    backends.unregister(TurnSpy.name)


def fresh_replay_states(spy: type[SessionChunkSpy]) -> dict[str, list[str]]:
    """Per history, the memory a fresh replay of exactly the turns before each question builds."""
    dataset = cached_dataset(DATASET)
    states = {}
    for context_id, history in dataset.histories.items():
        expected = []
        for question in dataset.questions_for(context_id):
            memory = spy()
            for session, _ in history.slices(0, question.end_index):
                memory.ingest(session, user_id="u")
            expected.append(memory.state())
        states[user_id_for(context_id)] = expected
    return states


def seen_states(spy: type[SessionChunkSpy], tmp_path: Path, replay: str) -> dict[str, list[str]]:
    spy.seen, spy.built = [], 0
    summary = run(
        RunConfig(
            dataset=DATASET,
            backends=[BackendSpec(name=spy.name)],
            controls=False,
            reader=ReaderSpec(name="embedding", config={"embedder": "hashing"}),
            out=tmp_path / replay,
            replay=replay,
            progress=False,
        )
    )  # type: ignore[arg-type]
    assert not summary.failed_jobs and summary.rows[0].settings["replay"] == replay
    out: dict[str, list[str]] = {}
    for user_id, state in spy.seen:
        out.setdefault(user_id, []).append(state)
    return out


@pytest.mark.parametrize("spy", [SessionChunkSpy, TurnSpy])
def test_rebuild_gives_each_question_a_fresh_replays_memory(spy: type[SessionChunkSpy], tmp_path: Path) -> None:
    expected = fresh_replay_states(spy)
    assert seen_states(spy, tmp_path, "rebuild") == expected


def test_rebuild_differs_from_one_replay_only_for_session_chunking(tmp_path: Path) -> None:
    expected = fresh_replay_states(SessionChunkSpy)
    once = seen_states(SessionChunkSpy, tmp_path, "once")
    differ = sum(a != b for user in expected for a, b in zip(once[user], expected[user]))
    assert differ > 0, "some session is cut by a question, so one replay ingests it in parts"
    assert seen_states(TurnSpy, tmp_path / "t", "once") == fresh_replay_states(TurnSpy)


def test_turn_level_backend_reuses_the_single_replay(tmp_path: Path) -> None:
    histories = len(cached_dataset(DATASET).histories)
    seen_states(TurnSpy, tmp_path, "rebuild")
    assert TurnSpy.built == histories  # one memory per history: no rebuild at all
    seen_states(SessionChunkSpy, tmp_path / "s", "rebuild")
    assert SessionChunkSpy.built > histories


def test_replay_mode_is_part_of_the_fingerprint_and_the_report(tmp_path: Path) -> None:
    from memlab.report import render_report
    from memlab.run.driver import SettingsChangedError

    seen_states(TurnSpy, tmp_path, "once")
    with pytest.raises(SettingsChangedError, match='replay: "once" -> "rebuild"'):
        run(
            RunConfig(
                dataset=DATASET,
                backends=[BackendSpec(name=TurnSpy.name)],
                controls=False,
                replay="rebuild",
                reader=ReaderSpec(name="embedding", config={"embedder": "hashing"}),
                out=tmp_path / "once",
                progress=False,
            )
        )
    assert "replay: once" in render_report(RunSummary.load(tmp_path / "once"))
