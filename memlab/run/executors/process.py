"""``--executor process``: jobs on a pool of worker processes on this machine (spawned, so no forked
model state). Workers are long-lived and run many jobs each (models load once per worker); they end
with the driver, also when the driver is killed with SIGKILL."""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import signal
import sys
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memlab.results import Prediction
from memlab.run.executors.worker import (
    Book,
    JobOutcome,
    Outcome,
    PluginRef,
    WorkerInfo,
    WorkerLostError,
    end_with_parent,
    plugin_refs,
    portable_job,
    run_in_worker,
)
from memlab.run.job import Job

POLL_SECONDS = 0.2  # how often the driver drains streamed predictions while jobs run


class ProcessOptions(BaseModel):
    """Options of ``--executor process``."""

    model_config = ConfigDict(extra="forbid")

    workers: int | None = Field(default=None, ge=1, description="worker processes (default: usable cores)")
    retries: int = Field(default=2, ge=0, description="extra attempts for a job that raises")
    threads_per_worker: int | None = Field(
        default=None, ge=1, description="torch/BLAS threads per worker (default: usable cores / workers)"
    )


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_stream: Any = None  # the process pool's prediction queue, set by the pool initializer


def _init_process_worker(stream: Any, threads: int, driver_pid: int) -> None:
    global _stream
    end_with_parent(driver_pid)
    # Ctrl-C in a terminal signals the whole process group: the driver alone handles it (and ends
    # the workers), so no worker prints a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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


def _mp_batch(stream: Any) -> list[Any]:
    items = []
    while True:
        try:
            items.append(stream.get_nowait())
        except queue_module.Empty:
            return items


class ProcessExecutor:
    """Jobs on a pool of worker processes on this machine."""

    def __init__(self, **options: Any) -> None:
        from memlab.run.executors import parse_options

        self.options: ProcessOptions = parse_options(ProcessOptions, "process", options)
        self.workers: dict[str, WorkerInfo] = {}

    def execute(
        self,
        jobs: Sequence[Job],
        emit: Callable[[Prediction], None],
        progress: Callable[[int], Any],
    ) -> Iterator[Outcome]:
        if not jobs:
            return
        book = Book(jobs, emit, progress, self.options.retries)
        self.workers = book.workers
        plugins = plugin_refs(jobs)
        size = min(self.options.workers or usable_cores(), len(jobs))
        context = multiprocessing.get_context("spawn")
        stream = context.Queue()
        threads = self.options.threads_per_worker or max(1, usable_cores() // size)

        def new_pool() -> ProcessPoolExecutor:
            return ProcessPoolExecutor(
                size, mp_context=context, initializer=_init_process_worker, initargs=(stream, threads, os.getpid())
            )

        pool = new_pool()
        generation = 0
        # No more jobs in the pool than workers: when a worker dies the pool breaks and fails every
        # job it holds, so only jobs actually running should pay an attempt for it.
        todo: deque[tuple[int, Job]] = deque((i, portable_job(j)) for i, j in enumerate(jobs))
        pending: dict[Future[JobOutcome], tuple[int, int]] = {}

        try:
            while todo or pending:
                while todo and len(pending) < size:
                    index, job = todo.popleft()
                    pending[pool.submit(_process_task, index, job, plugins)] = (index, generation)
                done, _ = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                for index, prediction in _mp_batch(stream):
                    book.accept(index, prediction)
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
