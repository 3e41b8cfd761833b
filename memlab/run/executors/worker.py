"""What the parallel executors share: the code a worker runs for a job, the plugins it must
re-register, the outcome it sends back, the driver-side bookkeeping of retries, and the tie that
ends a worker when its driver ends (also when the driver is SIGKILLed).
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import pickle
import pkgutil
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memlab.errors import MemlabError, UnknownNameError
from memlab.registry import LOCAL_PLUGIN_PREFIX, backends, readers
from memlab.results import Prediction
from memlab.run.job import Job, cached_dataset, run_job

logger = logging.getLogger(__name__)

Outcome = tuple[Job, list[Prediction] | BaseException]
PARENT_POLL_SECONDS = 1.0


class PluginRef(BaseModel):
    """A plugin the driver registered in-process, and where a worker can import it from."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["backend", "reader"]
    name: str
    target: str = Field(description="module:attribute")
    search_path: str | None = Field(default=None, description="sys.path entry the module was imported from")


class RemoteJobError(MemlabError):
    """A worker's exception that could not be sent back as itself (it does not pickle)."""


class WorkerLostError(MemlabError):
    """The worker process running a job died (crash, out of memory, node lost)."""


@dataclass
class WorkerInfo:
    """Who ran a job, and how often that worker loaded the dataset (should stay at 1)."""

    worker: str
    jobs_run: int
    dataset_loads: int


@dataclass
class JobOutcome:
    """What a worker sends back for one attempt: the predictions made, and the error if it raised."""

    index: int
    predictions: list[Prediction] = field(default_factory=list)
    error: BaseException | None = None
    traceback: str = ""
    worker: WorkerInfo | None = None


# --------------------------------------------------------------------------- ending with the driver
def end_with_parent(parent_pid: int) -> None:
    """Make this worker process exit when ``parent_pid`` (the driver) ends, however it ends.

    On Linux the kernel sends SIGKILL when the parent dies (PR_SET_PDEATHSIG); a watchdog thread also
    polls the pid, which covers other systems and workers that are not the driver's children (Ray).
    """
    if sys.platform.startswith("linux") and os.getppid() == parent_pid:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:  # pragma: no cover - no libc by that name
            pass
        if os.getppid() != parent_pid:  # the driver died before prctl took effect
            os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_SECONDS)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # alive, another user's
                pass

    threading.Thread(target=watch, name="memlab-driver-watch", daemon=True).start()


# --------------------------------------------------------------------------- worker side
_jobs_run = 0  # per worker process


