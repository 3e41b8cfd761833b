"""The driver side of the process and Ray executors: one dispatch and retry loop over a pool of
long-lived workers. An executor supplies only its ``WorkerPool``: how an attempt is submitted and
awaited, how streamed predictions are drained, what a lost worker turns into, and how the pool ends.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from memlab.results import Prediction
from memlab.run.executors import Executor
from memlab.run.executors.worker import Book, JobOutcome, Outcome, PluginRef, WorkerInfo, plugin_refs, portable_job
from memlab.run.job import Job

POLL_SECONDS = 0.2  # how often the driver drains streamed predictions while jobs run


class PoolOptions(BaseModel):
    """Options every pool executor takes."""

    model_config = ConfigDict(extra="forbid")

    retries: int = Field(default=2, ge=0, description="extra attempts for a job that raises")


HandleT = TypeVar("HandleT")


class WorkerPool(Protocol[HandleT]):
    """A pool of workers running job attempts (each known by a handle); ``PoolExecutor`` drives it."""

    def busy(self) -> bool:
        """Whether attempts were submitted that are not collected yet."""
        ...

    def has_free_worker(self) -> bool: ...

    def submit(self, index: int, job: Job) -> None:
        """Start an attempt at job ``index`` on a free worker."""
        ...

    def wait(self, timeout: float) -> list[HandleT]:
        """Wait up to ``timeout`` seconds; the handles of attempts that finished."""
        ...

    def streamed(self) -> list[tuple[int, Prediction]]:
        """The (job index, prediction) pairs workers streamed since the last call."""
        ...

    def collect(self, handle: HandleT) -> JobOutcome:
        """A finished attempt's outcome; a lost worker becomes an error outcome (and is replaced)."""
        ...

    def close(self) -> None:
        """End the pool, and attempts still running (the run stopped early)."""
        ...


OptionsT = TypeVar("OptionsT", bound=PoolOptions)


class PoolExecutor(Executor, Generic[OptionsT]):
    """Jobs on a pool of long-lived workers: each prediction recorded once, a failing job retried on
    its unanswered questions (``retries`` times), the jobs' outcomes yielded as they finish."""

    def __init__(self, options: OptionsT) -> None:
        self.options = options
        self.workers: dict[str, WorkerInfo] = {}

    @abstractmethod
    def open_pool(self, plugins: list[PluginRef], jobs: int) -> WorkerPool[Any]:
        """A started pool for ``jobs`` jobs whose workers re-register ``plugins``."""

    def run_jobs(self, jobs: Sequence[Job], record: Callable[[Prediction], None]) -> Iterator[Outcome]:
        if not jobs:
            return
        book = Book(jobs, record, self.options.retries)
        self.workers = book.workers
        pool = self.open_pool(plugin_refs(jobs), len(jobs))
        todo: deque[tuple[int, Job]] = deque((i, portable_job(j)) for i, j in enumerate(jobs))
        try:
            while todo or pool.busy():
                while todo and pool.has_free_worker():
                    pool.submit(*todo.popleft())
                finished = pool.wait(POLL_SECONDS)
                for index, prediction in pool.streamed():
                    book.accept(index, prediction)
                for handle in finished:
                    outcome = pool.collect(handle)
                    result = book.finish(outcome)
                    if isinstance(result, Job):
                        todo.append((outcome.index, result))
                    else:
                        yield result
        finally:
            pool.close()
