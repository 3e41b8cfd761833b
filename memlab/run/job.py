"""The unit of work of a run: one backend and one reader replaying one history.

The job ingests the history session by session, in order, and retrieves each question's memory at
the moment the replay reaches the question's ``end_index``. Answering does not depend on other
answers, so the (question, retrieval) pair goes to the reader at once and the replay moves on:
readers with an LLM answer up to ``llm.max_concurrency`` questions at a time, and each prediction
is handed to ``emit`` as soon as it is made. Nothing here knows about executors (this module is a
leaf of the run package); caches are passed in explicitly.

``replay="rebuild"`` gives every question the memory that a fresh replay of exactly the turns
before its end index builds, with each session whole as that replay sees it (the session cut by the
question is ingested as one part). For backends whose memory depends only on the set of stored turns
(``Memory.memory_depends_only_on_turns``) that equals the single replay, which is then reused.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import random
import shutil
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memlab.datasets import Dataset, History, load_dataset
from memlab.devices import set_run_device
from memlab.errors import ConfigurationError, MemlabError
from memlab.eval.retrieval import evidence_to_indexes, retrieval_metrics, retrieval_ranking, untraceable_items
from memlab.llm.config import LLMConfig
from memlab.llm.managed import ManagedLLM
from memlab.memory import IngestReport, Memory
from memlab.readers.base import Reader
from memlab.registry import backends, load_plugin, readers
from memlab.results import CONTROL_BACKEND, Prediction
from memlab.run.spec import BackendSpec, ReaderSpec, ReplayMode
from memlab.types import Answer, Question, Retrieval

log = logging.getLogger("memlab.run")


class Job(BaseModel):
    """One independent unit of work: a (backend, reader) replaying one history."""

    model_config = ConfigDict(extra="forbid")

    backend: BackendSpec
    reader: ReaderSpec
    context_id: str
    dataset: str
    state_dir: Path
    cache_dir: Path
    question_ids: list[str] = Field(description="questions still to answer (resume skips the rest)")
    max_questions: int | None = None
    sample: Literal["first", "stratified"] = "first"
    seed: int = 0
    answer_runs: int = Field(default=1, ge=1, description="answers per multiple-choice question (--answer-runs)")
    replay: ReplayMode = "once"
    fingerprint: str | None = Field(default=None, description="stamped on every prediction of this job")
    plugins: list[str] = Field(default_factory=list, description="--plugin classes to register before the job")
    device: str | None = Field(default=None, description="the run's --device: models that name none go there")

    @property
    def label(self) -> str:
        return f"{self.backend.display} x {self.context_id[:12]}"


class DatasetSpecError(MemlabError, ValueError):
    """A dataset spec or file that cannot be loaded (bad option, unreadable file)."""


# --------------------------------------------------------------------------- helpers
def load_dataset_clearly(spec: str) -> Dataset:
    """``load_dataset`` with every input problem turned into one clear error naming the spec or file."""
    try:
        return load_dataset(spec)
    except MemlabError:
        raise
    except UnicodeDecodeError as exc:
        raise DatasetSpecError(
            f"dataset {spec!r}: a file is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from exc
    except (ValueError, TypeError) as exc:
        raise DatasetSpecError(f"dataset {spec!r}: {exc}") from exc
    except OSError as exc:
        raise DatasetSpecError(f"dataset {spec!r}: cannot read {exc.filename or 'it'}: {exc.strerror or exc}") from exc


@lru_cache(maxsize=4)
def cached_dataset(spec: str) -> Dataset:
    """Each process loads a dataset once (executors call jobs many times per worker)."""
    return load_dataset_clearly(spec)


def select_questions(
    questions: list[Question], max_questions: int | None, sample: str = "first", seed: int = 0
) -> list[Question]:
    """The questions of one history a run answers: all, the first ``max_questions``, or (``stratified``)
    ``max_questions`` keeping every question type in proportion, drawn with ``seed``; in history order."""
    if not max_questions or len(questions) <= max_questions:
        return list(questions)
    if sample == "first":
        return questions[:max_questions]
    if sample != "stratified":
        raise MemlabError(f"sample must be 'first' or 'stratified', got {sample!r}")
    groups: dict[str, list[Question]] = {}
    for question in questions:
        groups.setdefault(question.type, []).append(question)
    # Every type keeps one question when there is room for all; the rest is shared in proportion to
    # what each type has left (largest remainder, ties by type name).
    quota = {t: 1 if max_questions >= len(groups) else 0 for t in groups}
    left = max_questions - sum(quota.values())
    room = {t: len(g) - quota[t] for t, g in groups.items()}
    exact = {t: left * room[t] / sum(room.values()) for t in groups}
    for t in groups:
        quota[t] += int(exact[t])
    for t in sorted(groups, key=lambda t: (-(exact[t] - int(exact[t])), t))[: max_questions - sum(quota.values())]:
        quota[t] += 1
    chosen: set[str] = set()
    for t, group in groups.items():
        rng = random.Random(f"{seed}|{group[0].context_id}|{t}")  # str seeds are stable across processes
        chosen.update(q.id for q in rng.sample(group, quota[t]))
    return [q for q in questions if q.id in chosen]


def state_dir_name(label: str) -> str:
    """A single, safe path component for a backend label (labels are free text: "a/b", "..", "/tmp")."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in label)
    if safe == label and safe.strip("."):
        return safe
    return (safe.strip(".")[:40] or "backend") + "-" + hashlib.sha1(label.encode()).hexdigest()[:10]


