"""The driver of a run: plan jobs from the run config, check what may be resumed, lock the run
directory, hand jobs to an executor, write results as they arrive, and summarise.

A run directory holds:

- ``predictions.jsonl``: one line per answered question, each stamped with its row's fingerprint;
- ``fingerprints.json``: for every row with predictions, its fingerprint and the settings it covers;
- ``config.json``: the run config of the latest run (reusable as ``--config``);
- ``summary.json``: rows built only from predictions of the current config's rows and fingerprints;
- ``errors.log``: full tracebacks of failed jobs and of questions that ended in an error.

Resume continues a row only when its fingerprint matches; otherwise the run stops before any work,
naming the settings that differ.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from memlab.datasets import Dataset
from memlab.errors import DirectoryInUseError, MemlabError, RunInterrupted  # noqa: F401 (RunInterrupted: its old home)
from memlab.locks import DirectoryLock
from memlab.registry import backends, load_plugin, readers
from memlab.results import (
    CONTROL_READER,
    Prediction,
    PredictionWriter,
    RunSummary,
    read_predictions,
    summarize_rows,
    write_atomically,
    write_failed,
)
from memlab.run.executors.worker import JobFailed
from memlab.run.fingerprint import dataset_content_hash, differences, fingerprint_of, row_settings
from memlab.run.job import Job, cached_dataset, create_reader_for, select_questions, state_dir_name, user_id_for
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig, config_for_files

CONFIG_FILE = "config.json"
FINGERPRINTS_FILE = "fingerprints.json"
ERRORS_FILE = "errors.log"


class SettingsChangedError(MemlabError):
    """Resume refused: a row's existing predictions were made with other settings."""


@dataclass
class RowPlan:
    """One result row of the current config: its specs, identity and fingerprint."""

    backend: BackendSpec
    reader: ReaderSpec
    reader_identity: str
    settings: dict[str, Any]
    fingerprint: str
    served: Any = None  # preflight's ServedModel of the reader's LLM endpoint, when it has one

    @property
    def key(self) -> tuple[str, str]:
        return (self.backend.display, self.reader_identity)


@dataclass
class ErrorRecord:
    """A failure to report: a job that failed, or a question that ended in an error."""

    what: str
    message: str
    traceback: str = ""


@dataclass
class RunResult:
    summary: RunSummary
    errors: list[ErrorRecord] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.summary.failed_jobs) or any(row.errors for row in self.summary.rows)


# --------------------------------------------------------------------------- planning
def reader_identity(spec: ReaderSpec) -> str:
    """What the reader writes as its name in results (``describe()``); builds no model."""
    reader = create_reader_for(spec, None)
    try:
        return reader.describe()
    finally:
        reader.close()


def plan_rows(config: RunConfig, dataset: Dataset, dataset_hash: str | None = None) -> list[RowPlan]:
    """Every (backend, reader) row of the config with its fingerprint; checks names and configs."""
    dataset_hash = dataset_hash if dataset_hash is not None else dataset_content_hash(dataset)
    identities: dict[str, str] = {}
    rows = []
    for backend, reader in config.all_jobs_specs():
        if reader.key not in identities:
            identities[reader.key] = reader_identity(reader)
        settings = row_settings(
            backend,
            reader,
            reader_identity=identities[reader.key],
            dataset_spec=config.dataset,
            dataset_hash=dataset_hash,
            replay=config.replay,
            answer_runs=config.answer_runs,
        )
        rows.append(RowPlan(backend, reader, identities[reader.key], settings, fingerprint_of(settings)))
    keys = [row.key for row in rows]
    clashes = sorted({_row_name(key) for key in keys if keys.count(key) > 1})
    if clashes:
        raise MemlabError(
            f"rows {clashes} would share one name (backend label / reader): give the backends distinct labels"
        )
    return rows


