"""Idempotency keys live in the memory's PostgreSQL database (issue 34): one table shared by every
client (worker, host), surviving a restart, nothing written to the data directory; a claim left by
a writer that died is resolved by the next request with its key."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest
from pg_fixtures import pg_server  # noqa: F401 - the session fixture

from memlab.client import MemoryClient
from memlab.errors import ConflictError, WriteInProgressError
from memlab.idempotency import TABLE, fingerprint
from memlab.pg import lock_key

pytestmark = pytest.mark.pg


def _client(url: str, data_dir: Path | None = None) -> MemoryClient:
    return MemoryClient("rag", {"embedder": "hashing", "store": url}, data_dir=data_dir, require_persistence=True)


def _rows(url: str, user: str) -> list[tuple[str, str | None]]:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT key, result FROM {TABLE} WHERE user_id=%s ORDER BY key", (user,)).fetchall()


def test_two_clients_on_one_database_store_a_retried_write_once(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    first, second = _client(url, tmp_path / "a"), _client(url, tmp_path / "b")  # two workers, data dirs unused
    try:
        reports = [
            (first if n % 2 else second).remember(
                "alice", [("user", "I adopted a cat named Pixel.")], idempotency_key="k1"
            )
            for n in range(10)
        ]
        assert len({r.model_dump_json(exclude={"seconds"}) for r in reports}) == 1
        assert [i.text for i in first.memories("alice")] == ["I adopted a cat named Pixel."]
        with pytest.raises(ConflictError, match="different write"):
            second.remember("alice", [("user", "something else")], idempotency_key="k1")
        assert [key for key, _ in _rows(url, "alice")] == ["k1"]
    finally:
        first.close()
        second.close()
    for unused in (tmp_path / "a", tmp_path / "b"):  # the docs say a database store leaves --data-dir unused
        assert not unused.exists() or not list(unused.rglob("*")), list(unused.rglob("*"))
    reopened = _client(url)  # a restart (and no data directory at all): the key is still known
    try:
        again = reopened.remember("alice", [("user", "I adopted a cat named Pixel.")], idempotency_key="k1")
        assert again.first_turn == reports[0].first_turn and len(reopened.memories("alice")) == 1
        reopened.forget("alice")
        assert _rows(url, "alice") == [], "forget removes the user's keys"
    finally:
        reopened.close()


def _leave_claim(url: str, user: str, key: str, text: str, first_turn: int) -> None:
    """The row a worker writes before its backend write, as if it died before marking it done."""
    request = {"session_id": "default", "messages": [{"role": "user", "content": text, "timestamp": None}]}
    intent = {"session_id": "default", "first_turn": first_turn, "messages": 1}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {TABLE} VALUES (%s, %s, %s, %s, NULL, %s)",
            (user, key, fingerprint(request), json.dumps(intent), time.time()),
        )


def test_a_claim_of_a_dead_writer_is_resolved_by_the_retry(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    with _client(url) as client:
        # Died before the backend wrote: the retry stores the message once.
        _leave_claim(url, "bob", "lost", "I keep bees.", 0)
        report = client.remember("bob", [("user", "I keep bees.")], idempotency_key="lost")
        assert report.first_turn == 0 and len(client.memories("bob")) == 1
        # Died after the backend wrote, before the done mark: the retry answers it, storing nothing.
        client.remember("bob", [("user", "I moved to Lisbon.")])  # lands at turn 1 without a key
        _leave_claim(url, "bob", "landed", "I moved to Lisbon.", 1)
        again = client.remember("bob", [("user", "I moved to Lisbon.")], idempotency_key="landed")
        assert again.first_turn == 1 and again.messages == 1 and len(client.memories("bob")) == 2
        assert all(result is not None for _, result in _rows(url, "bob"))


def test_a_write_running_on_another_worker_is_in_progress(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    with _client(url) as client:
        _leave_claim(url, "carol", "busy", "I play chess.", 0)
        with psycopg.connect(url, autocommit=True) as other_worker:  # holds the key's lock: still writing
            other_worker.execute("SELECT pg_advisory_lock(%s)", (lock_key("memlab-idempotency", "carol", "busy"),))
            with pytest.raises(WriteInProgressError, match="still in progress"):
                client.remember("carol", [("user", "I play chess.")], idempotency_key="busy")
            assert client._writes.recover(client._turns_stored) == (0, 0), "a running write is left alone"
        assert client.memories("carol") == []
        assert client.remember("carol", [("user", "I play chess.")], idempotency_key="busy").first_turn == 0
