"""Executors that run the runner's jobs in parallel: ``process`` (the cores of one machine) and
``ray`` (a Ray cluster, or a local Ray started on demand).

Both keep the runner's guarantees:

- The driver is the only writer. Workers send every prediction back as soon as it exists (a queue
  streamed while jobs run, plus the job's full list when it ends); the driver calls ``emit`` once
  per prediction, so ``predictions.jsonl`` and resume work exactly as with the local executor.
- Heavy objects load once per worker. Workers are long-lived (pool processes, Ray actors) and run
  many jobs each; ``cached_dataset`` and ``get_embedder`` cache per process. Every outcome reports
  its worker's pid and dataset loads (``executor.workers``), so this is checked, not assumed.
- A job that raises is retried up to ``retries`` times, re-running only the questions it has not
  answered yet; if it keeps failing, its last exception is yielded (the runner lists it in
  ``summary.failed_jobs``) and the other jobs' results are kept.
- Backends and readers registered in-process (``backends.register`` in a notebook or a test) are
  re-registered in each worker by importing the module that defines them.
"""

from __future__ import annotations

import importlib
import logging
import math
import multiprocessing
import os
import pickle
import queue as queue_module
import socket
import sys
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memlab.errors import MemlabError, MissingDependencyError, UnknownNameError
from memlab.registry import backends, readers
from memlab.results import Prediction
from memlab.runner import Job, cached_dataset, run_job

logger = logging.getLogger(__name__)

RAY_HINT = 'pip install "memlab[ray]"  (or: pip install "ray>=2.9")'
POLL_SECONDS = 0.2  # how often the driver drains streamed predictions while jobs run

Outcome = tuple[Job, list[Prediction] | BaseException]


# --------------------------------------------------------------------------- options
class ProcessOptions(BaseModel):
    """Options of ``--executor process``."""

    model_config = ConfigDict(extra="forbid")

    workers: int | None = Field(default=None, ge=1, description="worker processes (default: usable cores)")
    retries: int = Field(default=2, ge=0, description="extra attempts for a job that raises")
    threads_per_worker: int | None = Field(
        default=None, ge=1, description="torch/BLAS threads per worker (default: usable cores / workers)"
    )


class RayOptions(BaseModel):
    """Options of ``--executor ray`` (Ray itself gives each worker cpus_per_job BLAS threads)."""

    model_config = ConfigDict(extra="forbid")

    retries: int = Field(default=2, ge=0, description="extra attempts for a job that raises")
    address: str | None = Field(
        default=None, description="existing cluster ('auto', 'ray://host:10001', host:6379); None starts a local Ray"
    )
    workers: int | None = Field(
        default=None, ge=1, description="worker actors (default: cluster CPUs / cpus_per_job); local Ray gets this many CPUs"
    )
    cpus_per_job: float = Field(default=1.0, gt=0, description="CPUs each worker actor reserves")
    gpus_per_job: float = Field(default=0.0, ge=0, description="GPUs each worker actor reserves (local LLM readers)")
    runtime_env: dict[str, Any] | None = Field(
        default=None, description="Ray runtime_env for the job (pip packages, env vars, working_dir)"
    )


def _parse_options(model: type[BaseModel], name: str, options: dict[str, Any]) -> Any:
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        raise MemlabError(f"invalid options for executor {name!r}:\n{exc}") from exc


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- worker side
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


_jobs_run = 0  # per worker process
_stream: Any = None  # the process pool's prediction queue, set by the pool initializer


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
        if ref.name in registry.names():  # the module registers itself on import
            continue
        obj: Any = module
        for part in attr.split("."):
            obj = getattr(obj, part)
        registry.register(ref.name, obj)


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


def _init_process_worker(stream: Any, threads: int) -> None:
    global _stream
    _stream = stream
    # Without this every worker would start one torch/BLAS thread per core: workers x cores
    # threads fighting for the cores (Ray does the same for its workers).
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(variable, str(threads))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    # Streaming is best effort (each outcome carries all its predictions): a worker must be able to
    # exit even when the driver has stopped reading and the queue's pipe is full.
    stream.cancel_join_thread()


def _process_task(index: int, job: Job, plugins: list[PluginRef]) -> JobOutcome:
    return run_in_worker(index, job, plugins, _stream.put if _stream is not None else None)