def plan_jobs(
    config: RunConfig, dataset: Dataset, done: set[tuple[str, str, str]], rows: list[RowPlan] | None = None
) -> list[Job]:
    """All (backend, reader, history) jobs that still have unanswered questions."""
    out = Path(config.out)
    rows = rows if rows is not None else plan_rows(config, dataset)
    contexts = sorted({q.context_id for q in dataset.questions})
    if config.contexts is not None:
        unknown = sorted(set(config.contexts) - set(contexts))
        if unknown:
            raise MemlabError(f"no questions for context id(s) {unknown} in dataset {config.dataset!r}")
        contexts = [c for c in contexts if c in set(config.contexts)]
    cache_dir = config.resolved_cache_dir()
    jobs = []
    for row in rows:
        for context_id in contexts:
            questions = select_questions(
                dataset.questions_for(context_id), config.max_questions, config.sample, config.seed
            )
            if row.reader.name == CONTROL_READER and not any(q.is_multiple_choice for q in questions):
                continue  # the longest-option control has nothing to say about open questions (LoCoMo)
            todo = [q.id for q in questions if (row.backend.display, row.reader_identity, q.id) not in done]
            if not todo:
                continue
            jobs.append(
                Job(
                    backend=row.backend,
                    reader=row.reader,
                    context_id=context_id,
                    dataset=config.dataset,
                    # rows of one backend with several readers replay side by side in parallel executors
                    state_dir=out
                    / "state"
                    / state_dir_name(row.backend.display)
                    / state_dir_name(row.reader_identity)
                    / user_id_for(context_id),
                    cache_dir=cache_dir,
                    question_ids=todo,
                    max_questions=config.max_questions,
                    sample=config.sample,
                    seed=config.seed,
                    answer_runs=config.answer_runs,
                    replay=config.replay,
                    fingerprint=row.fingerprint,
                    plugins=config.plugins,
                    device=config.device,
                )
            )
    return jobs


# --------------------------------------------------------------------------- resume
def _load_fingerprints(out: Path) -> dict[str, dict[str, Any]]:
    path = out / FINGERPRINTS_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}  # only used to explain a mismatch; the predictions' own fingerprints decide
    return data if isinstance(data, dict) else {}


def _row_name(key: tuple[str, str]) -> str:
    return f"{key[0]} / {key[1]}"


def check_resumable(out: Path, rows: list[RowPlan], predictions: list[Prediction]) -> None:
    """Stop before any work if a row of this config has predictions made with other settings."""
    known = _load_fingerprints(out)
    problems = []
    for row in rows:
        theirs = {p.fingerprint for p in predictions if p.row == row.key}
        stale = sorted(str(f) for f in theirs - {row.fingerprint})
        if not stale:
            continue
        old = known.get("|".join(row.key), {})
        if None in theirs or "None" in stale:
            detail = ["  (predictions written by a memlab without fingerprints)"]
        elif old.get("fingerprint") in theirs and old.get("settings"):
            detail = [f"  {line}" for line in differences(old["settings"], row.settings)] or [
                "  (no visible difference)"
            ]
        else:
            detail = [f"  fingerprint {', '.join(stale)} -> {row.fingerprint} (old settings not recorded)"]
        problems.append(
            f"row {_row_name(row.key)}: its answers in {out} were made with other settings:\n" + "\n".join(detail)
        )
    if problems:
        raise SettingsChangedError(
            "cannot resume: " + "\n".join(problems) + "\nNothing was run. Use a new --out for the new settings, "
            'or give the backend a distinct label (a run config file with "label") so both rows live side by side.'
        )


def _save_fingerprints(out: Path, rows: list[RowPlan], predictions: list[Prediction]) -> None:
    known = _load_fingerprints(out)
    present = {"|".join(p.row) for p in predictions}
    kept = {k: v for k, v in known.items() if k in present}  # rows of earlier configs stay described
    for row in rows:
        kept["|".join(row.key)] = {"fingerprint": row.fingerprint, "settings": row.settings}
    write_atomically(out / FINGERPRINTS_FILE, json.dumps(kept, indent=2, sort_keys=True))