def _portable(exc: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a RemoteJobError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RemoteJobError(f"{type(exc).__name__}: {exc}")


def _registry(kind: str) -> Any:
    return backends if kind == "backend" else readers


def ensure_plugins(refs: Sequence[PluginRef]) -> None:
    """Register in this process the in-process plugins of the driver (idempotent)."""
    for ref in refs:
        registry = _registry(ref.kind)
        if ref.name in registry.names():
            continue
        module_name, _, attr = ref.target.partition(":")
        if module_name in ("__main__", "__mp_main__"):
            raise MemlabError(
                f"{ref.kind} {ref.name!r} is defined in the driver's __main__ script, which workers cannot "
                "import: move it into an importable module (or declare an entry point)"
            )
        try:
            module = _import(module_name, ref.search_path)
        except ImportError as exc:
            raise MemlabError(
                f"{ref.kind} {ref.name!r} was registered in the driver from {ref.target}, which this worker "
                f"cannot import ({exc}): install that module on every worker or declare an entry point"
            ) from exc
        except Exception as exc:  # the plugin's own code raised while importing: one line, naming it
            raise MemlabError(
                f"{ref.kind} {ref.name!r}: importing {ref.target} failed in this worker: {type(exc).__name__}: {exc}"
            ) from exc
        if ref.name in registry.names():  # the module registers itself on import
            continue
        registry.register(ref.name, pkgutil.resolve_name(f"{module.__name__}:{attr}"))


def _import(module_name: str, search_path: str | None) -> Any:
    try:
        return importlib.import_module(module_name)
    except ImportError:
        # Ray workers only see the driver's cwd and script directory, not every sys.path entry.
        if not search_path or search_path in sys.path or not Path(search_path).is_dir():
            raise
        sys.path.append(search_path)
        return importlib.import_module(module_name)


def _worker_info() -> WorkerInfo:
    return WorkerInfo(
        worker=f"{socket.gethostname()}:{os.getpid()}",
        jobs_run=_jobs_run,
        dataset_loads=cached_dataset.cache_info().misses,
    )


def run_in_worker(
    index: int, job: Job, plugins: Sequence[PluginRef], send: Callable[[tuple[int, Prediction]], None] | None
) -> JobOutcome:
    """Run one job attempt; never raises: the error travels back in the outcome with what was done."""
    global _jobs_run
    made: list[Prediction] = []

    def emit(prediction: Prediction) -> None:
        made.append(prediction)
        if send is not None:
            try:
                send((index, prediction))
            except Exception:  # the outcome carries it anyway; streaming is only for early writes
                logger.debug("could not stream a prediction to the driver", exc_info=True)

    error: BaseException | None = None
    trace = ""
    try:
        ensure_plugins(plugins)
        run_job(job, emit=emit)
    except Exception as exc:
        error, trace = _portable(exc), traceback.format_exc()
    _jobs_run += 1
    return JobOutcome(index=index, predictions=made, error=error, traceback=trace, worker=_worker_info())


# --------------------------------------------------------------------------- driver side
def plugin_refs(jobs: Sequence[Job]) -> list[PluginRef]:
    """The jobs' backends and readers that were registered in-process (not through entry points)."""
    refs: list[PluginRef] = []
    wanted: set[tuple[Literal["backend", "reader"], str]] = {("backend", j.backend.name) for j in jobs}
    wanted |= {("reader", j.reader.name) for j in jobs}
    for kind, name in sorted(wanted):
        try:
            entry = _registry(kind).entry(name)
        except UnknownNameError:
            continue  # the job itself reports the unknown name
        if entry.distribution is not None or entry.loader is not None:
            continue  # entry points are discovered by every worker on its own
        if entry.target.startswith(LOCAL_PLUGIN_PREFIX):
            continue  # a --plugin file: the job loads it from the file itself (Job.plugins)
        refs.append(PluginRef(kind=kind, name=name, target=entry.target, search_path=_search_path(entry.target)))
    return refs


def _search_path(target: str) -> str | None:
    module_name = target.partition(":")[0]
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    depth = module_name.count(".") + 1 + (Path(file).name == "__init__.py")
    return str(Path(file).resolve().parents[depth - 1])


def portable_job(job: Job) -> Job:
    # Workers may run in another directory (Ray): relative run paths would land elsewhere.
    return job.model_copy(update={"state_dir": job.state_dir.resolve(), "cache_dir": job.cache_dir.resolve()})


class JobFailed(MemlabError):
    """A job that kept failing; carries the worker's traceback for errors.log."""

    def __init__(self, error: BaseException, trace: str) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error
        self.traceback = trace


@dataclass
class _Tracked:
    job: Job
    attempts: int = 0
    answered: dict[str, Prediction] = field(default_factory=dict)


class Book:
    """Driver-side bookkeeping shared by the executors: records each prediction once, decides retries."""

    def __init__(self, jobs: Sequence[Job], record: Callable[[Prediction], None], retries: int) -> None:
        self.tracked = [_Tracked(job) for job in jobs]
        self._record = record
        self.retries = retries
        self.workers: dict[str, WorkerInfo] = {}

    def accept(self, index: int, prediction: Prediction) -> None:
        answered = self.tracked[index].answered
        if prediction.question_id in answered:  # streamed and returned, or re-answered by a retry
            return
        answered[prediction.question_id] = prediction
        self._record(prediction)

    def finish(self, outcome: JobOutcome) -> Job | Outcome:
        """Record an attempt; return the job to run again (a retry), or the job's final outcome."""
        for prediction in outcome.predictions:
            self.accept(outcome.index, prediction)
        if outcome.worker is not None:
            self.workers[outcome.worker.worker] = outcome.worker
        tracked = self.tracked[outcome.index]
        if outcome.error is None:
            ordered = [tracked.answered[q] for q in tracked.job.question_ids if q in tracked.answered]
            return tracked.job, ordered
        tracked.attempts += 1
        remaining = [q for q in tracked.job.question_ids if q not in tracked.answered]
        message = f"{type(outcome.error).__name__}: {outcome.error}"
        if remaining and tracked.attempts <= self.retries:
            logger.warning(
                "job %s failed (attempt %d of %d), retrying %d question(s): %s",
                tracked.job.label,
                tracked.attempts,
                self.retries + 1,
                len(remaining),
                message,
            )
            logger.debug("%s", outcome.traceback)
            return portable_job(tracked.job.model_copy(update={"question_ids": remaining}))
        return tracked.job, JobFailed(outcome.error, outcome.traceback)
