"""The run pipeline's guarantees (issue 12): fingerprinted resume, the run lock, exit status and
errors.log, a strict predictions file with a way out, clean stops on signals (workers included),
one clear error line for bad input, no double-counted ingest, and concurrent answering that changes
nothing but the wall time. Signals and exit codes are checked on real subprocesses."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import run_helpers
from run_helpers import DATASET, HASHING_READER, llm_reader_args, run_args, run_config

from memlab.cli import main
from memlab.locks import DirectoryLock
from memlab.results import PREDICTIONS_FILE, REJECTS_FILE, RunSummary, read_predictions
from memlab.run.driver import ERRORS_FILE, SettingsChangedError, run
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig
from memlab.testing.fake_llm import HashChoiceLLM, serve

HELPERS = Path(run_helpers.__file__)
HASHING_ARGS = ["--reader.embedder", "hashing"]  # HASHING_READER on the command line


@pytest.fixture(autouse=True)
def _plugins() -> Iterator[None]:
    run_helpers.register()
    yield
    run_helpers.unregister()


def slow_run(out: Path, *more: str) -> list[str]:
    """``memlab run`` arguments of the standard run these tests interrupt, resume and repeat."""
    return run_args(out, "--reader", "slow", "--no-controls", *more)


def _offline_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False"}


def memlab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``memlab ARGS`` in a fresh interpreter (with the test plugins registered)."""
    return subprocess.run(
        [sys.executable, str(HELPERS), *args], capture_output=True, text=True, timeout=timeout, env=_offline_env()
    )


