"""Executors run the runner's independent jobs. The driver alone writes result files: executors
hand predictions back (streamed, for the local one) and the driver appends them.

``local`` runs jobs one after another in this process and streams every prediction to disk as soon
as it exists, so a killed run loses at most the question in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from memlab.errors import MemlabError, UnknownNameError
from memlab.results import Prediction
from memlab.runner import Job, run_job


class Executor(Protocol):
    def execute(
        self,
        jobs: Sequence[Job],
        emit: Callable[[Prediction], None],
        progress: Callable[[int], Any],
    ) -> Iterator[tuple[Job, list[Prediction] | BaseException]]:
        """Run ``jobs``; call ``emit`` once per prediction (in the driver) and yield each job's outcome."""
        ...


class LocalExecutor:
    """Jobs in order, in this process."""

    def execute(
        self,
        jobs: Sequence[Job],
        emit: Callable[[Prediction], None],
        progress: Callable[[int], Any],
    ) -> Iterator[tuple[Job, list[Prediction] | BaseException]]:
        def stream(prediction: Prediction) -> None:
            emit(prediction)
            progress(1)

        for job in jobs:
            try:
                yield job, run_job(job, emit=stream)
            except Exception as exc:  # reported in the summary; other jobs go on
                yield job, exc


def make_executor(name: str = "local", **options: Any) -> Executor:
    if name == "local":
        if options:
            raise MemlabError(f"executor 'local' takes no options (got {sorted(options)}): use --executor process or ray")
        return LocalExecutor()
    if name in ("process", "ray"):
        from memlab import distributed

        return distributed.make_executor(name, **options)
    raise UnknownNameError(f"unknown executor {name!r}: choose local, process or ray")
