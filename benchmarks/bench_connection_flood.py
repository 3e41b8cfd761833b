"""A flood of idle connections under a low open-files limit: does /healthz keep answering?

    python benchmarks/bench_connection_flood.py [--sockets 1100] [--nofile 1024] [--hold 5]

Starts ``memlab serve --backend full_context`` on 127.0.0.1 in a subprocess whose open-files limit
is set to ``--nofile`` (``resource.setrlimit`` before the service starts, as ``ulimit -n 1024``
would), then opens ``--sockets`` TCP connections to it that send nothing, keeps them ``--hold``
seconds, and closes them. Meanwhile a probe sends ``GET /healthz`` on a fresh connection every
50 ms (1 s timeout). Everything is on loopback and bounded (a fixed number of sockets and probes;
it stops by itself). Prints the slowest probe, the failed probes, and how many lines the service
logged about connections (accept errors, shed connections). Targets: every probe <= 1 s, fewer than
10 log lines.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

SERVER = (
    "-c",
    "import os, resource, sys; limit = int(os.environ['BENCH_NOFILE']); "
    "resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)); "
    "from memlab.server.cli import main; sys.exit(main(sys.argv[1:]))",
)
PROBE_INTERVAL = 0.05
PROBE_TIMEOUT = 1.0
ABOUT_CONNECTIONS = ("accept", "connection", "file descriptor", "open-files", "out of system resource")


def probe(host: str, port: int) -> tuple[float | None, str]:
    """Seconds until /healthz answered 200 on a new connection (None: failed), and how it failed."""
    start = time.perf_counter()
    answer = b""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT) as sock:
            sock.settimeout(max(0.01, PROBE_TIMEOUT - (time.perf_counter() - start)))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
    except TimeoutError:
        return None, "no answer within 1 s" if answer or time.perf_counter() - start < PROBE_TIMEOUT else "timeout"
    except OSError as exc:
        return None, type(exc).__name__
    if not answer.startswith(b"HTTP/1.1 200"):
        return None, f"answer {answer[:20]!r}"
    return time.perf_counter() - start, "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=1100)
    parser.add_argument("--nofile", type=int, default=1024, help="the service's open-files limit")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds the idle sockets stay open")
    args = parser.parse_args()
    from memlab.testing.server_process import start_memlab_serve

    os.environ["BENCH_NOFILE"] = str(args.nofile)  # read by the server subprocess (SERVER)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "serve.log"
        with start_memlab_serve(
            "--backend",
            "full_context",
            "--data-dir",
            str(Path(tmp) / "data"),
            log=log,
            entry=SERVER,
        ) as server:
            host, port = server.url.removeprefix("http://").split(":")
            before = len(log.read_text(errors="replace").splitlines())
            latencies: list[tuple[float | None, str]] = []
            flooding = threading.Event()
            flooding.set()

            def probe_loop() -> None:
                while flooding.is_set():
                    latencies.append(probe(host, int(port)))
                    time.sleep(PROBE_INTERVAL)

            prober = threading.Thread(target=probe_loop)
            prober.start()
            idle: list[socket.socket] = []
            refused = 0
            start = time.perf_counter()
            try:
                for _ in range(args.sockets):
                    sock = socket.socket()
                    sock.settimeout(2)
                    try:
                        sock.connect((host, int(port)))
                    except OSError:
                        refused += 1
                        sock.close()
                        continue
                    idle.append(sock)
                opened = time.perf_counter() - start
                time.sleep(args.hold)
            finally:
                for sock in idle:
                    sock.close()
                time.sleep(1.0)  # probes after the flood too
                flooding.clear()
                prober.join()
            lines = log.read_text(errors="replace").splitlines()[before:]
        about = [line for line in lines if any(word in line.lower() for word in ABOUT_CONNECTIONS)]
        answered = [seconds for seconds, _ in latencies if seconds is not None]
        failures = Counter(why for seconds, why in latencies if seconds is None)
        print(
            f"{args.sockets} idle sockets opened in {opened:.1f} s ({refused} not connected), held {args.hold:.0f} s, "
            f"service open-files limit {args.nofile}"
        )
        print(
            f"/healthz: {len(latencies)} probes, max {max(answered, default=float('nan')):.3f} s, "
            f"failures {len(latencies) - len(answered)}" + (f" {dict(failures)}" if failures else "")
        )
        print(f"log lines about connections: {len(about)}")
        for line in about[:5]:
            print(f"  {line[:200]}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