def user_id_for(context_id: str) -> str:
    """A valid user id for a history id (long or odd ids are hashed)."""
    safe = "".join(c for c in context_id if c.isalnum() or c in "_.-")
    if safe == context_id and 0 < len(safe) <= 100:
        return safe
    return "ctx-" + hashlib.sha1(context_id.encode()).hexdigest()[:20]


def _accepts_cache_dir(cls: type[Any]) -> bool:
    # A plugin written before Memory/Reader took cache_dir runs without the run's cache (never via globals).
    try:
        parameters = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False
    return "cache_dir" in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def create_reader_for(spec: ReaderSpec, cache_dir: Path | None) -> Reader:
    cls = readers.get(spec.name)
    if cache_dir is not None and _accepts_cache_dir(cls):
        return cls(spec.config, cache_dir=cache_dir)
    return cls(spec.config)


def create_memory_for(spec: BackendSpec, data_dir: Path, cache_dir: Path) -> Memory:
    cls = backends.get(spec.name)
    if _accepts_cache_dir(cls):
        return cls(spec.config, data_dir=data_dir, cache_dir=cache_dir)
    return cls(spec.config, data_dir=data_dir)


def answer_concurrency(reader: Reader) -> int:
    """How many questions the reader may answer at once: ``llm.max_concurrency`` for LLM readers."""
    llm = getattr(reader.config, "llm", None)
    return max(1, int(getattr(llm, "max_concurrency", 1) or 1))


def _question_metrics(
    question: Question,
    history: History,
    retrieval: Retrieval,
    answer: Answer,
    uses_memory: bool,
    writes_open_answers: bool = True,
) -> tuple[dict[str, float], list[int] | None, list[int]]:
    metrics: dict[str, float] = {}
    if "parse_failure" in answer.metadata:  # only readers that parse free text report it
        metrics["parse_failure"] = float(bool(answer.metadata["parse_failure"]))
    # Any reader may report its own per-answer metrics (e.g. lenient_only); rows average them.
    for name, value in (answer.metadata.get("metrics") or {}).items():
        if isinstance(value, (bool, int, float)):
            metrics[str(name)] = float(value)
    ranking = retrieval_ranking(history, retrieval) if uses_memory else None
    retrieved = None if ranking is None else list(dict.fromkeys(i for group in ranking for i in group))
    evidence = evidence_to_indexes(history, question) if question.evidence else []
    if uses_memory and evidence:
        metrics.update(retrieval_metrics(ranking, evidence))
    if not question.is_multiple_choice and answer.text is not None and writes_open_answers:
        from memlab.eval.answers import score_open_answer

        metrics.update(score_open_answer(question, answer.text))
    return metrics, retrieved, evidence


@dataclass(frozen=True)
class _PreparedShare:
    """Each question's share of the work done before the replay (``Reader.prepare``, ``Memory.prepare``):
    it is counted in the questions' answer and retrieve seconds, so row totals stay the whole cost."""

    retrieve_seconds: float = 0.0
    answer_seconds: float = 0.0


@dataclass
class _IngestCost:
    """Ingest work since the previous question: it belongs to the next question's prediction."""

    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, report: IngestReport) -> None:
        self.seconds += report.seconds
        self.prompt_tokens += report.prompt_tokens
        self.completion_tokens += report.completion_tokens
        self.cost_usd += report.cost_usd