# --------------------------------------------------------------------------- summary
def package_versions() -> dict[str, str]:
    import platform

    versions = {"python": platform.python_version()}
    for package in (
        "memlab",
        "numpy",
        "pydantic",
        "torch",
        "transformers",
        "sentence-transformers",
        "FlagEmbedding",
        "faiss-cpu",
        "mem0ai",
        "langchain-core",
    ):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return versions


def plugin_versions(rows: list[RowPlan]) -> dict[str, str]:
    """distribution -> version of each package providing a plugin of the run (in-process ones too)."""
    out: dict[str, str] = {}
    for row in rows:
        for part in ("backend", "reader"):
            name, _, version = row.settings[part]["package"].partition(" ")
            if name == "in-process":  # registered by code, not installed: where it lives instead
                name, version = version, "in-process"
            out[name] = version
    return dict(sorted(out.items()))


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
    for reader in config.all_readers():
        if reader.config.get("embedder") or reader.name == "embedding":
            names.append(f"reader={reader.config.get('embedder', 'minilm')}")
    return ", ".join(dict.fromkeys(names))


def current_predictions(predictions: list[Prediction], rows: list[RowPlan]) -> list[Prediction]:
    """The predictions of the current config: its rows, with its fingerprints."""
    wanted = {row.key: row.fingerprint for row in rows}
    return [p for p in predictions if wanted.get(p.row) == p.fingerprint]


def write_summary(
    config: RunConfig,
    dataset: Dataset,
    rows: list[RowPlan],
    failed: list[dict[str, Any]],
    predictions: list[Prediction] | None = None,
) -> RunSummary:
    predictions = current_predictions(read_predictions(config.out) if predictions is None else predictions, rows)
    summary_rows = summarize_rows(predictions)
    plans = {row.key: row for row in rows}
    for summary_row in summary_rows:
        plan = plans.get((summary_row.backend, summary_row.reader))
        if plan is not None:
            summary_row.fingerprint, summary_row.settings = plan.fingerprint, plan.settings
            if plan.served is not None:
                summary_row.llm_endpoint, summary_row.llm_model = plan.served.endpoint, plan.served.model
    from memlab.run.judging import add_judgments

    add_judgments(config, summary_rows)
    summary = RunSummary(
        name=Path(config.out).name,
        config=config_for_files(config),
        versions=package_versions(),
        dataset=dataset.summary() | {"spec": config.dataset},
        embedder=_embedder_names(config),
        plugins=plugin_versions(rows),
        row_fingerprints={"|".join(row.key): row.fingerprint for row in rows},
        rows=summary_rows,
        data_issues=[str(issue) for issue in dataset.issues[:500]],
        failed_jobs=failed,
    )
    summary.save(config.out)
    return summary


# --------------------------------------------------------------------------- errors.log
def _write_errors_log(out: Path, errors: list[ErrorRecord]) -> None:
    if not errors:
        return
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = [f"=== memlab run {stamp}: {len(errors)} problem(s)"]
    for record in errors:
        lines.append(f"--- {record.what}: {record.message}")
        if record.traceback:
            lines.append(record.traceback.rstrip())
    path = out / ERRORS_FILE
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    except OSError as exc:
        raise write_failed(path, exc) from exc


