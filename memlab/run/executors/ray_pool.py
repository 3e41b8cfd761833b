"""``--executor ray``: jobs on a pool of Ray actors (a Ray cluster, or a local Ray started on demand).
Each actor is one long-lived worker process running many jobs; actors end with the driver."""

from __future__ import annotations

import math
import os
import socket
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memlab.errors import MemlabError, MissingDependencyError
from memlab.results import Prediction
from memlab.run.executors.process import usable_cores
from memlab.run.executors.worker import (
    Book,
    JobOutcome,
    Outcome,
    PluginRef,
    WorkerInfo,
    WorkerLostError,
    _portable,
    end_with_parent,
    plugin_refs,
    portable_job,
    run_in_worker,
)
from memlab.run.job import Job

RAY_HINT = 'pip install "memlab[ray]"  (or: pip install "ray>=2.9")'
POLL_SECONDS = 0.2


class RayOptions(BaseModel):
    """Options of ``--executor ray`` (Ray itself gives each worker cpus_per_job BLAS threads)."""

    model_config = ConfigDict(extra="forbid")

    retries: int = Field(default=2, ge=0, description="extra attempts for a job that raises")
    address: str | None = Field(
        default=None, description="existing cluster ('auto', 'ray://host:10001', host:6379); None starts a local Ray"
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        description="worker actors (default: cluster CPUs / cpus_per_job); local Ray gets this many CPUs",
    )
    cpus_per_job: float = Field(default=1.0, gt=0, description="CPUs each worker actor reserves")
    gpus_per_job: float = Field(default=0.0, ge=0, description="GPUs each worker actor reserves (local LLM readers)")
    runtime_env: dict[str, Any] | None = Field(
        default=None, description="Ray runtime_env for the job (pip packages, env vars, working_dir)"
    )


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingDependencyError("ray", f"--executor ray needs it: {RAY_HINT}") from exc
    return ray


class _RayJobWorker:
    """Body of the Ray actor: one long-lived process that runs many jobs (models load once)."""

    def __init__(self, stream: Any, driver_host: str, driver_pid: int) -> None:
        self._stream = stream
        if socket.gethostname() == driver_host:  # a local actor can watch the driver's pid
            end_with_parent(driver_pid)

    def run(self, index: int, job: Job, plugins: list[PluginRef]) -> JobOutcome:
        return run_in_worker(index, job, plugins, self._stream.put)


class RayExecutor:
    """Jobs on a pool of Ray actors."""

    def __init__(self, **options: Any) -> None:
        from memlab.run.executors import parse_options

        self.options: RayOptions = parse_options(RayOptions, "ray", options)
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
            from memlab.run.executors.reaper import start_reaper

            start_reaper()  # Ray's own agents would outlive a SIGKILLed driver
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

        book = Book(jobs, emit, progress, self.options.retries)
        self.workers = book.workers
        plugins = plugin_refs(jobs)
        stream = Queue(actor_options={"num_cpus": 0})  # takes no CPU slot away from the workers
        actor_class = ray.remote(_RayJobWorker).options(
            num_cpus=self.options.cpus_per_job, num_gpus=self.options.gpus_per_job
        )
        driver = (socket.gethostname(), os.getpid())
        actors = [actor_class.remote(stream, *driver) for _ in range(self._pool_size(len(jobs)))]
        idle = deque(actors)
        todo: deque[tuple[int, Job]] = deque((i, portable_job(j)) for i, j in enumerate(jobs))
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
                for index, prediction in batch(stream):
                    book.accept(index, prediction)
                for ref in ready:
                    actor, index = pending.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except RayActorError as exc:  # the actor's process died: replace it
                        outcome = JobOutcome(index, error=WorkerLostError(f"a Ray worker died: {exc}"))
                        ray.kill(actor)
                        actors.remove(actor)
                        actor = actor_class.remote(stream, *driver)
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
