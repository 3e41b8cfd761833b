"""The evaluation runner: every backend replays every history once, answering questions on the way.

For each (backend, history) job the runner ingests the history session by session, in order, and
answers each question at the moment the replay reaches the question's ``end_index``; it never
rebuilds memory per question. Every answer is appended to ``predictions.jsonl`` as it happens, so a
killed run loses nothing and re-running the same command resumes where it stopped. Jobs are
independent of each other: an executor may run them in any order, in other processes or machines.

Beside the chosen backends, every run includes blind controls: the ``none`` backend with the same
reader (what the reader gets from the question and options alone) and the ``longest_option``
heuristic (what the dataset gives away without any reader).
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import time
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memlab.datasets import Dataset, History, load_dataset
from memlab.eval.retrieval import evidence_to_indexes, retrieval_metrics, retrieval_ranking
from memlab.errors import ConfigurationError, MemlabError
from memlab.memory import Memory
from memlab.readers.base import Reader
from memlab.registry import backends, create_backend, create_reader
from memlab.results import (
    Prediction,
    PredictionWriter,
    RunSummary,
    read_predictions,
    summarize_rows,
)
from memlab.types import Answer, Question, Retrieval

CONTROL_BACKEND = "none"
CONTROL_READER = "longest_option"


class BackendSpec(BaseModel):
    """A backend to evaluate: registered name, config, and the label its result rows carry."""

    model_config = ConfigDict(extra="forbid")

    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None

    @property
    def display(self) -> str:
        return self.label or self.name


class ReaderSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "embedding"
    config: dict[str, Any] = Field(default_factory=dict)


class RunConfig(BaseModel):
    """Everything that defines a run; saved in ``summary.json``."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = "synthetic"
    backends: list[BackendSpec] = Field(default_factory=lambda: [BackendSpec(name="rag")])
    reader: ReaderSpec = Field(default_factory=ReaderSpec)
    out: Path = Path("runs/latest")
    controls: bool = Field(default=True, description="add the none backend and the longest-option heuristic")
    contexts: list[str] | None = Field(default=None, description="only these history ids")
    max_questions: int | None = Field(default=None, ge=1, description="at most this many questions per history")
    cache_dir: Path | None = Field(default=None, description="embedding cache (default: <out>/../.memlab_cache)")
    progress: bool = True
    executor: str = "local"
    executor_options: dict[str, Any] = Field(default_factory=dict)

    def all_jobs_specs(self) -> list[tuple[BackendSpec, ReaderSpec]]:
        """(backend, reader) pairs: the chosen ones, then the blind controls."""
        pairs = [(b, self.reader) for b in self.backends]
        if self.controls:
            if not any(b.display == CONTROL_BACKEND for b in self.backends):
                pairs.append((BackendSpec(name=CONTROL_BACKEND), self.reader))
            if self.reader.name != CONTROL_READER:
                pairs.append((BackendSpec(name=CONTROL_BACKEND), ReaderSpec(name=CONTROL_READER)))
        labels = [b.display + "|" + r.name for b, r in pairs]
        duplicates = {label for label in labels if labels.count(label) > 1}
        if duplicates:
            raise MemlabError(f"two backends share the label(s) {sorted(duplicates)}: give them distinct labels")
        return pairs

    def resolved_cache_dir(self) -> Path:
        return self.cache_dir or (Path(self.out).resolve().parent / ".memlab_cache")


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

    @property
    def label(self) -> str:
        return f"{self.backend.display} x {self.context_id[:12]}"


# --------------------------------------------------------------------------- helpers
@lru_cache(maxsize=4)
def cached_dataset(spec: str) -> Dataset:
    """Each process loads a dataset once (executors call jobs many times per worker)."""
    return load_dataset(spec)


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


def _question_metrics(
    question: Question, history: History, retrieval: Retrieval, answer: Answer, uses_memory: bool
) -> tuple[dict[str, float], list[int] | None, list[int]]:
    metrics: dict[str, float] = {}
    if "parse_failure" in answer.metadata:  # only readers that parse free text report it
        metrics["parse_failure"] = float(bool(answer.metadata["parse_failure"]))
    ranking = retrieval_ranking(history, retrieval) if uses_memory else None
    retrieved = None if ranking is None else list(dict.fromkeys(i for group in ranking for i in group))
    evidence = evidence_to_indexes(history, question) if question.evidence else []
    if uses_memory and evidence:
        metrics.update(retrieval_metrics(ranking, evidence))
    if not question.is_multiple_choice and answer.text is not None:
        from memlab.eval.answers import score_open_answer

        metrics.update(score_open_answer(question, answer.text))
    return metrics, retrieved, evidence


