"""memlab.testing.server_process: a child-process server is returned only once healthy, and a
server that dies or never answers is reported with its command and the end of its output."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from memlab.testing.server_process import ServerStartError, free_port, start_server


def test_a_healthy_server_is_returned_and_stopped(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    with start_server(command, port=port, log=tmp_path / "server.log", health_path="/") as server:
        assert server.url == f"http://127.0.0.1:{port}" and server.process.poll() is None
    assert server.process.returncode is not None, "leaving the block stops the server"


def test_a_server_that_exits_is_reported_with_its_output(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import sys; sys.exit('bad flag --nope: the server cannot start')"]
    with pytest.raises(ServerStartError, match="exited with code 1") as failure:
        start_server(command, port=free_port(), log=tmp_path / "server.log")
    assert "bad flag --nope: the server cannot start" in str(failure.value)
    assert "command: " in str(failure.value) and str(tmp_path / "server.log") in str(failure.value)


def test_a_server_that_never_answers_is_stopped_and_reported(tmp_path: Path) -> None:
    script = "import sys, time; print('still loading the model', file=sys.stderr, flush=True); time.sleep(60)"
    started = time.monotonic()
    with pytest.raises(
        ServerStartError, match=r"was not healthy at http://127\.0\.0\.1:\d+/healthz after 1 s"
    ) as failure:
        start_server([sys.executable, "-c", script], port=free_port(), log=tmp_path / "server.log", timeout=1)
    assert "still loading the model" in str(failure.value)
    assert time.monotonic() - started < 30, "the silent server was stopped, not waited for"


def test_ready_must_hold_too(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    checks: list[int] = []

    def ready(server: object) -> bool:
        checks.append(1)
        return len(checks) >= 3  # e.g. until all workers are up

    with start_server(command, port=port, log=tmp_path / "server.log", health_path="/", ready=ready):
        assert len(checks) == 3
