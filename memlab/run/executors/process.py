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
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from pydantic import Field

from memlab.results import Prediction
from memlab.run.executors import parse_options
from memlab.run.executors.pool import PoolExecutor, PoolOptions
from memlab.run.executors.worker import JobOutcome, PluginRef, WorkerLostError, end_with_parent, run_in_worker
from memlab.run.job import Job


class ProcessOptions(PoolOptions):
    """Options of ``--executor process``."""

    workers: int | None = Field(default=None, ge=1, description="worker processes (default: usable cores)")
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


class _ProcessPool:
    """A ``ProcessPoolExecutor`` of ``size`` spawned workers, replaced when a worker dies (that breaks it)."""

    def __init__(self, size: int, threads: int, plugins: list[PluginRef]) -> None:
        self.size, self.threads, self.plugins = size, threads, plugins
        self.context = multiprocessing.get_context("spawn")
        self.stream = self.context.Queue()
        self.pool = self._new_pool()
        self.generation = 0
        self.running: dict[Future[JobOutcome], tuple[int, int]] = {}  # -> (job index, pool generation)

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self.size,
            mp_context=self.context,
            initializer=_init_process_worker,
            initargs=(self.stream, self.threads, os.getpid()),
        )

    def busy(self) -> bool:
        return bool(self.running)

    def has_free_worker(self) -> bool:
        # When a worker dies the pool breaks and fails every job it holds: hold no queued ones.
        return len(self.running) < self.size

    def submit(self, index: int, job: Job) -> None:
        self.running[self.pool.submit(_process_task, index, job, self.plugins)] = (index, self.generation)

    def wait(self, timeout: float) -> list[Future[JobOutcome]]:
        done, _ = wait(self.running, timeout=timeout, return_when=FIRST_COMPLETED)
        return list(done)

    def streamed(self) -> list[tuple[int, Prediction]]:
        items = []
        while True:
            try:
                items.append(self.stream.get_nowait())
            except queue_module.Empty:
                return items

    def collect(self, handle: Future[JobOutcome]) -> JobOutcome:
        index, born = self.running.pop(handle)
        try:
            return handle.result()
        except BrokenProcessPool as exc:
            if born == self.generation:  # replace the broken pool once, not once per lost job
                self.pool.shutdown(wait=False, cancel_futures=True)
                self.pool, self.generation = self._new_pool(), self.generation + 1
            return JobOutcome(index, error=WorkerLostError(f"a worker process died: {exc}"))
        except Exception as exc:  # the task could not even be sent or received
            return JobOutcome(index, error=exc, traceback=traceback.format_exc())

    def close(self) -> None:
        if self.running:
            # Stopped early (interrupt, or emit failed): end running jobs now, so none keeps
            # writing to a state directory that a resumed run is about to reuse.
            for process in list((getattr(self.pool, "_processes", None) or {}).values()):
                process.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.stream.close()
        self.stream.cancel_join_thread()


class ProcessExecutor(PoolExecutor[ProcessOptions]):
    """Jobs on a pool of worker processes on this machine."""

    def __init__(self, **options: Any) -> None:
        super().__init__(parse_options(ProcessOptions, "process", options))

    def open_pool(self, plugins: list[PluginRef], jobs: int) -> _ProcessPool:
        size = min(self.options.workers or usable_cores(), jobs)
        threads = self.options.threads_per_worker or max(1, usable_cores() // size)
        return _ProcessPool(size, threads, plugins)