# --------------------------------------------------------------------------- one job
def run_job(job: Job, emit: Callable[[Prediction], None] | None = None) -> list[Prediction]:
    """Replay one history through one backend and answer its remaining questions.

    ``emit`` is called with each prediction as soon as it exists (the local executor writes it to
    disk right away); the full list is also returned (remote executors send it back to the driver).
    """
    dataset = cached_dataset(job.dataset)
    history = dataset.histories.get(job.context_id)
    questions = dataset.questions_for(job.context_id)
    if job.max_questions:
        questions = questions[: job.max_questions]
    todo = set(job.question_ids)
    reader: Reader = create_reader(job.reader.name, job.reader.config)
    needs_history = reader.uses_memory and job.backend.name != CONTROL_BACKEND
    if history is None:
        if needs_history:
            raise MemlabError(f"history {job.context_id!r} is not in dataset {job.dataset!r}")
        history = History(id=job.context_id, messages=[], session_starts=[])

    # Embeddings and LLM responses are cached per run directory, so a rerun costs nothing.
    from memlab.embedders import set_default_cache_dir as set_embedding_cache
    from memlab.llm.cache import set_default_cache_dir as set_llm_cache

    saved_caches = set_embedding_cache(job.cache_dir), set_llm_cache(job.cache_dir)
    memory: Memory | None = None
    user_id = user_id_for(job.context_id)
    reader_name = reader.describe()
    results: list[Prediction] = []
    position = 0
    pending_ingest = 0.0
    try:
        # Each job replays from an empty memory: stale state from an interrupted attempt is removed.
        shutil.rmtree(job.state_dir, ignore_errors=True)
        memory = create_backend(job.backend.name, job.backend.config, data_dir=job.state_dir)
        for question in questions:
            if reader.uses_memory:
                for session, _start in history.slices(position, question.end_index):
                    pending_ingest += memory.ingest(session, user_id=user_id).seconds
                position = max(position, question.end_index)
            if question.id not in todo:
                continue
            retrieval = memory.retrieve(question.text, user_id=user_id) if reader.uses_memory else Retrieval()
            started = time.perf_counter()
            try:
                answer = reader.answer(question, retrieval)
            except ConfigurationError:
                raise  # a broken setup fails the job once instead of filling every question with errors
            except Exception as exc:  # a failed answer is recorded as an error, never as a wrong answer
                answer = Answer(error=f"{type(exc).__name__}: {exc}")
            answer_seconds = time.perf_counter() - started
            metrics, retrieved, evidence = _question_metrics(question, history, retrieval, answer, reader.uses_memory)
            correct = None
            if question.is_multiple_choice and answer.error is None:
                correct = answer.choice == question.answer
            prediction = Prediction(
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
                retrieved_messages=retrieved,
                evidence_messages=evidence,
                ingest_seconds=pending_ingest,
                retrieve_seconds=retrieval.seconds,
                answer_seconds=answer_seconds,
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
                cost_usd=float(answer.metadata.get("cost_usd", 0.0)),
                metrics=metrics,
                error=answer.error,
            )
            pending_ingest = 0.0
            results.append(prediction)
            if emit is not None:
                emit(prediction)
    finally:
        reader.close()
        if memory is not None:
            memory.close()
        shutil.rmtree(job.state_dir, ignore_errors=True)
        set_embedding_cache(saved_caches[0])
        set_llm_cache(saved_caches[1])
    return results


# --------------------------------------------------------------------------- the run
def plan_jobs(config: RunConfig, dataset: Dataset, done: set[tuple[str, str, str]]) -> list[Job]:
    """All (backend, reader, history) jobs that still have unanswered questions."""
    out = Path(config.out)
    contexts = sorted({q.context_id for q in dataset.questions})
    if config.contexts is not None:
        unknown = sorted(set(config.contexts) - set(contexts))
        if unknown:
            raise MemlabError(f"no questions for context id(s) {unknown} in dataset {config.dataset!r}")
        contexts = [c for c in contexts if c in set(config.contexts)]
    cache_dir = config.resolved_cache_dir()
    jobs = []
    for backend, reader in config.all_jobs_specs():
        reader_id = _reader_identity(reader)
        for context_id in contexts:
            questions = dataset.questions_for(context_id)
            if config.max_questions:
                questions = questions[: config.max_questions]
            if reader.name == CONTROL_READER and not any(q.is_multiple_choice for q in questions):
                continue  # the longest-option control has nothing to say about open questions (LoCoMo)
            todo = [q.id for q in questions if (backend.display, reader_id, q.id) not in done]
            if not todo:
                continue
            jobs.append(
                Job(
                    backend=backend,
                    reader=reader,
                    context_id=context_id,
                    dataset=config.dataset,
                    state_dir=out / "state" / state_dir_name(backend.display) / user_id_for(context_id),
                    cache_dir=cache_dir,
                    question_ids=todo,
                    max_questions=config.max_questions,
                )
            )
    return jobs


