"""End-to-end safety of `memlab serve` for every persistent backend (issue 15's Done-when).

- kill -9 during a burst of concurrent writes, 5 times, then restart: every acknowledged write is there;
- two processes on one data directory: the second (a service, or a client) is refused, naming the holder;
- a secret stored, deleted as an item and then with its user: no byte of it left under the data
  directory, in recall, or in any endpoint's output.

Each server is a real `memlab serve` process on 127.0.0.1 (see test_server.start_server); bursts are
bounded (6 writers x at most 30 requests per trial). Models are the hashing embedder: what is
tested is storage, not semantics.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from test_server import ADMIN_KEY, http, serve_until_exit, start_server

from memlab.testing.server_process import ServerProcess, memlab_serve_env

# 6 server starts and 5 kills per backend in the first test alone: ~30-90 s each on a busy 2-core machine
pytestmark = pytest.mark.slow

BACKENDS: dict[str, list[str]] = {
    "full_context": [],
    "rag": ["--rag.embedder", "hashing"],
    "profile": ["--profile.embedder", "hashing"],
    "mem0": ["--mem0.embedder", "hashing"],
}
BACKEND_CONFIG = {
    "full_context": {},
    "rag": {"embedder": "hashing"},
    "profile": {"embedder": "hashing"},
    "mem0": {"embedder": "hashing"},
}
USERS = ["ana", "ben", "cy"]
WRITERS, PER_WRITER, TRIALS = 6, 30, 5
SECRET = "My social security number is SECRET-778899"
SECRET_BYTES = b"778899"


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def serve(tmp: Path, backend: str, data: Path) -> ServerProcess:
    return start_server(tmp, "--backend", backend, "--data-dir", str(data), *BACKENDS[backend], ready_timeout=120)


def token(trial: int, writer: int, n: int) -> str:
    return f"T{trial}W{writer}N{n}X"  # X ends it: no token is a prefix of another


def burst_then_kill(server: ServerProcess, trial: int, kill_after: int) -> set[tuple[str, str]]:
    """Concurrent writers until ``kill_after`` writes are acknowledged, then SIGKILL mid-burst."""
    acked: set[tuple[str, str]] = set()
    failures: list[str] = []
    lock = threading.Lock()
    enough = threading.Event()

    def writer(w: int) -> None:
        with http(server) as client:
            for n in range(PER_WRITER):
                user = USERS[(w + n) % len(USERS)]
                text = f"I put note {token(trial, w, n)} in my locker."
                body = {"session_id": f"trial{trial}", "messages": [{"role": "user", "content": text}]}
                try:
                    response = client.post(f"/v1/users/{user}/messages", json=body)
                except httpx.TransportError:
                    return  # the server died under us: this write was never acknowledged
                if response.status_code == 201:
                    with lock:
                        acked.add((user, token(trial, w, n)))
                        if len(acked) >= kill_after:
                            enough.set()
                else:
                    failures.append(f"write answered {response.status_code}: {response.text[:300]}")
                    enough.set()
                    return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    enough.wait(120)
    server.process.send_signal(signal.SIGKILL)  # no shutdown, no flush: what a crash leaves
    server.process.wait(30)
    for t in threads:
        t.join(60)
    assert not failures, failures[:3]
    return acked


def stored_text(client: httpx.Client, user: str, query: str) -> str:
    """What the service can show of ``user``'s memory: the export, and a search for ``query``."""
    parts = []
    exported = client.get(f"/v1/users/{user}/export")
    if exported.status_code == 200:
        parts.append(exported.text)
    parts.append(client.post(f"/v1/users/{user}/search", json={"query": query, "k": 100}).text)
    return "\n".join(parts)