def _answer(reader: Reader, question: Question, retrieval: Retrieval) -> tuple[Answer, float, str | None]:
    started = time.perf_counter()
    trace = None
    try:
        answer = reader.answer(question, retrieval)
    except ConfigurationError:
        raise  # a broken setup fails the job once instead of filling every question with errors
    except Exception as exc:  # a failed answer is recorded as an error, never as a wrong answer
        answer, trace = Answer(error=f"{type(exc).__name__}: {exc}"), traceback.format_exc()
    return answer, time.perf_counter() - started, trace


def _answer_and_score(
    job: Job,
    reader: Reader,
    reader_name: str,
    history: History,
    question: Question,
    retrieval: Retrieval,
    cost: _IngestCost,
    prepared: _PreparedShare,
    repeats: list[Reader] | None = None,
) -> Prediction:
    """Answer one question and build its prediction (metrics included): all of it independent of
    other questions, so it runs on an answering thread while the replay goes on. ``repeats`` answer
    a multiple-choice question again (``--answer-runs``), each with its own LLM cache key."""
    answer, seconds, trace = _answer(reader, question, retrieval)
    retrieval = retrieval.model_copy(update={"seconds": retrieval.seconds + prepared.retrieve_seconds})
    seconds += prepared.answer_seconds
    prediction = _prediction(
        job,
        reader_name,
        reader.uses_memory,
        history,
        question,
        retrieval,
        answer,
        seconds,
        cost,
        trace,
        writes_open_answers=type(reader).writes_open_answers,
    )
    if job.answer_runs > 1 and question.is_multiple_choice and answer.error is None:
        if repeats:
            # Every run's requests are paid for: the prediction's tokens, cost and time are all N runs'.
            for repeat in repeats:
                again, again_seconds, _trace = _answer(repeat, question, retrieval)
                prediction.run_choices.append(again.choice)
                prediction.prompt_tokens += again.prompt_tokens
                prediction.completion_tokens += again.completion_tokens
                prediction.cost_usd += float(again.metadata.get("cost_usd", 0.0))
                prediction.answer_seconds += again_seconds
        else:  # a reader without an LLM answers the same question the same way every time
            prediction.run_choices = [answer.choice] * (job.answer_runs - 1)
    return prediction


def repeat_readers(job: Job) -> list[Reader]:
    """Readers for answer runs 2..N of an LLM reader: run i's requests carry ``answer_run: i`` in their
    cache key (as the judge keys its runs), so a cached first answer is not replayed as the second."""
    if job.answer_runs < 2:
        return []
    llm_config = job.reader.config.get("llm")
    if "llm" not in readers.get(job.reader.name).Config.model_fields:
        return []  # no LLM: the reader's answers are a function of its input
    if LLMConfig.model_validate(llm_config or {}).resolved_provider() == "hf":
        return []  # a local model scored deterministically (logprob): one copy of it is enough
    repeats: list[Reader] = []
    try:
        for run in range(1, job.answer_runs):
            reader = create_reader_for(job.reader, job.cache_dir)
            repeats.append(reader)
            llm = getattr(reader, "llm", None)
            if not isinstance(llm, ManagedLLM):
                raise MemlabError(f"reader {job.reader.name!r}: --answer-runs needs its LLM to be built by memlab")
            llm.params["answer_run"] = run
    except BaseException:
        for made in repeats:
            made.close()
        raise
    return repeats


