"""Executors run a run's independent jobs: ``local`` (in this process, one after another),
``process`` (a pool of worker processes) and ``ray`` (Ray actors). The driver alone writes result
files: executors hand predictions back (streamed as they are made) and the driver appends them.

Every executor keeps the same guarantees: each prediction is emitted once; heavy objects load once
per worker; a job that raises is retried (process, ray) re-running only its unanswered questions,
and if it keeps failing its error is yielded while the other jobs' results are kept; workers end
with the driver. The process and Ray executors share one dispatch and retry loop
(``pool.PoolExecutor``) and differ only in their pool of workers.
"""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from memlab.errors import MemlabError, UnknownNameError
from memlab.results import Prediction, ResultsWriteError
from memlab.run.executors.worker import JobFailed, Outcome
from memlab.run.job import Job, run_job

__all__ = ["Executor", "LocalExecutor", "make_executor", "parse_options"]


class Executor(ABC):
    """Where a run's jobs run; the driver calls ``execute``, each executor implements ``run_jobs``."""

    def execute(
        self,
        jobs: Sequence[Job],
        emit: Callable[[Prediction], None],
        progress: Callable[[int], Any],
    ) -> Iterator[Outcome]:
        """Run ``jobs``; call ``emit`` once per prediction (in the driver) and yield each job's outcome."""

        def record(prediction: Prediction) -> None:
            emit(prediction)
            progress(1)  # progress counts predictions

        return self.run_jobs(jobs, record)

    @abstractmethod
    def run_jobs(self, jobs: Sequence[Job], record: Callable[[Prediction], None]) -> Iterator[Outcome]:
        """Run ``jobs``, calling ``record`` (in the driver) once per prediction; yield each job's outcome."""


def parse_options(model: type[BaseModel], name: str, options: dict[str, Any]) -> Any:
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        raise MemlabError(f"invalid options for executor {name!r}:\n{exc}") from exc


class LocalExecutor(Executor):
    """Jobs in order, in this process; every prediction reaches disk as soon as it exists."""

    def run_jobs(self, jobs: Sequence[Job], record: Callable[[Prediction], None]) -> Iterator[Outcome]:
        for job in jobs:
            try:
                outcome: list[Prediction] | BaseException = run_job(job, emit=record)
            except Exception as exc:  # reported in the summary; other jobs go on
                if isinstance(exc, ResultsWriteError):
                    raise  # the driver's own writer failed (disk full): stop the run, not one job
                outcome = JobFailed(exc, traceback.format_exc())
            yield job, outcome


def make_executor(name: str = "local", **options: Any) -> Any:
    if name == "local":
        if options:
            raise MemlabError(
                f"executor 'local' takes no options (got {sorted(options)}): use --executor process or ray"
            )
        return LocalExecutor()
    if name == "process":
        from memlab.run.executors.process import ProcessExecutor

        return ProcessExecutor(**options)
    if name == "ray":
        from memlab.run.executors.ray_pool import RayExecutor

        return RayExecutor(**options)
    raise UnknownNameError(f"unknown executor {name!r}: choose local, process or ray")