@lru_cache(maxsize=32)
def _reader_identity_cached(name: str, config_json: str) -> str:
    return create_reader(name, json.loads(config_json)).describe()


def _reader_identity(spec: ReaderSpec) -> str:
    return _reader_identity_cached(spec.name, json.dumps(spec.config, sort_keys=True))


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("memlab", "numpy", "pydantic", "torch", "transformers", "sentence-transformers",
                    "FlagEmbedding", "faiss-cpu", "mem0ai", "langchain-core"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _embedder_names(config: RunConfig) -> str:
    names = []
    for spec in config.backends:
        kind = spec.config.get("embedder")
        try:
            default = backends.get(spec.name).Config.model_fields.get("embedder")
        except Exception:
            default = None
        if kind is None and default is not None:
            kind = default.default
        if kind:
            model = spec.config.get("model")
            names.append(f"{spec.display}={kind}" + (f"({model})" if model else ""))
    if config.reader.config.get("embedder") or config.reader.name == "embedding":
        names.append(f"reader={config.reader.config.get('embedder', 'minilm')}")
    return ", ".join(names)


SECRET_KEYS = ("api_key", "apikey", "password", "passwd", "secret", "authorization", "credential", "private_key")
# Token-like keys named exactly so; a substring match would also hide max_tokens and friends.
SECRET_TOKEN_KEYS = ("token", "access_token", "auth_token", "hf_token", "bearer_token", "refresh_token")


def is_secret_key(key: Any) -> bool:
    """Whether a config key names a secret ("api-key" in headers counts like "api_key")."""
    name = str(key).lower().replace("-", "_")
    return any(s in name for s in SECRET_KEYS) or name in SECRET_TOKEN_KEYS


def redact(value: Any) -> Any:
    """Config as written to result files: secrets (API keys) replaced, everything else kept."""
    if isinstance(value, dict):
        return {k: "***" if is_secret_key(k) and v else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def config_for_files(config: RunConfig) -> dict[str, Any]:
    return redact(json.loads(config.model_dump_json()))


def write_summary(config: RunConfig, dataset: Dataset, failed: list[dict[str, Any]]) -> RunSummary:
    predictions = read_predictions(config.out)
    controls = {(CONTROL_BACKEND, p.reader) for p in predictions if p.backend == CONTROL_BACKEND}
    summary = RunSummary(
        name=Path(config.out).name,
        config=config_for_files(config),
        versions=package_versions(),
        dataset=dataset.summary() | {"spec": config.dataset},
        embedder=_embedder_names(config),
        rows=summarize_rows(predictions, controls),
        data_issues=[str(issue) for issue in dataset.issues[:500]],
        failed_jobs=failed,
    )
    summary.save(config.out)
    return summary


def run(config: RunConfig, *, executor: Any | None = None) -> RunSummary:
    """Run (or resume) an evaluation and return its summary."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    dataset = cached_dataset(config.dataset)
    for spec in config.backends:  # fail fast on unknown names and bad configs, before any work
        backends.get(spec.name).parse_config(spec.config)
    done = {p.key for p in read_predictions(out) if p.error is None}
    jobs = plan_jobs(config, dataset, done)
    (out / "config.json").write_text(json.dumps(config_for_files(config), indent=2), encoding="utf-8")

    if executor is None:
        from memlab.executors import make_executor

        executor = make_executor(config.executor, **config.executor_options)
    writer = PredictionWriter(out)
    failed: list[dict[str, Any]] = []
    total = sum(len(j.question_ids) for j in jobs)
    bar = _progress(total, config.progress)
    try:
        for job, outcome in executor.execute(jobs, writer.write, bar.update):
            if isinstance(outcome, BaseException):
                failed.append({"backend": job.backend.display, "reader": job.reader.name,
                               "context_id": job.context_id, "error": f"{type(outcome).__name__}: {outcome}"})
            write_summary(config, dataset, failed)
    finally:
        bar.close()
        writer.close()
        shutil.rmtree(out / "state", ignore_errors=True)  # jobs' scratch space; results live in the files
    return write_summary(config, dataset, failed)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool) -> Any:
    if not enabled or total == 0:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="q", desc="questions", dynamic_ncols=True)