# --------------------------------------------------------------------------- signals
@contextmanager
def _sigterm_as_interrupt() -> Iterator[list[str]]:
    """SIGTERM stops the run like Ctrl-C (the main thread only can install handlers)."""
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handler(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


# --------------------------------------------------------------------------- the run
def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise MemlabError(f"--out {out} is a file, not a directory: give a directory for the run's results")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MemlabError(f"--out {out}: cannot create the run directory: {exc.strerror or exc}") from exc


def _lock(out: Path) -> DirectoryLock:
    lock = DirectoryLock(out, purpose="memlab run")
    try:
        return lock.acquire()
    except DirectoryInUseError:
        pid = lock.holder().get("pid", "?")
        raise DirectoryInUseError(
            f"another memlab run (pid {pid}) is using {out}: wait for it to end, stop it, or use another --out"
        ) from None


def run(config: RunConfig, *, executor: Any | None = None) -> RunSummary:
    """Run (or resume) an evaluation and return its summary."""
    return run_with_details(config, executor=executor).summary


def run_with_details(config: RunConfig, *, executor: Any | None = None) -> RunResult:
    """``run``, also returning the failures met (with tracebacks) for the caller to show."""
    out = Path(config.out)
    for reference in config.plugins:
        load_plugin(reference)
    from memlab.run.preflight import preflight

    served = preflight(config)  # before the directory is made and before any ingest
    _check_out(out)
    lock = _lock(out)
    try:
        with _sigterm_as_interrupt() as received:
            try:
                return _run_locked(config, out, executor, served)
            except KeyboardInterrupt:
                saved = 0
                try:
                    saved = len(read_predictions(out))
                except MemlabError:
                    pass
                raise RunInterrupted(saved, received[0] if received else "SIGINT") from None
    finally:
        lock.release()


def _run_locked(config: RunConfig, out: Path, executor: Any | None, served: dict[str, Any]) -> RunResult:
    dataset = cached_dataset(config.dataset)
    for spec in config.backends:  # fail fast on unknown names and bad configs, before any work
        backends.get(spec.name).parse_config(spec.config)
    for reader in config.all_readers():
        readers.get(reader.name)
    rows = plan_rows(config, dataset)
    for row in rows:
        row.served = served.get(row.reader.key)
    existing = read_predictions(out)  # raises on an unreadable line, before anything is appended
    check_resumable(out, rows, existing)
    wanted = {row.key: row.fingerprint for row in rows}
    done = {p.key for p in existing if p.error is None and wanted.get(p.row) == p.fingerprint}
    jobs = plan_jobs(config, dataset, done, rows)
    write_atomically(out / CONFIG_FILE, json.dumps(config_for_files(config), indent=2))
    _save_fingerprints(out, rows, existing)

    if executor is None:
        from memlab.run.executors import make_executor

        executor = make_executor(config.executor, **config.executor_options)
    writer = PredictionWriter(out)
    failed: list[dict[str, Any]] = []
    write_summary(config, dataset, rows, failed, existing)  # a killed run's summary still names its rows
    errors: list[ErrorRecord] = []

    def emit(prediction: Prediction) -> None:
        writer.write(prediction)
        if prediction.error is not None:
            errors.append(
                ErrorRecord(
                    f"question {prediction.question_id} ({prediction.backend} / {prediction.reader})",
                    prediction.error,
                    prediction.traceback or "",
                )
            )

    total = sum(len(j.question_ids) for j in jobs)
    bar = _progress(total, config.progress)
    try:
        for job, outcome in executor.execute(jobs, emit, bar.update):
            if isinstance(outcome, BaseException):
                error = outcome.error if isinstance(outcome, JobFailed) else outcome
                trace = (
                    outcome.traceback
                    if isinstance(outcome, JobFailed)
                    else "".join(traceback.format_exception(type(outcome), outcome, outcome.__traceback__))
                )
                failed.append(
                    {
                        "backend": job.backend.display,
                        "reader": job.reader.name,
                        "context_id": job.context_id,
                        "error": f"{type(error).__name__}: {error}",
                    }
                )
                errors.append(
                    ErrorRecord(
                        f"job {job.backend.display} / {job.reader.name} x {job.context_id}",
                        f"{type(error).__name__}: {error}",
                        trace,
                    )
                )
            write_summary(config, dataset, rows, failed)
        if config.judge is not None:
            from memlab.run.judging import judge_run

            judge_run(config, rows, current_predictions(read_predictions(out), rows), config.progress)
    finally:
        bar.close()
        writer.close()
        shutil.rmtree(out / "state", ignore_errors=True)  # jobs' scratch space; results live in the files
        _write_errors_log(out, errors)
    return RunResult(write_summary(config, dataset, rows, failed), errors)


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
