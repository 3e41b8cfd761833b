"""`memlab serve --workers 2` on one PostgreSQL database: concurrent writes, and a worker killed mid-write."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pg_fixtures import pg_server  # noqa: F401 - the session fixture

from memlab.server.cli import main as serve_main
from memlab.testing.server_process import start_memlab_serve

BACKENDS = {"rag": ["--rag.embedder", "hashing"], "profile": ["--profile.embedder", "hashing"]}


def test_workers_refused_for_a_file_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = serve_main(["--backend", "rag", "--data-dir", str(tmp_path), "--workers", "2"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--workers 2 needs a database store" in err and "--rag.store postgresql://" in err
    assert not (tmp_path / "user-alice").exists()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _workers(pid: int) -> list[int]:
    """uvicorn's worker processes (spawned by multiprocessing) under the supervisor ``pid``."""
    out = []
    for child in _children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        except FileNotFoundError:
            continue
        if b"spawn_main" in cmdline:
            out.append(child)
    return out


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def service(request: pytest.FixtureRequest, pg_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:  # noqa: F811
    backend = request.param
    store = pg_server.database_for(f"workers-{backend}")
    data_dir = tmp_path_factory.mktemp(f"serve-{backend}")
    args = ["--backend", backend, "--data-dir", str(data_dir), "--workers", "2"]
    args += [f"--{backend}.store", store, *BACKENDS[backend]]
    with start_memlab_serve(
        *args,
        log=data_dir / "server.log",
        timeout=180,
        ready=lambda server: len(_workers(server.process.pid)) == 2,
        own_session=True,  # a restarted worker still starting goes with the group at the end
        stop_signal=signal.SIGINT,
        stop_timeout=30,
    ) as server:
        yield {"base": server.url, "proc": server.process, "backend": backend}


def _write(
    base: str,
    user: str,
    session: str,
    writer: int,
    count: int,
    acked: list[tuple[int, int, str]],
    stop: threading.Event | None = None,
) -> None:
    with httpx.Client(base_url=base, timeout=60) as http:
        for i in range(count):
            if stop is not None and stop.is_set():
                return
            text = f"I am writer {writer} and this is my note number {i} about topic w{writer}n{i}."
            try:
                r = http.post(
                    f"/v1/users/{user}/messages",
                    json={"session_id": session, "messages": [{"role": "user", "content": text}]},
                )
            except httpx.HTTPError:
                continue  # the worker died under this request: not acknowledged
            if r.status_code == 201:
                acked.append((writer, r.json()["first_turn"], text))


def _check(base: str, user: str, session: str, acked: list[tuple[int, int, str]]) -> None:
    """Every acknowledged write exactly once, at the turn it was acknowledged with; turns unique and
    gap-free; each writer's writes in the order it made them."""
    items = httpx.get(f"{base}/v1/users/{user}/memories", timeout=60).json()["items"]
    turns = [(i["source"]["turn_index"], i["text"]) for i in items if i["source"].get("session_id") == session]
    indexes = sorted(t for t, _ in turns)
    assert indexes == list(range(len(indexes))), "turn numbers must be unique and gap-free"
    by_text: dict[str, list[int]] = {}
    for turn, text in turns:
        by_text.setdefault(text, []).append(turn)
    for _writer, first_turn, text in acked:
        assert by_text.get(text) == [first_turn], (text, by_text.get(text), first_turn)
    for writer in {w for w, _, _ in acked}:
        mine = [t for w, t, _ in acked if w == writer]
        assert mine == sorted(mine), f"writer {writer}'s turns are out of order: {mine}"


@pytest.mark.pg
@pytest.mark.timeout(600)
def test_two_workers_concurrent_writes_to_the_same_users_and_sessions(service: dict) -> None:
    base, acked = service["base"], {"alice": [], "bob": []}
    threads = [
        threading.Thread(target=_write, args=(base, user, "shared", writer, 10, acked[user]))
        for writer, user in enumerate(["alice", "alice", "alice", "bob", "bob", "bob"])
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for user in ("alice", "bob"):
        assert len(acked[user]) == 30, "every write is acknowledged while no worker fails"
        _check(base, user, "shared", acked[user])
    found = httpx.post(f"{base}/v1/users/alice/search", json={"query": "topic w1n7", "k": 3}, timeout=60).json()
    assert any("w1n7" in i["text"] for i in found["items"])


@pytest.mark.pg
@pytest.mark.timeout(600)
def test_sigkill_of_a_worker_during_writes_loses_no_acknowledged_write(service: dict) -> None:
    base, proc, acked = service["base"], service["proc"], []
    stop = threading.Event()
    threads = [threading.Thread(target=_write, args=(base, "carol", "killed", w, 40, acked, stop)) for w in range(4)]
    for t in threads:
        t.start()
    kills: list[int] = []  # acknowledged writes when each kill happened
    for threshold in (20, 50):  # the second kill may hit the survivor or the worker uvicorn restarted
        deadline = time.monotonic() + 120
        while len(acked) < threshold and time.monotonic() < deadline and any(t.is_alive() for t in threads):
            time.sleep(0.05)
        victims = _workers(proc.pid)
        if victims and any(t.is_alive() for t in threads):
            os.kill(victims[0], signal.SIGKILL)
            kills.append(len(acked))
    for t in threads:
        t.join()
    assert kills and kills[0] >= 20 and len(acked) > kills[0], "writes continued on the surviving worker"
    _check(base, "carol", "killed", acked)


@pytest.mark.pg
@pytest.mark.timeout(300)
def test_a_retried_write_is_stored_once_across_workers(service: dict) -> None:
    """issue 34: each worker kept its own idempotency keys, so 10 retries stored the write twice."""
    base, text = service["base"], "I keep my idempotency keys in the database."
    answers: list[dict] = []

    def send() -> None:
        body = {"session_id": "retried", "messages": [{"role": "user", "content": text}]}
        for _ in range(100):  # a new connection each time: the two workers share the retries
            r = httpx.post(f"{base}/v1/users/dora/messages", json=body, headers={"Idempotency-Key": "k-1"}, timeout=60)
            if r.status_code != 409:  # 409 write_in_progress: the first is still running on the other worker
                assert r.status_code == 201, r.text
                answers.append({k: v for k, v in r.json().items() if k != "seconds"})
                return
            time.sleep(0.1)

    threads = [threading.Thread(target=send) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 10 and all(a == answers[0] for a in answers), answers
    items = httpx.get(f"{base}/v1/users/dora/memories", timeout=60).json()["items"]
    assert [i["text"] for i in items if i["source"].get("session_id") == "retried" and "#" in i["id"]] == [text]


def test_store_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from memlab.server.cli import build_settings

    monkeypatch.setenv("MEMLAB_STORE", "postgresql://memlab@db:5432/memlab")
    assert build_settings(["--backend", "rag"]).backend_config["store"] == "postgresql://memlab@db:5432/memlab"
    flag = build_settings(["--backend", "rag", "--rag.store", "postgresql://other@db/x"])
    assert flag.backend_config["store"] == "postgresql://other@db/x", "a flag wins over the environment"
