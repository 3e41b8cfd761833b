"""The runner: replay order, one ingest per message, resume after a kill, result files, controls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest
from run_helpers import DATASET, HASHING_READER, run_config

from memlab.datasets import load_dataset
from memlab.memory import Memory
from memlab.readers.base import Reader
from memlab.registry import backends, readers
from memlab.results import SCHEMA_VERSION, RunSummary, read_predictions
from memlab.run.driver import run
from memlab.run.job import user_id_for
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig
from memlab.types import Answer, Question, Retrieval, Session


class RecordingMemory(Memory):
    """Remembers the (session id, first turn, size) of every ingest and what it knew at each retrieve."""

    name = "recording"
    description = "test backend that records the replay"
    log: ClassVar[list[tuple]] = []

    def __init__(self, config=None, *, data_dir=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir)
        self.seen = 0

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        self.log.append(("ingest", user_id, session.id, first_turn, len(session.messages)))
        self.seen += len(session.messages)

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        self.log.append(("retrieve", user_id, query, self.seen))
        return Retrieval()

    def _reset(self, user_id: str) -> None:
        pass


class Killed(BaseException):
    """Stands in for SIGKILL: not an Exception, so nothing records it as a failed answer."""


class DyingReader(Reader):
    name = "dying"
    description = "answers (a) and dies after a number of answers"
    budget: ClassVar[int] = 0
    calls: ClassVar[int] = 0

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        if DyingReader.calls >= DyingReader.budget:
            raise Killed()
        DyingReader.calls += 1
        return Answer(choice=0, scores=[1, 0, 0, 0])


class FailingReader(Reader):
    name = "failing"
    description = "always raises"

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        raise RuntimeError("provider down")


class MetricReader(Reader):
    name = "metric_reader"
    description = "answers (a) and reports its own per-answer metric"

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        lenient = question.id.endswith(("1", "3"))
        return Answer(choice=0, scores=[1, 0, 0, 0], metadata={"metrics": {"lenient_only": lenient}})


@pytest.fixture(autouse=True, scope="module")
def _register():
    backends.register("recording", RecordingMemory)
    readers.register("dying", DyingReader)
    readers.register("failing", FailingReader)
    readers.register("metric_reader", MetricReader)
    yield
    backends.unregister("recording")
    readers.unregister("dying")
    readers.unregister("failing")
    readers.unregister("metric_reader")


def test_readers_own_metrics_reach_predictions_and_rows(tmp_path: Path) -> None:
    summary = run(
        run_config(tmp_path / "run", BackendSpec(name="none"), ReaderSpec(name="metric_reader"), controls=False)
    )
    predictions = read_predictions(tmp_path / "run")
    flagged = [p.metrics["lenient_only"] for p in predictions]
    assert set(flagged) == {0.0, 1.0}
    assert summary.rows[0].metrics["lenient_only"] == pytest.approx(sum(flagged) / len(flagged))


def test_replay_ingests_each_message_once_in_order(tmp_path: Path) -> None:
    RecordingMemory.log.clear()
    dataset = load_dataset(DATASET)
    run(run_config(tmp_path / "run", BackendSpec(name="recording"), HASHING_READER, controls=False))
    for context_id, history in dataset.histories.items():
        events = [e for e in RecordingMemory.log if e[1] == user_id_for(context_id)]
        ingests = [e for e in events if e[0] == "ingest"]
        assert sum(e[4] for e in ingests) <= len(history.messages)
        # Parts of one session continue each other's turn numbering, in order.
        next_turn: dict[str, int] = {}
        for _, _, session_id, first_turn, size in ingests:
            assert first_turn == next_turn.get(session_id, 0)
            next_turn[session_id] = first_turn + size
        # Each question is answered with exactly the messages before its end_index.
        knew = [e[3] for e in events if e[0] == "retrieve"]
        expected = [q.end_index for q in dataset.questions_for(context_id)]
        assert knew == expected
    assert any(e[3] > 0 for e in RecordingMemory.log if e[0] == "ingest"), "some session arrived in parts"


def test_resume_after_kill_answers_each_question_once(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = run_config(out, BackendSpec(name="full_context"), ReaderSpec(name="dying"), controls=False)
    total = len(load_dataset(DATASET).questions)
    DyingReader.calls, DyingReader.budget = 0, 7
    with pytest.raises(Killed):
        run(config)
    assert len(read_predictions(out)) == 7
    # Simulate a torn last line from the kill.
    with (out / "predictions.jsonl").open("a") as handle:
        handle.write('{"backend": "full_co')
    DyingReader.calls, DyingReader.budget = 0, 10_000
    summary = run(config)
    assert DyingReader.calls == total - 7, "finished questions are not answered again"
    assert len(read_predictions(out)) == total
    assert summary.rows[0].questions == total


def test_summary_files_and_controls(tmp_path: Path) -> None:
    out = tmp_path / "run"
    summary = run(run_config(out, BackendSpec(name="rag", config={"embedder": "hashing"}), HASHING_READER))
    loaded = RunSummary.load(out)
    assert loaded.schema_version == SCHEMA_VERSION
    assert loaded.versions["pydantic"] and loaded.dataset["questions"] == len(load_dataset(DATASET).questions)
    rows = {(r.backend, r.reader): r for r in loaded.rows}
    assert set(rows) == {("rag", "embedding[hashing]"), ("none", "embedding[hashing]"), ("none", "longest_option")}
    assert rows[("none", "longest_option")].control and not rows[("rag", "embedding[hashing]")].control
    rag = rows[("rag", "embedding[hashing]")]
    assert rag.accuracy is not None and 0 <= rag.accuracy.low <= rag.accuracy.accuracy <= rag.accuracy.high <= 1
    assert set(rag.per_type) == {q.type for q in load_dataset(DATASET).questions}
    assert rag.mean_context_tokens > 0 and rows[("none", "longest_option")].mean_context_tokens == 0
    line = json.loads((out / "predictions.jsonl").read_text().splitlines()[0])
    for field in (
        "backend",
        "reader",
        "question_id",
        "question_type",
        "chosen",
        "correct",
        "scores",
        "context_tokens",
        "ingest_seconds",
        "retrieve_seconds",
    ):
        assert field in line
    assert summary.model_dump() == loaded.model_dump()


def test_failed_answers_are_errors_not_wrong_answers(tmp_path: Path) -> None:
    summary = run(run_config(tmp_path / "run", BackendSpec(name="none"), ReaderSpec(name="failing"), controls=False))
    row = summary.rows[0]
    assert row.errors == row.questions and row.accuracy is None
    assert all("provider down" in p.error for p in read_predictions(tmp_path / "run"))


def test_unknown_backend_fails_before_any_work(tmp_path: Path) -> None:
    from memlab.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="Did you mean 'rag'"):
        run(RunConfig(dataset=DATASET, backends=[BackendSpec(name="rga")], out=tmp_path / "run", progress=False))
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_secrets_never_reach_result_files() -> None:
    from memlab.run.spec import config_for_files

    config = RunConfig(
        dataset=DATASET, reader=ReaderSpec(name="llm", config={"llm": {"api_key": "sk-secret", "model": "m"}})
    )
    dumped = json.dumps(config_for_files(config))
    assert "sk-secret" not in dumped and '"model": "m"' in dumped and '"api_key": "***"' in dumped


def test_redaction_covers_header_and_token_spellings() -> None:
    from memlab.run.spec import redact

    config = {
        "llm": {
            "extra_params": {"extra_headers": {"Authorization": "Bearer sk-1", "x-api-key": "sk-2"}},
            "langchain_kwargs": {"openai_api_key": "sk-3", "hf_token": "hf-4"},
            "max_tokens": 64,
        },
        "full_context": {"max_tokens": 1000, "token": "tok-5"},
    }
    dumped = json.dumps(redact(config))
    for secret in ("sk-1", "sk-2", "sk-3", "hf-4", "tok-5"):
        assert secret not in dumped
    assert '"max_tokens": 64' in dumped and '"max_tokens": 1000' in dumped


def test_backend_labels_cannot_escape_the_state_dir(tmp_path: Path) -> None:
    from memlab.run.driver import plan_jobs
    from memlab.run.job import state_dir_name

    assert state_dir_name("rag") == "rag" and state_dir_name("rag-top5.v2") == "rag-top5.v2"
    for label in ("..", "../../outside", "/abs/path", "a/b", "."):
        name = state_dir_name(label)
        assert "/" not in name and name.strip(".") and name not in (".", "..")
    assert state_dir_name("a/b") != state_dir_name("a_b"), "sanitised labels stay distinct"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("must survive")
    out = tmp_path / "runs" / "r"
    specs = [BackendSpec(name="full_context", label="../../../outside"), BackendSpec(name="none", label="/tmp")]
    config = RunConfig(dataset=DATASET, backends=specs, reader=HASHING_READER, out=out, controls=False, progress=False)
    jobs = plan_jobs(config, load_dataset(DATASET), set())
    assert jobs and all(job.state_dir.resolve().is_relative_to((out / "state").resolve()) for job in jobs)
    summary = run(config)
    assert (outside / "keep.txt").read_text() == "must survive"
    assert {r.backend for r in summary.rows} == {"../../../outside", "/tmp"}


def test_longest_option_control_is_skipped_for_open_questions(tmp_path: Path) -> None:
    from memlab.datasets import Dataset, History
    from memlab.run.driver import plan_jobs
    from memlab.types import Message

    history = History(id="conv", messages=[Message(role="user", content="I live in Lisbon.")], session_starts=[0])
    open_q = Question(
        id="q", type="single-hop", text="Where do I live?", answer_text="Lisbon", context_id="conv", end_index=1
    )
    dataset = Dataset(name="open", histories={"conv": history}, questions=[open_q])
    config = RunConfig(
        dataset="unused", backends=[BackendSpec(name="full_context")], reader=HASHING_READER, out=tmp_path
    )
    jobs = plan_jobs(config, dataset, set())
    assert {(j.backend.name, j.reader.name) for j in jobs} == {("full_context", "embedding"), ("none", "embedding")}


def test_rows_are_compared_with_each_control_on_the_same_questions() -> None:
    from memlab.results import Prediction, mcnemar_exact, summarize_rows

    def preds(backend: str, reader: str, right: list[bool]) -> list[Prediction]:
        return [
            Prediction(
                backend=backend, reader=reader, question_id=f"q{i}", context_id="c", question_type="t", correct=r
            )
            for i, r in enumerate(right)
        ]

    mine = preds("rag", "r", [True] * 8 + [False] * 2)
    control = preds("none", "longest_option", [True, False] * 5)
    rows = summarize_rows(mine + control)
    rag = next(r for r in rows if r.backend == "rag")
    (comparison,) = rag.vs_controls
    assert (comparison.n, comparison.wins, comparison.losses) == (10, 4, 1)
    assert comparison.p_value == pytest.approx(mcnemar_exact(4, 1)) == pytest.approx(0.375)
    assert mcnemar_exact(34, 18) == pytest.approx(0.0365, abs=1e-4)
    assert mcnemar_exact(0, 0) == 1.0
    assert not next(r for r in rows if r.backend == "none").vs_controls