def test_sigkill_during_concurrent_writes_loses_no_acknowledged_write(backend: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(15)
    acked: set[tuple[str, str]] = set()
    for trial in range(TRIALS):
        server = serve(tmp_path, backend, data)
        if trial:  # what earlier trials acknowledged survived their kill and this restart
            check_all_found(server, acked, trial)
        acked |= burst_then_kill(server, trial, kill_after=rng.randint(5, 40))
        assert acked, "no write was acknowledged before the kill"
    with serve(tmp_path, backend, data) as server:
        check_all_found(server, acked, TRIALS)


def check_all_found(server: ServerProcess, acked: set[tuple[str, str]], trial: int) -> None:
    missing = []
    with http(server) as client:
        for user in USERS:
            wanted = sorted(t for u, t in acked if u == user)
            shown = stored_text(client, user, "note in my locker")
            for t in wanted:
                if (
                    t not in shown
                    and t
                    not in client.post(
                        f"/v1/users/{user}/search", json={"query": f"I put note {t} in my locker.", "k": 100}
                    ).text
                ):
                    missing.append((user, t))
    assert not missing, (
        f"after kill {trial}: {len(missing)} of {len(acked)} acknowledged writes lost, e.g. {missing[:5]}"
    )


def test_second_process_on_a_data_directory_is_refused(backend: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(tmp_path, backend, data) as server:
        second = serve_until_exit("--backend", backend, "--data-dir", str(data), *BACKENDS[backend], timeout=120)
        assert second.returncode == 2 and second.stderr.startswith("memlab: error:"), second.stderr
        assert "in use" in second.stderr and f"pid {server.process.pid}" in second.stderr, second.stderr
        # A chatbot process opening the same directory with MemoryClient is refused by the backend's own lock.
        opener = (
            f"from memlab.client import MemoryClient; "
            f"MemoryClient({backend!r}, {BACKEND_CONFIG[backend]!r}, data_dir={str(data)!r})"
        )
        client = subprocess.run(
            [sys.executable, "-c", opener], capture_output=True, text=True, timeout=120, env=memlab_serve_env()
        )
        assert client.returncode != 0 and "in use" in client.stderr, (
            f"a second process opened {backend}'s data directory: rc={client.returncode} {client.stderr[-800:]}"
        )
        with http(server) as admin:  # the first process is unharmed
            body = {"messages": [{"role": "user", "content": "I still work."}]}
            assert admin.post("/v1/users/ana/messages", json=body).status_code == 201


def files_holding(data: Path, needle: bytes) -> list[str]:
    return [str(p.relative_to(data)) for p in data.rglob("*") if p.is_file() and needle in p.read_bytes()]


def every_output(client: httpx.Client, user: str, ids: list[str]) -> str:
    """Every endpoint's answer about ``user``: search, list, export, each id, each id's history."""
    out = [
        client.post(f"/v1/users/{user}/search", json={"query": q, "k": 100}).text
        for q in ("social security number", SECRET, "what is my SSN?")
    ]
    out += [client.get(f"/v1/users/{user}/memories").text, client.get(f"/v1/users/{user}/export").text]
    for item_id in ids:
        out.append(client.get(f"/v1/users/{user}/memories/{quote(item_id, safe='')}").text)
        out.append(client.get(f"/v1/users/{user}/memories/{quote(item_id, safe='')}/history").text)
    return "\n".join(out)


def test_deleted_secret_leaves_no_trace(backend: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(tmp_path, backend, data) as server:
        with http(server) as admin:
            for user, text in (
                ("ana", SECRET),
                ("ana", "I like green tea in the morning."),
                ("ben", "My cat is called Pixel."),
            ):
                body = {"session_id": "s1", "messages": [{"role": "user", "content": text}]}
                assert admin.post(f"/v1/users/{user}/messages", json=body).status_code == 201
            listed = admin.get("/v1/users/ana/memories")
            assert listed.status_code == 200, f"{backend} cannot list ana's memories: {listed.text[:300]}"
            holding = [i["id"] for i in listed.json()["items"] if "778899" in i["text"]]
            assert holding, f"{backend} lists no item holding the secret: {listed.text[:500]}"
            for item_id in holding:
                deleted = admin.delete(f"/v1/users/ana/memories/{quote(item_id, safe='')}")
                assert deleted.status_code == 204, deleted.text[:300]
            leaks = {
                "endpoints": "778899" in every_output(admin, "ana", holding),
                "files": files_holding(data, SECRET_BYTES),
            }
            assert not leaks["endpoints"] and not leaks["files"], f"after deleting the item: {leaks}"
            assert "green tea" in admin.post("/v1/users/ana/search", json={"query": "green tea"}).text
            assert admin.delete("/v1/users/ana").status_code == 204
            after = every_output(admin, "ana", holding)
            assert "778899" not in after and "green tea" not in after
            assert not files_holding(data, SECRET_BYTES) and not files_holding(data, b"green tea")
            assert "Pixel" in admin.post("/v1/users/ben/search", json={"query": "cat Pixel"}).text
    assert not files_holding(data, SECRET_BYTES), "the secret reappeared on disk at shutdown"
    log = server.log.read_text()
    assert "778899" not in log and ADMIN_KEY not in log