class _RayJobWorker:
    """Body of the Ray actor: one long-lived process that runs many jobs (models load once)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def run(self, index: int, job: Job, plugins: list[PluginRef]) -> JobOutcome:
        return run_in_worker(index, job, plugins, self._stream.put)


# --------------------------------------------------------------------------- driver side
def plugin_refs(jobs: Sequence[Job]) -> list[PluginRef]:
    """The jobs' backends and readers that were registered in-process (not through entry points)."""
    refs: list[PluginRef] = []
    wanted = {("backend", j.backend.name) for j in jobs} | {("reader", j.reader.name) for j in jobs}
    for kind, name in sorted(wanted):
        try:
            entry = _registry(kind).entry(name)
        except UnknownNameError:
            continue  # the job itself reports the unknown name
        if entry.distribution is not None or entry.loader is not None:
            continue  # entry points are discovered by every worker on its own
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


def _portable_job(job: Job) -> Job:
    # Workers may run in another directory (Ray): relative run paths would land elsewhere.
    return job.model_copy(update={"state_dir": job.state_dir.resolve(), "cache_dir": job.cache_dir.resolve()})


@dataclass
class _Tracked:
    job: Job
    attempts: int = 0
    answered: dict[str, Prediction] = field(default_factory=dict)


class _Book:
    """Driver-side bookkeeping shared by the executors: emits each prediction once, decides retries."""

    def __init__(
        self, jobs: Sequence[Job], emit: Callable[[Prediction], None], progress: Callable[[int], Any], retries: int
    ) -> None:
        self.tracked = [_Tracked(job) for job in jobs]
        self._emit = emit
        self._progress = progress
        self.retries = retries
        self.workers: dict[str, WorkerInfo] = {}

    def accept(self, index: int, prediction: Prediction) -> None:
        answered = self.tracked[index].answered
        if prediction.question_id in answered:  # streamed and returned, or re-answered by a retry
            return
        answered[prediction.question_id] = prediction
        self._emit(prediction)
        self._progress(1)

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
            logger.warning("job %s failed (attempt %d of %d), retrying %d question(s): %s\n%s",
                           tracked.job.label, tracked.attempts, self.retries + 1, len(remaining), message,
                           outcome.traceback)
            return _portable_job(tracked.job.model_copy(update={"question_ids": remaining}))
        logger.error("job %s failed after %d attempt(s): %s\n%s", tracked.job.label, tracked.attempts, message,
                     outcome.traceback)
        return tracked.job, outcome.error


def _drain(stream: Any, book: _Book, get_batch: Callable[[Any], list[Any]]) -> None:
    for index, prediction in get_batch(stream):
        book.accept(index, prediction)


def _mp_batch(stream: Any) -> list[Any]:
    items = []
    while True:
        try:
            items.append(stream.get_nowait())
        except queue_module.Empty:
            return items


