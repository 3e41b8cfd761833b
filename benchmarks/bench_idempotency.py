"""Idempotency keys: what a key costs a write, and whether the compose deployment stores a retry once.

    python benchmarks/bench_idempotency.py [--backend full_context] [--writes 500]
    python benchmarks/bench_idempotency.py --compose [--sends 10]

Default: ``MemoryClient.remember`` with and without a key. Each write with a key records its intent
and then its result in the idempotency log (two SQLite commits, synchronous=FULL) around the
backend's own durable write. Prints the mean time per call of each, one user, one session, a fresh
data directory each.

``--compose``: the layout of ``deploy/compose.yaml`` on this machine: a PostgreSQL server
(``pgserver``, a temporary directory, Unix socket only) and ``memlab serve`` with two worker
processes on it, configured by the same variables (``MEMLAB_SERVE_BACKEND=profile``,
``MEMLAB_STORE``, ``MEMLAB_SERVE_WORKERS=2``, no data directory; the hashing embedder instead of
the model, which idempotency does not involve). The same ``Idempotency-Key`` and body are sent
``--sends`` times at once, each on its own connection (so both workers answer some), a 409
``write_in_progress`` retried as a client would. Prints the answers and ``stored N``: how many
times the message is in the memory (1 is right).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

TEXT = "I adopted a grey cat named Pixel last spring."


def cost_per_write(backend: str, writes: int) -> None:
    from memlab.client import MemoryClient

    options = {} if backend == "full_context" else {"embedder": "hashing"}
    for keyed in (False, True):
        with tempfile.TemporaryDirectory() as data, MemoryClient(backend, options, data_dir=data) as client:
            start = time.perf_counter()
            for i in range(writes):
                key = f"k{i}" if keyed else None
                client.remember("alice", [("user", f"fact {i}")], session_id="s", idempotency_key=key)
            per_call = (time.perf_counter() - start) / writes * 1000
        print(f"{backend}, {writes} remember calls, idempotency_key={keyed}: {per_call:.2f} ms per call")


def _workers(pid: int) -> int:
    """uvicorn's worker processes (spawned by multiprocessing) under the supervisor ``pid``."""
    count = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                count += b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
    return count


def _send(url: str, answers: list[int]) -> None:
    import httpx

    body = {"session_id": "s1", "messages": [{"role": "user", "content": TEXT}]}
    for _attempt in range(100):  # a bounded retry loop, as a client's
        with httpx.Client(base_url=url, trust_env=False, timeout=60) as http:  # a new connection each time
            response = http.post("/v1/users/alice/messages", json=body, headers={"Idempotency-Key": "retry-1"})
        answers.append(response.status_code)
        if response.status_code != 409:
            return
        time.sleep(0.2)


def compose(sends: int) -> None:
    import httpx
    import pgserver

    from memlab.testing.server_process import start_memlab_serve

    root = Path(tempfile.mkdtemp(prefix="mlpg-", dir="/tmp"))  # short: Unix socket paths are limited
    root.chmod(0o755)  # as root, pgserver runs postgres as an unprivileged user that must enter it
    server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        store = server.get_uri()
        os.environ.update(
            {
                "MEMLAB_SERVE_BACKEND": "profile",
                "MEMLAB_STORE": store,
                "MEMLAB_SERVE_WORKERS": "2",
                "MEMLAB_SERVE_BACKEND_CONFIG": '{"embedder": "hashing"}',
            }
        )
        with start_memlab_serve(
            log=root / "serve.log",
            timeout=180,
            ready=lambda s: _workers(s.process.pid) == 2,
            own_session=True,
        ) as service:
            answers: list[int] = []
            threads = [threading.Thread(target=_send, args=(service.url, answers)) for _ in range(sends)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            items = httpx.get(f"{service.url}/v1/users/alice/memories", trust_env=False, timeout=60).json()["items"]
        stored = sum(1 for item in items if item["text"] == TEXT and "#" in item["id"])  # raw turns, not entries
        print(f"compose layout: 2 workers on PostgreSQL, no data dir; {sends} sends of one Idempotency-Key")
        print(f"answers: {dict(sorted(Counter(answers).items()))}")
        print(f"stored {stored}")
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="full_context")
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--compose", action="store_true", help="2 workers on PostgreSQL, one key sent --sends times")
    parser.add_argument("--sends", type=int, default=10)
    args = parser.parse_args()
    if args.compose:
        compose(args.sends)
    else:
        cost_per_write(args.backend, args.writes)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