class _Replay:
    """The memory side of a job: what each question gets to see, in replay order."""

    def __init__(self, job: Job, history: History, reads_memory: bool) -> None:
        self.job, self.history, self.reads_memory = job, history, reads_memory
        self.user_id = user_id_for(job.context_id)
        self.memory: Memory | None = None
        self.position = 0
        cls = backends.get(job.backend.name)
        self.rebuild = (
            reads_memory
            and job.replay == "rebuild"
            and not cls.memory_depends_only_on_turns(cls.parse_config(job.backend.config))
        )
        self._built_for: int | None = None

    def open(self) -> None:
        # Each job replays from an empty memory: stale state from an interrupted attempt is removed.
        shutil.rmtree(self.job.state_dir, ignore_errors=True)
        self.memory = create_memory_for(self.job.backend, self.job.state_dir, self.job.cache_dir)

    def advance(self, question: Question, wanted: bool, cost: _IngestCost) -> Retrieval | None:
        """Bring memory to the question's position; its retrieval if ``wanted``."""
        if not self.reads_memory:
            return Retrieval() if wanted else None
        if self.rebuild:
            if not wanted:
                return None
            if self._built_for != question.end_index:
                self._fresh_replay(question.end_index, cost)
        else:
            assert self.memory is not None
            # Everything between two questions goes in one call: a backend may store it as one batch.
            sessions = [session for session, _start in self.history.slices(self.position, question.end_index)]
            if sessions:
                for report in self.memory.ingest_many(sessions, user_id=self.user_id):
                    cost.add(report)
            self.position = max(self.position, question.end_index)
        if not wanted:
            return None
        assert self.memory is not None
        retrieval = self.memory.retrieve(question.text, user_id=self.user_id)
        if not isinstance(retrieval, Retrieval):  # the contract check lives in Memory; this guards the runner
            raise MemlabError(
                f"backend {self.job.backend.name!r} returned {type(retrieval).__name__} from retrieve(), not a Retrieval"
            )
        return retrieval

    def _fresh_replay(self, end_index: int, cost: _IngestCost) -> None:
        if self.memory is not None:
            self.memory.close()
        shutil.rmtree(self.job.state_dir, ignore_errors=True)
        self.memory = create_memory_for(self.job.backend, self.job.state_dir, self.job.cache_dir)
        sessions = [session for session, _start in self.history.slices(0, end_index)]  # a cut session: one part
        if sessions:
            for report in self.memory.ingest_many(sessions, user_id=self.user_id):
                cost.add(report)
        self._built_for = end_index

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
        shutil.rmtree(self.job.state_dir, ignore_errors=True)


# --------------------------------------------------------------------------- one job
def run_job(job: Job, emit: Callable[[Prediction], None] | None = None) -> list[Prediction]:
    """Replay one history through one backend and answer its remaining questions.

    ``emit`` is called (in this thread) with each prediction as soon as it exists; the full list is
    also returned, in question order.
    """
    previous = set_run_device(job.device)  # in this process (a worker's too): models that name no device go there
    try:
        return _run_job(job, emit)
    finally:
        set_run_device(previous)


def _run_job(job: Job, emit: Callable[[Prediction], None] | None) -> list[Prediction]:
    for reference in job.plugins:  # a worker process has not seen the driver's --plugin registrations
        load_plugin(reference)
    dataset = cached_dataset(job.dataset)
    history = dataset.histories.get(job.context_id)
    questions = select_questions(dataset.questions_for(job.context_id), job.max_questions, job.sample, job.seed)
    todo = set(job.question_ids)
    reader = create_reader_for(job.reader, job.cache_dir)
    reads_memory = reader.uses_memory
    if history is None:
        if reads_memory and job.backend.name != CONTROL_BACKEND:
            reader.close()
            raise MemlabError(f"history {job.context_id!r} is not in dataset {job.dataset!r}")
        history = History(id=job.context_id, messages=[], session_starts=[])
    replay = _Replay(job, history, reads_memory)
    repeats: list[Reader] = []
    try:
        repeats = repeat_readers(job)
        replay.open()
        prepared = _prepare(reader, replay, [q for q in questions if q.id in todo])
        return _answer_all(job, reader, replay, history, questions, todo, emit, prepared, repeats)
    finally:
        reader.close()
        for repeat in repeats:
            repeat.close()
        replay.close()


def _prepare(reader: Reader, replay: _Replay, asked: list[Question]) -> _PreparedShare:
    """Before the replay: the reader and the backend compute ahead what the questions alone decide
    (their embeddings, in large batches). Returns each question's share of that time."""
    if not asked:
        return _PreparedShare()
    steps: list[tuple[str, Callable[[Any], None], Any]] = []
    if replay.reads_memory and replay.memory is not None:  # first: the questions are the backend's queries
        steps.append(("retrieve", replay.memory.prepare, [q.text for q in asked]))
    steps.append(("answer", reader.prepare, asked))
    seconds: dict[str, float] = {}
    for step, prepare, what in steps:
        started = time.perf_counter()
        try:
            prepare(what)
        except ConfigurationError:
            raise
        except Exception as exc:  # only a speed-up: each question meets the same problem and records it
            log.warning("computing ahead for the %s step failed (%s: %s)", step, type(exc).__name__, exc)
        seconds[step] = time.perf_counter() - started
    return _PreparedShare(seconds.get("retrieve", 0.0) / len(asked), seconds["answer"] / len(asked))


