"""The process and Ray executors: same predictions as the local executor, bounded retries of
failing jobs without duplicate predictions, and resume of an interrupted run under the local executor.

The Ray tests start one local Ray with 2 CPUs for the module and are marked slow.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import distributed_helpers
import pytest
from distributed_helpers import FlakyMemory

from memlab.errors import MemlabError, MissingDependencyError
from memlab.registry import backends
from memlab.results import PREDICTIONS_FILE, Prediction, RunSummary, read_predictions
from memlab.run.driver import run
from memlab.run.executors import LocalExecutor, make_executor
from memlab.run.executors.worker import PluginRef, ensure_plugins, plugin_refs
from memlab.run.job import Job
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig

DATASET = "synthetic:personas=3,sessions=4,questions=6"
RAG = BackendSpec(name="rag", config={"embedder": "hashing"})
READER = ReaderSpec(name="embedding", config={"embedder": "hashing"})


def make_config(
    out: Path,
    executor: str = "local",
    *,
    backends_: list[BackendSpec] | None = None,
    controls: bool = True,
    **options: Any,
) -> RunConfig:
    return RunConfig(
        dataset=DATASET,
        backends=backends_ or [RAG],
        reader=READER,
        out=out,
        controls=controls,
        cache_dir=out.parent / "cache",
        progress=False,
        executor=executor,
        executor_options=options,
    )


def answers(out: Path) -> dict[tuple[str, str, str], tuple[int | None, list[float]]]:
    return {p.key: (p.chosen, p.scores) for p in read_predictions(out)}


def raw_keys(out: Path) -> list[tuple[str, str, str]]:
    lines = (out / PREDICTIONS_FILE).read_text(encoding="utf-8").splitlines()
    return [Prediction.model_validate_json(line).key for line in lines if line.strip()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Any]:
    """Answers of the local executor: what every other executor must reproduce."""
    out = tmp_path_factory.mktemp("local") / "run"
    summary = run(make_config(out))
    assert not summary.failed_jobs
    result = answers(out)
    assert len(result) == 3 * 18  # rag + 2 controls, 3 personas x 6 questions
    return result


@pytest.fixture
def flaky() -> Iterator[None]:
    """The failing backend, registered in-process only: workers must re-register it themselves."""
    backends.register("flaky", FlakyMemory)
    yield
    backends.unregister("flaky")


def flaky_spec(marker_dir: Path, **config: Any) -> BackendSpec:
    return BackendSpec(name="flaky", config={"embedder": "hashing", "marker_dir": str(marker_dir), **config})


class StopAfter:
    """Wraps an executor and stops the run after ``n`` predictions, like a killed driver."""

    class Stop(Exception):
        pass

    def __init__(self, inner: Any, n: int) -> None:
        self.inner, self.n, self.seen = inner, n, 0

    def execute(self, jobs: Sequence[Job], emit: Callable[[Prediction], None], progress: Callable[[int], Any]) -> Any:
        def counted(prediction: Prediction) -> None:
            emit(prediction)
            self.seen += 1
            if self.seen >= self.n:
                raise StopAfter.Stop

        yield from self.inner.execute(jobs, counted, progress)


class Recording(LocalExecutor):
    """The local executor, remembering which questions it was asked to answer."""

    def __init__(self) -> None:
        self.asked: set[tuple[str, str]] = set()

    def execute(self, jobs: Sequence[Job], emit: Any, progress: Any) -> Any:
        for job in jobs:
            self.asked |= {(job.backend.display + "|" + job.reader.name, q) for q in job.question_ids}
        yield from super().execute(jobs, emit, progress)


# --------------------------------------------------------------------------- shared checks
def check_same_as_local(tmp_path: Path, reference: dict, executor: str, **options: Any) -> Any:
    out = tmp_path / "run"
    runner = make_executor(executor, workers=2, **options)
    summary = run(make_config(out, executor), executor=runner)
    assert not summary.failed_jobs
    assert answers(out) == reference
    assert sorted(raw_keys(out)) == sorted(reference)  # every prediction written exactly once
    return runner


def check_retry_then_success(tmp_path: Path, executor: str, crash: bool = False) -> None:
    marker = tmp_path / "marker"
    out = tmp_path / "run"
    spec = flaky_spec(marker, fail_attempts=1, fail_after=3, crash=crash)
    config = make_config(out, executor, backends_=[spec], controls=False)
    # A crash breaks a whole process pool, costing the other running job an attempt too: one
    # worker keeps the attempt count exact.
    workers = 1 if crash else 2
    summary = run(config, executor=make_executor(executor, workers=workers))
    assert summary.failed_jobs == []
    assert set(distributed_helpers.attempts(marker).values()) == {2}  # failed once, then succeeded
    keys = raw_keys(out)
    assert len(keys) == len(set(keys)) == 18  # the retry did not answer again what was already written
    # The retried replay gives the answers of an uninterrupted one (flaky is rag underneath).
    local = tmp_path / "local"
    run(make_config(local, backends_=[RAG.model_copy(update={"label": "flaky"})], controls=False))
    assert answers(out) == answers(local)


def check_failing_job_reported(tmp_path: Path, executor: str) -> None:
    marker = tmp_path / "marker"
    out = tmp_path / "run"
    spec = flaky_spec(marker, fail_attempts=99, fail_after=2)
    summary = run(
        make_config(out, executor, backends_=[spec, RAG], controls=False),
        executor=make_executor(executor, workers=2, retries=1),
    )
    assert sorted(f["context_id"] for f in summary.failed_jobs) == [f"synthetic-0-p{n}" for n in range(3)]
    assert all("injected failure on attempt 2" in f["error"] for f in summary.failed_jobs)
    assert set(distributed_helpers.attempts(marker).values()) == {2}  # 1 + retries=1, then given up
    predictions = read_predictions(out)
    assert sum(p.backend == "rag" for p in predictions) == 18  # the other backend's jobs are kept
    flaky_ids = [p.question_id for p in predictions if p.backend == "flaky"]
    # Each attempt answered 2 questions before failing; the retry went on from there, nothing twice.
    assert len(flaky_ids) == len(set(flaky_ids)) == 3 * 2 * 2
    assert RunSummary.load(out).failed_jobs == summary.failed_jobs


def check_interrupted_resumes_locally(tmp_path: Path, reference: dict, executor: str) -> None:
    out = tmp_path / "run"
    with pytest.raises(StopAfter.Stop):
        run(make_config(out, executor), executor=StopAfter(make_executor(executor, workers=2), 10))
    first = raw_keys(out)
    assert 10 <= len(first) < len(reference)
    assert len(first) == len(set(first))
    recording = Recording()
    run(make_config(out), executor=recording)
    reader_name = {"longest_option": "longest_option", "embedding[hashing]": READER.name}
    redone = {(f"{b}|{reader_name[r]}", q) for b, r, q in first}
    assert not (redone & recording.asked)  # nothing finished before the stop was asked again
    assert len(recording.asked) == len(reference) - len(first)
    assert answers(out) == reference
    assert sorted(raw_keys(out)) == sorted(reference)


# --------------------------------------------------------------------------- process
def test_process_matches_local(tmp_path: Path, reference: dict) -> None:
    executor = check_same_as_local(tmp_path, reference, "process")
    # Two long-lived workers shared 9 jobs, each loading the dataset once.
    assert 1 <= len(executor.workers) <= 2
    assert all(info.dataset_loads == 1 for info in executor.workers.values())


def test_process_retries_a_failing_job_without_duplicates(tmp_path: Path, flaky: None) -> None:
    check_retry_then_success(tmp_path, "process")


def test_process_replaces_a_crashed_worker(tmp_path: Path, flaky: None) -> None:
    check_retry_then_success(tmp_path, "process", crash=True)


def test_process_reports_a_job_that_keeps_failing(tmp_path: Path, flaky: None) -> None:
    check_failing_job_reported(tmp_path, "process")


def test_process_run_interrupted_resumes_under_local(tmp_path: Path, reference: dict) -> None:
    check_interrupted_resumes_locally(tmp_path, reference, "process")


@pytest.mark.timeout(120)
def test_process_survives_a_burst_of_predictions(tmp_path: Path) -> None:
    # Hundreds of instant answers per job overfill the stream's pipe (64 KiB) before the driver
    # reads it; workers must still exit, and every prediction arrive once.
    out = tmp_path / "run"
    config = make_config(out, "process", backends_=[BackendSpec(name="none")], controls=False).model_copy(
        update={
            "dataset": "synthetic:personas=2,sessions=10,questions=1000",
            "reader": ReaderSpec(name="longest_option"),
        }
    )
    summary = run(config, executor=make_executor("process", workers=2))
    assert not summary.failed_jobs
    keys = raw_keys(out)
    assert len(keys) == len(set(keys)) == summary.rows[0].questions > 800


# --------------------------------------------------------------------------- units
def test_executor_options_are_checked() -> None:
    with pytest.raises(MemlabError, match="address"):
        make_executor("process", address="auto")  # --ray-address given with --executor process
    with pytest.raises(MemlabError, match="retries"):
        make_executor("process", retries=-1)
    with pytest.raises(MemlabError, match="unknown executor"):
        make_executor("dask")


def test_ray_missing_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    with pytest.raises(MissingDependencyError, match=r"memlab\[ray\]"):
        make_executor("ray")


def test_plugin_refs_ship_only_in_process_plugins(flaky: None) -> None:
    job = Job(
        backend=BackendSpec(name="flaky"),
        reader=READER,
        context_id="c",
        dataset=DATASET,
        state_dir=Path("s"),
        cache_dir=Path("c"),
        question_ids=["q"],
    )
    job2 = job.model_copy(update={"backend": RAG})
    refs = plugin_refs([job, job2])
    assert [(r.kind, r.name, r.target) for r in refs] == [("backend", "flaky", "distributed_helpers:FlakyMemory")]
    assert refs[0].search_path == str(Path(distributed_helpers.__file__).resolve().parent)


def test_ensure_plugins_registers_from_the_module_and_names_the_problem(flaky: None) -> None:
    backends.unregister("flaky")
    ensure_plugins([PluginRef(kind="backend", name="flaky", target="distributed_helpers:FlakyMemory")])
    assert backends.get("flaky") is FlakyMemory
    with pytest.raises(MemlabError, match="__main__"):
        ensure_plugins([PluginRef(kind="backend", name="nb", target="__main__:NotebookMemory")])
    with pytest.raises(MemlabError, match="cannot import"):
        ensure_plugins([PluginRef(kind="backend", name="gone", target="no_such_module_xyz:Memory")])


# --------------------------------------------------------------------------- ray
@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """The first Ray test's executor starts a local Ray (2 CPUs, its `workers`); the others reuse it."""
    ray = pytest.importorskip("ray", reason='ray is not installed: pip install "memlab[ray]"')
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry from tests
        yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_matches_local(tmp_path: Path, reference: dict, local_ray: None) -> None:
    import ray

    executor = check_same_as_local(tmp_path, reference, "ray")
    assert ray.cluster_resources()["CPU"] == 2  # started on demand with num_cpus = workers
    # Two actors (2 CPUs) ran all 9 jobs, each loading the dataset once.
    assert len(executor.workers) == 2
    assert sum(1 for info in executor.workers.values() if info.jobs_run > 1) >= 1
    assert all(info.dataset_loads == 1 for info in executor.workers.values())


@pytest.mark.slow
def test_ray_retries_then_reports(tmp_path: Path, flaky: None, local_ray: None) -> None:
    check_retry_then_success(tmp_path / "retry", "ray")
    check_failing_job_reported(tmp_path / "fail", "ray")


@pytest.mark.slow
def test_ray_replaces_a_dead_worker(tmp_path: Path, flaky: None, local_ray: None) -> None:
    check_retry_then_success(tmp_path, "ray", crash=True)


@pytest.mark.slow
def test_ray_run_interrupted_resumes_under_local(tmp_path: Path, reference: dict, local_ray: None) -> None:
    check_interrupted_resumes_locally(tmp_path, reference, "ray")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    assert summary["failed_jobs"] == []