def start_memlab(*args: str, new_session: bool = False) -> subprocess.Popen[str]:
    """``memlab ARGS`` started in the background; ``new_session``: as the leader of its own process group."""
    return subprocess.Popen(
        [sys.executable, str(HELPERS), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_offline_env(),
        start_new_session=new_session,
    )


def wait_for_lines(path: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_bytes().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {n} lines")


def rag_config(out: Path, **rag: object) -> RunConfig:
    backend = BackendSpec(name="rag", config={"embedder": "hashing", **rag})
    return run_config(out, backend, HASHING_READER, cache_dir=out.parent / "cache")


# --------------------------------------------------------------------------- fingerprints and resume
def test_resume_with_changed_backend_settings_is_refused_naming_them(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(rag_config(out))
    before = (out / PREDICTIONS_FILE).read_bytes()
    with pytest.raises(SettingsChangedError) as caught:
        run(rag_config(out, top_k=3))
    message = str(caught.value)
    assert "row rag / embedding[hashing]" in message and "backend.config.top_k: 10 -> 3" in message
    assert "new --out" in message and "label" in message
    assert (out / PREDICTIONS_FILE).read_bytes() == before, "nothing was run"
    assert json.loads((out / "config.json").read_text())["backends"][0]["config"] == {"embedder": "hashing"}
    # A distinct label puts both configurations side by side in one run directory.
    both = rag_config(out)
    both = both.model_copy(
        update={
            "backends": [
                *both.backends,
                BackendSpec(name="rag", label="rag-top3", config={"embedder": "hashing", "top_k": 3}),
            ]
        }
    )
    summary = run(both)
    assert {r.backend for r in summary.rows if not r.control} == {"rag", "rag-top3"}
    fingerprints = {(r.backend, r.reader): r.fingerprint for r in summary.rows}
    assert fingerprints[("rag", "embedding[hashing]")] != fingerprints[("rag-top3", "embedding[hashing]")]
    assert all(p.fingerprint == fingerprints[p.row] for p in read_predictions(out))


def full_context_run(out: Path, dataset: str, *more: str) -> list[str]:
    """``memlab run`` arguments of the run the resume checks repeat with another dataset or reader."""
    reader = ["--reader", "embedding", *HASHING_ARGS, *more]
    return run_args(out, "--no-controls", *reader, dataset=dataset, backends="full_context")


def test_resume_with_changed_reader_or_dataset_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(full_context_run(out, "synthetic:personas=1,sessions=8")) == 0
    assert main(full_context_run(out, "synthetic:personas=1,sessions=6")) == 2  # the dataset changed
    changed_reader = full_context_run(out, "synthetic:personas=1,sessions=8", "--reader.top-k", "3")
    assert main(changed_reader) == 2


def test_resume_reports_dataset_and_reader_differences(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(full_context_run(out, "synthetic:personas=1,sessions=8")) == 0
    capsys.readouterr()
    assert main(full_context_run(out, "synthetic:personas=1,sessions=6")) == 2
    err = capsys.readouterr().err
    assert "\nmemlab: error: cannot resume" in err and "Traceback" not in err
    assert 'dataset.spec: "synthetic:personas=1,sessions=8" -> "synthetic:personas=1,sessions=6"' in err
    assert "dataset.content_sha256" in err


def test_summary_rows_come_from_the_current_config_only(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = rag_config(out)
    run(config.model_copy(update={"backends": [*config.backends, BackendSpec(name="full_context")]}))
    summary = run(config)  # the same directory, now without full_context
    assert "full_context" not in {r.backend for r in summary.rows}
    assert any(p.backend == "full_context" for p in read_predictions(out)), "its answers are kept"
    described = json.loads((out / "fingerprints.json").read_text())
    assert {key.split("|")[0] for key in described} >= {"rag", "full_context", "none"}
    assert summary.plugins.get("memlab") and all(
        r.settings["backend"]["package"].startswith("memlab ") for r in summary.rows
    )


def test_concurrency_settings_do_not_change_the_fingerprint(tmp_path: Path) -> None:
    from memlab.run.driver import plan_rows
    from memlab.run.job import cached_dataset

    def fingerprint(llm: dict) -> str:
        config = run_config(
            tmp_path, BackendSpec(name="none"), ReaderSpec(name="llm", config={"llm": llm}), controls=False
        )
        return plan_rows(config, cached_dataset(DATASET))[0].fingerprint

    base = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    same = fingerprint(base)
    assert fingerprint({**base, "max_concurrency": 16, "timeout": 5, "api_key": "sk-x", "max_retries": 0}) == same
    assert fingerprint({**base, "base_url": "http://127.0.0.1:10/v1"}) != same
    assert fingerprint({**base, "temperature": 0.7}) != same
    assert fingerprint({**base, "model": "other"}) != same


# --------------------------------------------------------------------------- the run lock
def test_second_run_on_the_same_directory_stops_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    holder = DirectoryLock(out, purpose="memlab run").acquire()
    try:
        code = main(run_args(out, *HASHING_ARGS))
    finally:
        holder.release()
    assert code == 2
    assert f"memlab: error: another memlab run (pid {os.getpid()}) is using {out}" in capsys.readouterr().err
    assert not (out / PREDICTIONS_FILE).exists()


def test_two_concurrent_cli_runs_one_refused_and_stale_lock_ignored(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = start_memlab(*slow_run(out))
    try:
        wait_for_lines(out / PREDICTIONS_FILE, 1)
        second = memlab(*slow_run(out))
        assert second.returncode == 2
        assert f"another memlab run (pid {first.pid}) is using {out}" in second.stderr
    finally:
        first.kill()  # SIGKILL: leaves a stale lock file behind
        first.communicate()
    third = memlab(*slow_run(out, "--reader.delay", "0"))
    assert third.returncode == 2 and "cannot resume" in third.stderr  # not blocked by the lock; delay changed
    fourth = memlab(*slow_run(out, "--reader.delay", "0.2"))
    assert fourth.returncode == 0, fourth.stderr
    keys = [json.loads(line)["question_id"] for line in (out / PREDICTIONS_FILE).read_text().splitlines()]
    assert len(keys) == len(set(keys)), "no question answered twice"


# --------------------------------------------------------------------------- exit status and errors.log
def test_every_job_failing_exits_nonzero_with_tracebacks_in_errors_log(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = run_args(out, "--no-controls", *HASHING_ARGS, backends="broken_retrieve")
    result = memlab(*args)
    assert result.returncode == 1
    assert "job(s) failed" in result.stderr and "plugin bug in _retrieve" in result.stderr
    assert "Traceback" not in result.stderr and str(out / ERRORS_FILE) in result.stderr
    log = (out / ERRORS_FILE).read_text()
    assert "Traceback (most recent call last)" in log and "_retrieve" in log
    verbose = memlab(*args, "-v")
    assert verbose.returncode == 1 and "Traceback (most recent call last)" in verbose.stderr


def test_a_retrieve_that_returns_none_fails_the_job_visibly(tmp_path: Path) -> None:
    result = memlab(*run_args(tmp_path / "run", "--no-controls", *HASHING_ARGS, backends="none_retrieve"))
    assert result.returncode == 1
    assert "none_retrieve" in result.stderr and "NoneType" in result.stderr


def test_question_errors_exit_nonzero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memlab.testing.recording_server import RecordingServer

    def refuse(body: dict[str, object]) -> str:
        raise RuntimeError("this server answers no question")

    out = tmp_path / "run"
    # An endpoint that lists its model (preflight passes) and refuses every request: each question ends in an error.
    with RecordingServer(refuse) as server:
        reader = [*llm_reader_args(server.base_url, "m"), "--llm.max-retries", "0"]
        code = main(run_args(out, "--no-controls", *reader, dataset="synthetic:personas=1,questions=2"))
    err = capsys.readouterr().err
    assert code == 1, err
    assert "question(s) ended in an error" in err
    assert "question" in (out / ERRORS_FILE).read_text()


def test_unreachable_endpoint_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    # The llm reader against a port nobody listens on: preflight stops the run, nothing is created.
    reader = [*llm_reader_args("http://127.0.0.1:9/v1", "m"), "--llm.max-retries", "0"]
    code = main(run_args(out, "--no-controls", *reader, dataset="synthetic:personas=1,questions=2"))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "preflight found 1 problem(s)" in err and "http://127.0.0.1:9/v1 cannot be reached" in err
    assert not out.exists()


# --------------------------------------------------------------------------- predictions.jsonl
def _bad_line_run(tmp_path: Path, bad: bytes) -> tuple[Path, list[str]]:
    out = tmp_path / "run"
    args = run_args(out, "--no-controls", *HASHING_ARGS)
    assert main(args) == 0
    lines = (out / PREDICTIONS_FILE).read_bytes().splitlines(keepends=True)
    (out / PREDICTIONS_FILE).write_bytes(b"".join(lines[:3]) + bad + b"".join(lines[5:]))  # 2 lost, 1 bad
    return out, args


@pytest.mark.parametrize(
    "bad, problem",
    [
        (b'{"backend": "none", "reader": "x"}\n', "not a valid prediction"),
        (b'{"backend": "none\xff"}\n', "not UTF-8"),
        (b'{"backend": "none", "reader"\n', "not a valid prediction"),
    ],
)
def test_unreadable_line_is_an_error_with_a_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: bytes, problem: str
) -> None:
    out, args = _bad_line_run(tmp_path, bad)
    before = (out / PREDICTIONS_FILE).read_bytes()
    capsys.readouterr()
    assert main(args) == 2
    _one_error_line(
        capsys.readouterr().err, f"{out / PREDICTIONS_FILE}, line 4: {problem}", f"memlab repair-predictions {out}"
    )
    assert (out / PREDICTIONS_FILE).read_bytes() == before, "nothing appended after the bad line"
    assert main(["report", str(out), "--no-plots"]) == 2  # the report refuses it the same way
    assert main(["repair-predictions", str(out)]) == 0
    assert (out / REJECTS_FILE).read_bytes() == bad
    assert main(args) == 0  # the two lost questions and the rejected one are answered again
    assert len(read_predictions(out)) == len(before.splitlines()) + 1  # N - 2 good lines and 1 bad before; all N after


def test_torn_last_line_of_a_killed_run_is_set_aside(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = run_args(out, "--no-controls", *HASHING_ARGS)
    assert main(args) == 0
    lines = (out / PREDICTIONS_FILE).read_bytes().splitlines(keepends=True)
    (out / PREDICTIONS_FILE).write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    assert main(args) == 0
    assert len(read_predictions(out)) == len(lines)
    assert (out / REJECTS_FILE).read_bytes() == lines[-1][:20] + b"\n"


# --------------------------------------------------------------------------- one clear error line
def _one_error_line(err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("memlab run:")]
    assert len(lines) == 1 and lines[0].startswith("memlab: error: "), err
    for needle in needles:
        assert needle in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "dataset, needle",
    [
        ("synthetic:personas=abc", "personas=abc"),
        ("synthetic:foo=1", "foo"),
    ],
)
def test_bad_dataset_specs_are_one_error_line(tmp_path: Path, dataset: str, needle: str) -> None:
    result = memlab(*run_args(tmp_path / "r", *HASHING_ARGS, dataset=dataset))
    assert result.returncode == 2
    _one_error_line(result.stderr, needle)


def test_non_utf8_locomo_file_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "conv.json"
    path.write_bytes(b'[{"sample_id": "c\xff", "conversation": {}, "qa": []}]')
    result = memlab(*run_args(tmp_path / "r", *HASHING_ARGS, dataset=f"locomo:{path}"))
    assert result.returncode == 2
    _one_error_line(result.stderr, str(path))


def test_out_naming_a_file_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "a-file"
    path.write_text("x")
    result = memlab(*run_args(path, *HASHING_ARGS))
    assert result.returncode == 2
    _one_error_line(result.stderr, str(path), "is a file")


def test_a_failed_write_is_one_error_line_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memlab import results

    out = tmp_path / "run"
    original_init = results.PredictionWriter.__init__

    class DiskFull:
        def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
            self.inner, self.writes = inner, 0

        def write(self, text: str) -> int:
            self.writes += 1
            if self.writes > 3:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.inner.write(text)

        def flush(self) -> None:
            self.inner.flush()

        def close(self) -> None:
            self.inner.close()

    def init(self, run_dir) -> None:  # type: ignore[no-untyped-def]
        original_init(self, run_dir)
        self._handle = DiskFull(self._handle)

    monkeypatch.setattr(results.PredictionWriter, "__init__", init)
    args = run_args(out, "--no-controls", *HASHING_ARGS)
    assert main(args) == 2
    _one_error_line(capsys.readouterr().err, str(out / PREDICTIONS_FILE), "No space left on device", "rerun")
    assert len(read_predictions(out)) == 3
    monkeypatch.setattr(results.PredictionWriter, "__init__", original_init)
    assert main(args) == 0
    assert len(read_predictions(out)) == RunSummary.load(out).rows[0].questions > 3


# --------------------------------------------------------------------------- signals
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signals_stop_cleanly_and_the_rerun_resumes(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    out = tmp_path / "run"
    args = slow_run(out)
    process = start_memlab(*args)
    wait_for_lines(out / PREDICTIONS_FILE, 3)
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    saved = len(read_predictions(out))
    assert f"interrupted: {saved} answers saved; rerun the same command to resume" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    finished = memlab(*args, "--reader.delay", "0.2")
    assert finished.returncode == 0, finished.stderr
    keys = [json.loads(line)["question_id"] for line in (out / PREDICTIONS_FILE).read_text().splitlines()]
    assert len(keys) == len(set(keys)) > saved


def _children(pid: int) -> set[int]:
    found = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            found.add(int(status.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in state


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in _children(todo.pop()) - found:
            found.add(child)
            todo.append(child)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    "executor, sig",
    [
        ("process", signal.SIGKILL),
        ("process", signal.SIGTERM),
        pytest.param("ray", signal.SIGKILL, marks=pytest.mark.slow),
    ],
)
def test_workers_end_with_the_driver(tmp_path: Path, executor: str, sig: signal.Signals) -> None:
    if executor == "ray":
        pytest.importorskip("ray")
    out = tmp_path / "run"
    process = start_memlab(*slow_run(out, "--executor", executor, "--workers", "2"))
    try:
        wait_for_lines(out / PREDICTIONS_FILE, 2, timeout=120)
        workers = _descendants(process.pid)  # worker processes (for ray: its gcs, raylet, agents, actors)
        assert workers, "the process executor started workers"
        process.send_signal(sig)
        process.communicate(timeout=60)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "workers outlived the driver"
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_in_a_terminal_stops_driver_and_workers_without_tracebacks(tmp_path: Path) -> None:
    out = tmp_path / "run"
    process = start_memlab(*slow_run(out, "--executor", "process", "--workers", "2"), new_session=True)
    try:
        wait_for_lines(out / PREDICTIONS_FILE, 2, timeout=120)
        workers = _children(process.pid)
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        _, err = process.communicate(timeout=60)
        assert process.returncode == 130, err
        assert "interrupted:" in err and "Traceback" not in err and "KeyboardInterrupt" not in err
        time.sleep(1)
        assert not any(_alive(w) for w in workers)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


# --------------------------------------------------------------------------- ingest accounting
def test_ingest_cost_is_counted_once_across_a_resume(tmp_path: Path) -> None:
    from memlab.run.job import cached_dataset

    dataset = cached_dataset(DATASET)
    expected = sum(max(q.end_index for q in dataset.questions_for(c)) for c in dataset.histories)
    out = tmp_path / "run"
    config = run_config(out, BackendSpec(name="metered"), HASHING_READER, controls=False)
    whole = run(config.model_copy(update={"out": tmp_path / "whole"}))
    assert whole.rows[0].ingest_prompt_tokens == expected
    run(config.model_copy(update={"max_questions": 2}))  # answers some questions of every history ...
    resumed = run(config)  # ... then the rest, replaying (and paying for) the start again
    predictions = read_predictions(out)
    assert sum(p.ingest_prompt_tokens for p in predictions) == expected
    assert resumed.rows[0].ingest_prompt_tokens == expected
    assert resumed.rows[0].ingest_cost_usd == pytest.approx(whole.rows[0].ingest_cost_usd)
    # ingest_seconds goes through the same accounting (the job's _IngestCost) as these counts.


# --------------------------------------------------------------------------- concurrent answering
def test_concurrent_answering_matches_sequential_and_resumes_across_settings(tmp_path: Path) -> None:
    llm = HashChoiceLLM(delay=0.05)
    server = serve(llm)
    try:

        def cli(out: Path, concurrency: int, *more: str) -> int:
            reader = [*llm_reader_args(server.base_url, "fake-model"), "--llm.cache", "false"]
            concurrent = ["--llm.max-concurrency", str(concurrency)]
            return main(run_args(out, *reader, *concurrent, *more, backends="full_context"))

        assert cli(tmp_path / "seq", 1) == 0
        peak_sequential = llm.max_in_flight
        llm.max_in_flight = 0
        assert cli(tmp_path / "par", 8) == 0
        assert peak_sequential == 1 and llm.max_in_flight > 1
        assert cli(tmp_path / "mixed", 1, "--max-questions", "3") == 0
        assert cli(tmp_path / "mixed", 8) == 0  # resumes: concurrency is not part of the fingerprint
    finally:
        server.stop()

    def choices(out: Path) -> dict:
        return {p.key: (p.chosen, p.fingerprint) for p in read_predictions(out)}

    assert choices(tmp_path / "seq") == choices(tmp_path / "par") == choices(tmp_path / "mixed")
    assert RunSummary.load(tmp_path / "seq").rows[0].accuracy == RunSummary.load(tmp_path / "par").rows[0].accuracy


def test_two_endpoints_with_one_model_name_never_share_cached_answers(tmp_path: Path) -> None:
    undecided = serve(HashChoiceLLM(reply=lambda messages: "I cannot decide."), model_id="same-model")
    decided = serve(HashChoiceLLM(reply=lambda messages: "<final_answer>(b)"), model_id="same-model")
    try:

        def cli(server, out: Path) -> int:  # type: ignore[no-untyped-def]
            reader = llm_reader_args(server.base_url, "same-model")
            return main(run_args(out, "--no-controls", *reader, dataset="synthetic:personas=1"))

        assert cli(undecided, tmp_path / "runs" / "a") == 0
        assert cli(decided, tmp_path / "runs" / "b") == 0  # same cache dir (runs/.memlab_cache)
    finally:
        undecided.stop()
        decided.stop()
    a, b = read_predictions(tmp_path / "runs" / "a"), read_predictions(tmp_path / "runs" / "b")
    assert all(p.chosen is None for p in a) and all(p.chosen == 1 for p in b)


# --------------------------------------------------------------------------- shape
def test_the_job_module_imports_no_executor() -> None:
    code = (
        "import sys, memlab.run.job; "
        "print(sorted(m for m in sys.modules if m.startswith('memlab.run') or m in ('ray', 'memlab.runner')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = eval(result.stdout)
    assert "memlab.run.job" in loaded
    assert not [m for m in loaded if m.startswith("memlab.run.executors") or m in ("memlab.run.driver", "ray")]