# --------------------------------------------------------------------------- process
class ProcessExecutor:
    """Jobs on a pool of worker processes on this machine (spawned, so no forked model state)."""

    def __init__(self, **options: Any) -> None:
        self.options: ProcessOptions = _parse_options(ProcessOptions, "process", options)
        self.workers: dict[str, WorkerInfo] = {}

    def execute(
        self,
        jobs: Sequence[Job],
        emit: Callable[[Prediction], None],
        progress: Callable[[int], Any],
    ) -> Iterator[Outcome]:
        if not jobs:
            return
        book = _Book(jobs, emit, progress, self.options.retries)
        self.workers = book.workers
        plugins = plugin_refs(jobs)
        size = min(self.options.workers or usable_cores(), len(jobs))
        context = multiprocessing.get_context("spawn")
        stream = context.Queue()
        threads = self.options.threads_per_worker or max(1, usable_cores() // size)

        def new_pool() -> ProcessPoolExecutor:
            return ProcessPoolExecutor(
                size, mp_context=context, initializer=_init_process_worker, initargs=(stream, threads)
            )

        pool = new_pool()
        generation = 0
        # No more jobs in the pool than workers: when a worker dies the pool breaks and fails every
        # job it holds, so only jobs actually running should pay an attempt for it.
        todo: deque[tuple[int, Job]] = deque((i, _portable_job(j)) for i, j in enumerate(jobs))
        pending: dict[Future[JobOutcome], tuple[int, int]] = {}

        try:
            while todo or pending:
                while todo and len(pending) < size:
                    index, job = todo.popleft()
                    pending[pool.submit(_process_task, index, job, plugins)] = (index, generation)
                done, _ = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                _drain(stream, book, _mp_batch)
                for future in done:
                    index, born = pending.pop(future)
                    try:
                        outcome = future.result()
                    except BrokenProcessPool as exc:
                        outcome = JobOutcome(index, error=WorkerLostError(f"a worker process died: {exc}"))
                        if born == generation:  # replace the broken pool once, not once per lost job
                            pool.shutdown(wait=False, cancel_futures=True)
                            pool, generation = new_pool(), generation + 1
                    except Exception as exc:  # the task could not even be sent or received
                        outcome = JobOutcome(index, error=exc, traceback=traceback.format_exc())
                    result = book.finish(outcome)
                    if isinstance(result, Job):
                        todo.append((index, result))
                    else:
                        yield result
        finally:
            if pending:
                # Stopped early (interrupt, or emit failed): end running jobs now, so none keeps
                # writing to a state directory that a resumed run is about to reuse.
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
            stream.close()
            stream.cancel_join_thread()


# --------------------------------------------------------------------------- ray
def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingDependencyError("ray", f"--executor ray needs it: {RAY_HINT}") from exc
    return ray


class RayExecutor:
    """Jobs on a pool of Ray actors: each actor is one long-lived worker process running many jobs."""

    def __init__(self, **options: Any) -> None:
        self.options: RayOptions = _parse_options(RayOptions, "ray", options)
        self.ray = import_ray()  # fail now, with the install hint, not after planning the run
        self.workers: dict[str, WorkerInfo] = {}

    def _connect(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        options = self.options
        kwargs: dict[str, Any] = {"address": options.address, "runtime_env": options.runtime_env}
        if options.address is None:
            # A private local Ray: CPUs for `workers` actors, no dashboard. It stays up until this
            # process exits (Ray registers its own shutdown), so runs in one process start it once.
            cpus = math.ceil(options.workers * options.cpus_per_job) if options.workers else usable_cores()
            kwargs.update(num_cpus=cpus, include_dashboard=False)
        try:
            ray.init(**kwargs)
        except ConnectionError as exc:
            raise MemlabError(
                f"cannot connect to a Ray cluster at {options.address!r} ({exc}): start one with `ray start "
                "--head`, or leave --ray-address out to run a local Ray. If the log says InvalidAuthToken, the "
                "cluster uses token authentication: set RAY_AUTH_MODE=token (and the cluster's token in "
                "~/.ray/auth_token or RAY_AUTH_TOKEN) where memlab runs"
            ) from exc

    def _pool_size(self, jobs: int) -> int:
        if self.options.workers:
            return min(self.options.workers, jobs)
        cpus = float(self.ray.cluster_resources().get("CPU", 1))
        return max(1, min(jobs, int(cpus // self.options.cpus_per_job)))

    def execute(
        self,
        jobs: Sequence[Job],
        emit: Callable[[Prediction], None],
        progress: Callable[[int], Any],
    ) -> Iterator[Outcome]:
        if not jobs:
            return
        ray = self.ray
        self._connect()
        from ray.exceptions import RayActorError
        from ray.util.queue import Queue

        book = _Book(jobs, emit, progress, self.options.retries)
        self.workers = book.workers
        plugins = plugin_refs(jobs)
        stream = Queue(actor_options={"num_cpus": 0})  # takes no CPU slot away from the workers
        actor_class = ray.remote(_RayJobWorker).options(
            num_cpus=self.options.cpus_per_job, num_gpus=self.options.gpus_per_job
        )
        actors = [actor_class.remote(stream) for _ in range(self._pool_size(len(jobs)))]
        idle = deque(actors)
        todo: deque[tuple[int, Job]] = deque((i, _portable_job(j)) for i, j in enumerate(jobs))
        pending: dict[Any, tuple[Any, int]] = {}

        def batch(q: Any) -> list[Any]:
            size = q.qsize()
            return q.get_nowait_batch(size) if size else []

        try:
            while todo or pending:
                while todo and idle:
                    actor = idle.popleft()
                    index, job = todo.popleft()
                    pending[actor.run.remote(index, job, plugins)] = (actor, index)
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_SECONDS)
                _drain(stream, book, batch)
                for ref in ready:
                    actor, index = pending.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except RayActorError as exc:  # the actor's process died: replace it
                        outcome = JobOutcome(index, error=WorkerLostError(f"a Ray worker died: {exc}"))
                        ray.kill(actor)
                        actors.remove(actor)
                        actor = actor_class.remote(stream)
                        actors.append(actor)
                    except Exception as exc:  # e.g. the outcome could not be deserialized
                        outcome = JobOutcome(index, error=_portable(exc), traceback=traceback.format_exc())
                    idle.append(actor)
                    result = book.finish(outcome)
                    if isinstance(result, Job):
                        todo.append((index, result))
                    else:
                        yield result
        finally:
            for actor in actors:  # also ends jobs still running when the run stops early
                ray.kill(actor)
            stream.shutdown()


# --------------------------------------------------------------------------- entry
def make_executor(name: str, **options: Any) -> ProcessExecutor | RayExecutor:
    """``process`` or ``ray`` (memlab.executors.make_executor handles ``local``)."""
    if name == "process":
        return ProcessExecutor(**options)
    if name == "ray":
        return RayExecutor(**options)
    raise UnknownNameError(f"unknown executor {name!r}: choose local, process or ray")
