"""``--executor ray``: jobs on a pool of Ray actors (a Ray cluster, or a local Ray started on demand).
Each actor is one long-lived worker process running many jobs; actors end with the driver."""

from __future__ import annotations

import math
import os
import socket
import traceback
from collections import deque
from typing import Any

from pydantic import Field

from memlab.errors import MemlabError, MissingDependencyError
from memlab.results import Prediction
from memlab.run.executors import parse_options
from memlab.run.executors.pool import PoolExecutor, PoolOptions
from memlab.run.executors.process import usable_cores
from memlab.run.executors.worker import (
    JobOutcome,
    PluginRef,
    WorkerLostError,
    _portable,
    end_with_parent,
    run_in_worker,
)
from memlab.run.job import Job

RAY_HINT = 'pip install "memlab[ray]"  (or: pip install "ray>=2.9")'


class RayOptions(PoolOptions):
    """Options of ``--executor ray`` (Ray itself gives each worker cpus_per_job BLAS threads)."""

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


class _RayPool:
    """A fixed number of Ray actors; an actor that dies is replaced by a new one."""

    def __init__(self, ray: Any, options: RayOptions, size: int, plugins: list[PluginRef]) -> None:
        from ray.util.queue import Queue

        self.ray, self.plugins = ray, plugins
        self.stream = Queue(actor_options={"num_cpus": 0})  # takes no CPU slot away from the workers
        self.actor_class = ray.remote(_RayJobWorker).options(
            num_cpus=options.cpus_per_job, num_gpus=options.gpus_per_job
        )
        self.driver = (socket.gethostname(), os.getpid())
        self.actors = [self._new_actor() for _ in range(size)]
        self.idle = deque(self.actors)
        self.running: dict[Any, tuple[Any, int]] = {}  # object ref -> (actor, job index)

    def _new_actor(self) -> Any:
        return self.actor_class.remote(self.stream, *self.driver)

    def busy(self) -> bool:
        return bool(self.running)

    def has_free_worker(self) -> bool:
        return bool(self.idle)

    def submit(self, index: int, job: Job) -> None:
        actor = self.idle.popleft()
        self.running[actor.run.remote(index, job, self.plugins)] = (actor, index)

    def wait(self, timeout: float) -> list[Any]:
        ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=timeout)
        return list(ready)

    def streamed(self) -> list[tuple[int, Prediction]]:
        size = self.stream.qsize()
        return self.stream.get_nowait_batch(size) if size else []

    def collect(self, handle: Any) -> JobOutcome:
        from ray.exceptions import RayActorError

        actor, index = self.running.pop(handle)
        try:
            outcome = self.ray.get(handle)
        except RayActorError as exc:  # the actor's process died: replace it
            outcome = JobOutcome(index, error=WorkerLostError(f"a Ray worker died: {exc}"))
            self.ray.kill(actor)
            self.actors.remove(actor)
            actor = self._new_actor()
            self.actors.append(actor)
        except Exception as exc:  # e.g. the outcome could not be deserialized
            outcome = JobOutcome(index, error=_portable(exc), traceback=traceback.format_exc())
        self.idle.append(actor)
        return outcome

    def close(self) -> None:
        for actor in self.actors:  # also ends jobs still running when the run stops early
            self.ray.kill(actor)
        self.stream.shutdown()


class RayExecutor(PoolExecutor[RayOptions]):
    """Jobs on a pool of Ray actors."""

    def __init__(self, **options: Any) -> None:
        super().__init__(parse_options(RayOptions, "ray", options))
        self.ray = import_ray()  # fail now, with the install hint, not after planning the run

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

    def open_pool(self, plugins: list[PluginRef], jobs: int) -> _RayPool:
        self._connect()
        return _RayPool(self.ray, self.options, self._pool_size(jobs), plugins)