def _answer_all(
    job: Job,
    reader: Reader,
    replay: _Replay,
    history: History,
    questions: list[Question],
    todo: set[str],
    emit: Callable[[Prediction], None] | None,
    prepared: _PreparedShare,
    repeats: list[Reader] | None = None,
) -> list[Prediction]:
    reader_name = reader.describe()
    concurrency = answer_concurrency(reader)
    if concurrency > 1:
        getattr(reader, "llm", None)  # build a lazily made LLM once, here, not once per answering thread
    made: dict[str, Prediction] = {}
    pending: set[Future[Prediction]] = set()

    def finish(future: Future[Prediction]) -> None:
        pending.discard(future)
        prediction = future.result()  # re-raises a ConfigurationError in this thread
        made[prediction.question_id] = prediction
        if emit is not None:
            emit(prediction)

    def drain(block: bool) -> None:
        done, _ = wait(list(pending), timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for future in done:
            finish(future)

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="memlab-answer")
    try:
        for question in questions:
            cost = _IngestCost()  # ingest before an already answered question was counted by that answer
            retrieval = replay.advance(question, question.id in todo, cost)
            if retrieval is None:
                continue
            args = (job, reader, reader_name, history, question, retrieval, cost, prepared, repeats)
            if concurrency == 1:  # answered here, in order: readers without an LLM need no threads
                prediction = _answer_and_score(*args)
                made[question.id] = prediction
                if emit is not None:
                    emit(prediction)
                continue
            pending.add(pool.submit(_answer_and_score, *args))
            if pending:
                drain(block=False)  # hand in answers already made
            while len(pending) >= 2 * concurrency:  # keep at most a few questions per thread waiting
                drain(block=True)
        while pending:
            drain(block=True)
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
    return [made[q.id] for q in questions if q.id in made]


def _prediction(
    job: Job,
    reader_name: str,
    uses_memory: bool,
    history: History,
    question: Question,
    retrieval: Retrieval,
    answer: Answer,
    answer_seconds: float,
    cost: _IngestCost,
    trace: str | None,
    writes_open_answers: bool = True,
) -> Prediction:
    # A reader that writes no open answers keeps its text in the prediction, unscored (F1 of it would mislead).
    metrics, retrieved, evidence = _question_metrics(
        question, history, retrieval, answer, uses_memory, writes_open_answers
    )
    correct = None
    # An open-ended answer to a multiple-choice question (personamem_v2 --reader.mode open) is judged, not scored.
    if question.is_multiple_choice and answer.error is None and answer.metadata.get("mode") != "open":
        correct = answer.choice == question.answer
    return Prediction(
        backend=job.backend.display,
        reader=reader_name,
        question_id=question.id,
        context_id=question.context_id,
        question_type=question.type,
        topic=question.topic,
        distance_blocks=question.distance_blocks,
        distance_tokens=question.distance_tokens,
        chosen=answer.choice,
        answer=question.answer,
        correct=correct,
        scores=answer.scores,
        predicted_text=answer.text,
        context_tokens=retrieval.tokens,
        retrieved_items=len(retrieval.items),
        untraceable_items=untraceable_items(history, retrieval) if uses_memory else 0,
        retrieved_messages=retrieved,
        evidence_messages=evidence,
        ingest_seconds=cost.seconds,
        ingest_prompt_tokens=cost.prompt_tokens,
        ingest_completion_tokens=cost.completion_tokens,
        ingest_cost_usd=cost.cost_usd,
        retrieve_seconds=retrieval.seconds,
        answer_seconds=answer_seconds,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        cost_usd=float(answer.metadata.get("cost_usd", 0.0)),
        metrics=metrics,
        error=answer.error,
        fingerprint=job.fingerprint,
        traceback=trace,
        # Datasets that shuffle options themselves (PersonaMem-v2) record the order shown, and carry
        # the fields the summary breaks accuracy down by (per_field).
        option_order=list(question.options) if question.metadata.get("shuffled_options") else None,
        fields={str(k): str(v) for k, v in (question.metadata.get("fields") or {}).items()},
    )
