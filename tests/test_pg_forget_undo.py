"""The undo window of forget requests on a PostgreSQL store (issue 32): the ledger lives in the
database, so two clients on one database (two workers) hide, restore and purge the same items, and
nothing is written to the data directory."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from pg_fixtures import pg_server  # noqa: F401 - the session fixture

from memlab.client import MemoryClient
from memlab.errors import NotFoundError
from memlab.forget_ledger import EVENTS_TABLE, PENDING_TABLE

pytestmark = pytest.mark.pg

FACT = "I weigh 92 kilos and my locker code is 7731-QX."
OTHER = "I have a cat called Miso."
REQUEST = "Please forget my weight."


def _client(url: str, data_dir: Path | None = None, *, forget_undo_hours: float = 24.0) -> MemoryClient:
    return MemoryClient(
        "rag",
        {"embedder": "hashing", "store": url},
        data_dir=data_dir,
        require_persistence=True,
        forget_undo_hours=forget_undo_hours,
    )


def _ledger_text(url: str) -> str:
    """Every value of the ledger's tables, as one string."""
    with psycopg.connect(url) as conn:
        rows = [*conn.execute(f"SELECT * FROM {PENDING_TABLE}"), *conn.execute(f"SELECT * FROM {EVENTS_TABLE}")]
    return repr(rows)


def test_two_workers_share_the_undo_window(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    first, second = _client(url, tmp_path / "a"), _client(url, tmp_path / "b")
    try:
        first.remember("alice", [("user", FACT), ("user", OTHER)])
        report = first.remember("alice", [("user", REQUEST)])
        assert report.forgotten and all(f.restorable_until is not None for f in report.forgotten)
        fact_id = next(f.item_id for f in report.forgotten if f.text == FACT)
        # Hidden from the other worker too.
        assert FACT not in [m.text for m in second.memories("alice")]
        assert "7731" not in second.recall("alice", "what do I weigh?", k=10).context
        with pytest.raises(NotFoundError):
            second.get("alice", fact_id)
        assert fact_id in [p["item"]["id"] for p in second.export("alice")["pending_deletion"]]
        (event,) = second.history("alice", fact_id)
        assert event["reason"] == "forget_request" and event["request"] == REQUEST
        # Restored through the other worker: back for both.
        assert second.restore("alice", fact_id).text == FACT
        assert FACT in [m.text for m in first.memories("alice")]
        with pytest.raises(NotFoundError):
            first.restore("alice", fact_id)
        assert [e["event"] for e in first.history("alice", fact_id)] == ["DELETE", "RESTORE"]
    finally:
        first.close()
        second.close()
    for unused in (tmp_path / "a", tmp_path / "b"):  # a database store leaves the data directory unused
        assert not unused.exists() or not list(unused.rglob("*")), list(unused.rglob("*"))


def test_the_window_ends_for_every_worker_and_leaves_no_request_text(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    tiny = 0.5 / 3600  # half a second
    first, second = _client(url, tmp_path / "a", forget_undo_hours=tiny), _client(url, forget_undo_hours=tiny)
    try:
        first.remember("alice", [("user", FACT), ("user", OTHER)])
        report = first.remember("alice", [("user", REQUEST)])
        fact_id = next(f.item_id for f in report.forgotten if f.text == FACT)
        assert "forget my weight" in _ledger_text(url), "held until the window ends"
        time.sleep(0.6)
        # Both reach the purge at once: each item is deleted once, by whichever claims it.
        for client in (first, second):
            client._purge_due()
        for client in (first, second):
            assert [m.text for m in client.memories("alice")] == [OTHER]
            (deleted, purged) = client.history("alice", fact_id)
            assert deleted["request"] is None and purged["event"] == "PURGE"
            with pytest.raises(NotFoundError):
                client.restore("alice", fact_id)
        text = _ledger_text(url)
        assert "forget my weight" not in text and "7731" not in text
        with psycopg.connect(url) as conn:
            assert conn.execute(f"SELECT count(*) FROM {PENDING_TABLE}").fetchone() == (0,)
    finally:
        first.close()
        second.close()
    assert not (tmp_path / "a").exists() or not list((tmp_path / "a").rglob("*"))


def test_a_restart_keeps_pending_items_and_forget_user_clears_the_ledger(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    with _client(url) as client:
        client.remember("alice", [("user", FACT), ("user", OTHER)])
        report = client.remember("alice", [("user", REQUEST)])
    fact_id = next(f.item_id for f in report.forgotten if f.text == FACT)
    with _client(url) as reopened:  # a restart: still hidden, still restorable
        assert [m.text for m in reopened.memories("alice")] == [OTHER]
        assert reopened.restore("alice", fact_id).text == FACT
        reopened.forget("alice")
    assert "alice" not in _ledger_text(url)


def test_concurrent_purges_claim_each_row_once(pg_server, tmp_path: Path) -> None:  # noqa: F811
    """While one worker's purge holds the rows, another's claims none of them (SKIP LOCKED)."""
    url = pg_server.database_for(tmp_path)
    first, second = _client(url, forget_undo_hours=1), _client(url, forget_undo_hours=1)
    try:
        first.remember("alice", [("user", FACT), ("user", OTHER)])
        report = first.remember("alice", [("user", REQUEST)])
        ids = [f.item_id for f in report.forgotten]
        with first._pending._claim("alice", ids) as mine:
            assert sorted(mine) == sorted(ids)
            with second._pending._claim("alice", ids) as theirs:
                assert theirs == []
        assert first._pending.hidden("alice") == set(), "the claim ended: the rows are gone"
    finally:
        first.close()
        second.close()


def test_undo_hours_zero_deletes_at_once_on_postgres(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    with _client(url, forget_undo_hours=0) as client:
        client.remember("alice", [("user", FACT), ("user", OTHER)])
        report = client.remember("alice", [("user", REQUEST)])
        assert report.forgotten and all(f.restorable_until is None for f in report.forgotten)
        assert [m.text for m in client.memories("alice")] == [OTHER]
        with pytest.raises(NotFoundError):
            client.restore("alice", report.forgotten[0].item_id)
        assert client.history("alice", report.forgotten[0].item_id)[0]["request"] is None
    assert "forget my weight" not in _ledger_text(url)
