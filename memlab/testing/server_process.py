"""A server run as a child process on loopback, started and stopped the same way by tests and benchmarks.

``start_server`` runs a command (``memlab serve``, ``python -m memlab.llm.server``, a test's own
launcher) with its stdout and stderr in a log file, and returns once ``GET <url><health_path>``
answers 200. A server that exits first, or does not answer in time, raises ``ServerStartError``
naming the command, with the end of its output. ``start_memlab_serve`` is ``memlab serve`` on a free
port. ``ServerProcess.stop`` (or leaving its ``with`` block) shuts it down gracefully, so persistent
backends flush, and kills it if it takes too long::

    with start_memlab_serve("--backend", "rag", "--data-dir", str(data), log=tmp / "serve.log") as server:
        httpx.get(f"{server.url}/healthz")

Only the standard library is used (the health check is ``urllib``), so plugin authors' tests need
nothing more than ``memlab`` itself.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.errors import MemlabError
from memlab.server.settings import API_KEYS_ENV

HOST = "127.0.0.1"
MEMLAB_SERVE = ("-m", "memlab.server.cli")  # what ``memlab serve`` runs, for ``python``
OUTPUT_TAIL_CHARS = 4000

# Loopback only: a proxy named in the environment must never see these requests.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ServerStartError(MemlabError):
    """A server process exited, or did not answer its health check in time, before it was ready."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServerProcess(contextlib.AbstractContextManager["ServerProcess"]):
    """A running server: its process, its base URL (``http://127.0.0.1:PORT``) and its output's log file.

    ``with`` it to have it stopped at the end of the block."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path
    command: list[str]
    own_session: bool = False
    stop_signal: int = signal.SIGTERM
    stop_timeout: float = 15.0

    def output_tail(self, chars: int = OUTPUT_TAIL_CHARS) -> str:
        """The end of what the server wrote to stdout and stderr."""
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """Send ``stop_signal`` (graceful shutdown) and wait ``stop_timeout`` s, then kill what is left.

        A server started in its own session takes its whole process group with it: worker
        processes, one still starting included.
        """
        if self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=self.stop_timeout)
        if self.own_session:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        elif self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(
    argv: Sequence[str],
    *,
    port: int,
    log: Path,
    health_path: str = "/healthz",
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    ready: Callable[[ServerProcess], bool] | None = None,
    own_session: bool = False,
    stop_signal: int = signal.SIGTERM,
    stop_timeout: float = 15.0,
) -> ServerProcess:
    """Run ``argv``, a server that listens on 127.0.0.1:``port``, and return it once it is healthy.

    Healthy: ``GET <url><health_path>`` answers 200 and ``ready(server)`` (when given) is true.
    Raises ``ServerStartError`` with the end of the server's output when the process exits first
    or is not healthy after ``timeout`` seconds (it is stopped then).
    """
    command = list(argv)
    with log.open("wb") as handle:
        process = subprocess.Popen(
            command,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            start_new_session=own_session,  # its own process group: stop() leaves no orphans
        )
    server = ServerProcess(process, f"http://{HOST}:{port}", log, command, own_session, stop_signal, stop_timeout)
    health_url = server.url + health_path
    deadline = time.monotonic() + timeout
    try:
        while not (_answers(health_url) and (ready is None or ready(server))):
            if process.poll() is not None:
                what = f"exited with code {process.returncode} before {health_url} answered"
                raise ServerStartError(_failure(server, what))
            if time.monotonic() > deadline:
                raise ServerStartError(_failure(server, f"was not healthy at {health_url} after {timeout:.0f} s"))
            time.sleep(0.1)
    except BaseException:  # not ready, or the caller was interrupted: leave no server behind
        server.stop()
        raise
    return server


def memlab_serve_command(*args: str, port: int, entry: Sequence[str] = MEMLAB_SERVE) -> list[str]:
    """``memlab serve *args`` on 127.0.0.1:``port``, logging warnings and errors only.

    ``entry`` is what ``python`` runs instead of ``-m memlab.server.cli`` (e.g. a test's ``-c``
    launcher that registers a backend first).
    """
    return [sys.executable, *entry, "--host", HOST, "--port", str(port), "--log-level", "warning", *args]


def memlab_serve_env(api_keys: str | None = None) -> dict[str, str]:
    """This environment with ``api_keys`` as ``MEMLAB_API_KEYS`` (None: no key from the environment),
    model hubs off (``HF_HUB_OFFLINE``) and mem0's telemetry off."""
    env = {k: v for k, v in os.environ.items() if k != API_KEYS_ENV}
    env.update({"HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False"})
    if api_keys:
        env[API_KEYS_ENV] = api_keys
    return env


def start_memlab_serve(
    *args: str, log: Path, api_keys: str | None = None, entry: Sequence[str] = MEMLAB_SERVE, **options: Any
) -> ServerProcess:
    """``memlab serve *args`` on a free 127.0.0.1 port (see ``memlab_serve_command`` and
    ``memlab_serve_env``), its output in ``log``; ``options`` go to ``start_server``."""
    port = free_port()
    command = memlab_serve_command(*args, port=port, entry=entry)
    return start_server(command, port=port, log=log, env=memlab_serve_env(api_keys), **options)


def _answers(url: str) -> bool:
    try:
        with _DIRECT.open(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, http.client.HTTPException):  # not listening yet (URLError is an OSError), or not 200
        return False


def _failure(server: ServerProcess, what: str) -> str:
    output = server.output_tail().rstrip() or "(no output)"
    return f"the server {what}\n  command: {shlex.join(server.command)}\n  log: {server.log}\n{output}"
