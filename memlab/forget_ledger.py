"""What forget requests removed, kept restorable for ``forget_undo_hours``, then deleted for good.

``MemoryClient`` installs a ``ForgetLedger`` as its backend's forget remover (``memlab.forget``).
When a forget request in conversation refers to stored items, the ledger does not delete them at
once: it records them as *pending deletion* (item, the request's text, when, purge time). Until
then:

- the items never reach recall, search, list or get (the client hides them with a filter every
  built-in backend applies, ``HidingFilter``), and a later request never picks them again;
- ``export`` shows them under ``pending_deletion`` with their purge time (what is still held);
- ``MemoryClient.restore(user_id, item_id)`` brings one back; ``history`` shows the deletion
  (``reason: "forget_request"`` and the request's text), the restore, and the purge.

When the window ends (checked on open and before each call, so also when the process was down at
that moment) the backend deletes the items for real, the user's cache entries go
(``memlab.data_subject``), the ledger row and the request text in the history events are dropped:
no text is left in the ledger (SQLite with ``secure_delete``, checkpointed). ``forget_undo_hours``
0 deletes at once. The ledger lives where the memory lives (``open_ledger``): with a PostgreSQL
store in two tables of that database (``PostgresForgetLedger``), shared by every worker and host
and surviving restarts, nothing written to a data directory; with a data directory in
``.memlab-forget.sqlite`` there; otherwise in process memory, as the memory itself is.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import PrivateAttr

from memlab.errors import NotFoundError
from memlab.forget import DeleteAtOnce
from memlab.memory import MemoryFilter
from memlab.types import ForgottenItem, MemoryItem

if TYPE_CHECKING:
    from memlab.memory import Memory

LEDGER_FILE = ".memlab-forget.sqlite"
DEFAULT_UNDO_HOURS = 24.0
REASON = "forget_request"
PENDING_TABLE = "memlab_forget_pending"  # PostgreSQL tables (their prefix makes ``memlab compact-store`` rewrite them)
EVENTS_TABLE = "memlab_forget_events"
POOL_SIZE = 4  # a purge holds one connection (its row locks) while the backend deletes


class HidingFilter(MemoryFilter):
    """A ``MemoryFilter`` that also leaves out items pending deletion (never empty, so always applied)."""

    _hidden: frozenset[str] = PrivateAttr(default_factory=frozenset)

    @classmethod
    def around(cls, filters: MemoryFilter | None, hidden: set[str]) -> HidingFilter:
        base = filters.model_dump(exclude_defaults=True) if filters is not None else {}
        made = cls.model_validate(base)
        made._hidden = frozenset(hidden)
        return made

    @property
    def empty(self) -> bool:
        return False

    def matches(self, item: MemoryItem) -> bool:
        return item.id not in self._hidden and (super().empty or super().matches(item))


def _checked_hours(undo_hours: float) -> float:
    if not isinstance(undo_hours, (int, float)) or isinstance(undo_hours, bool) or undo_hours < 0:
        raise ValueError(f"forget_undo_hours must be a number >= 0 (0 deletes at once), got {undo_hours!r}")
    return float(undo_hours)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()


class ForgetLedger:
    """Pending deletions and their history events (see the module doc); a ``memlab.forget.Remover``."""

    def __init__(self, data_dir: Path | None, *, undo_hours: float = DEFAULT_UNDO_HOURS) -> None:
        self.undo_hours = _checked_hours(undo_hours)
        self.path = Path(data_dir) / LEDGER_FILE if data_dir is not None else None
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            ":memory:" if self.path is None else str(self.path), check_same_thread=False, isolation_level=None
        )
        with self._lock:
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA secure_delete=ON")  # dropped rows are overwritten, not left in free pages
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS pending (user_id TEXT NOT NULL, item_id TEXT NOT NULL, item TEXT NOT NULL,"
                " request TEXT NOT NULL, forgotten_at REAL NOT NULL, purge_at REAL NOT NULL,"
                " PRIMARY KEY (user_id, item_id))"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL,"
                " item_id TEXT NOT NULL, event TEXT NOT NULL, reason TEXT NOT NULL, request TEXT, at REAL NOT NULL,"
                " restorable_until REAL)"
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS events_item ON events (user_id, item_id)")

    # ------------------------------------------------------------------ the remover
    def hidden(self, user_id: str) -> set[str]:
        with self._lock:
            rows = self._db.execute("SELECT item_id FROM pending WHERE user_id=?", (user_id,)).fetchall()
        return {row[0] for row in rows}

    def remove(self, memory: Memory, user_id: str, items: list[MemoryItem], request: str) -> list[ForgottenItem]:
        """Hide ``items`` until the window ends (or, with 0 hours, delete them now), recording why."""
        now = time.time()
        if self.undo_hours == 0:
            removed = DeleteAtOnce().remove(memory, user_id, items, request)
            self._events(user_id, [f.item_id for f in removed], "DELETE", None, now, None)
            return removed
        purge_at = now + self.undo_hours * 3600
        self._hold(user_id, [(item.id, item.model_dump_json()) for item in items], request, now, purge_at)
        until = datetime.fromtimestamp(purge_at, tz=timezone.utc)
        return [ForgottenItem(item_id=i.id, text=i.text, request=request, restorable_until=until) for i in items]

    # ------------------------------------------------------------------ the records (SQLite here)
    def _hold(self, user_id: str, items: Sequence[tuple[str, str]], request: str, now: float, purge_at: float) -> None:
        """Record ``items`` (id, JSON) as pending deletion, with their DELETE events, in one transaction."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            for item_id, raw in items:
                self._db.execute(
                    "INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?, ?, ?)",
                    (user_id, item_id, raw, request, now, purge_at),
                )
                self._db.execute(
                    "INSERT INTO events (user_id, item_id, event, reason, request, at, restorable_until)"
                    " VALUES (?, ?, 'DELETE', ?, ?, ?, ?)",
                    (user_id, item_id, REASON, request, now, purge_at),
                )
            self._db.execute("COMMIT")

    def _events(
        self, user_id: str, item_ids: Sequence[str], event: str, request: str | None, at: float, until: float | None
    ) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT INTO events (user_id, item_id, event, reason, request, at, restorable_until)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(user_id, item_id, event, REASON, request, at, until) for item_id in item_ids],
            )

    # ------------------------------------------------------------------ reading
    def is_pending(self, user_id: str, item_id: str) -> bool:
        with self._lock:
            row = self._db.execute("SELECT 1 FROM pending WHERE user_id=? AND item_id=?", (user_id, item_id)).fetchone()
        return row is not None

    def pending(self, user_id: str) -> list[dict[str, Any]]:
        """What is still held for ``user_id`` though a forget request removed it (export's ``pending_deletion``)."""
        rows = self._pending_rows(user_id)
        return [
            {"item": json.loads(item), "request": request, "forgotten_at": _iso(at), "purge_at": _iso(purge)}
            for item, request, at, purge in rows
        ]

    def events(self, user_id: str, item_id: str) -> list[dict[str, Any]]:
        rows = self._event_rows(user_id, item_id)
        events = []
        for event, reason, request, at, until in rows:
            entry: dict[str, Any] = {"event": event, "reason": reason, "at": _iso(at)}
            if event == "DELETE":
                entry["request"] = request  # None once the deletion is final: the text is gone
                entry["restorable_until"] = _iso(until) if until is not None else None
            events.append(entry)
        return events

    def _pending_rows(self, user_id: str) -> list[tuple[str, str, float, float]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT item, request, forgotten_at, purge_at FROM pending WHERE user_id=? ORDER BY forgotten_at, item_id",
                (user_id,),
            ).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def _event_rows(self, user_id: str, item_id: str) -> list[tuple[str, str, str | None, float, float | None]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT event, reason, request, at, restorable_until FROM events WHERE user_id=? AND item_id=? ORDER BY seq",
                (user_id, item_id),
            ).fetchall()
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    # ------------------------------------------------------------------ changes
    def restore(self, user_id: str, item_id: str) -> MemoryItem:
        """Take ``item_id`` off the pending list (it is visible again); NotFoundError when it is not pending."""
        raw = self._take(user_id, item_id, time.time())
        if raw is None:
            raise NotFoundError(
                f"user {user_id!r} has no memory {item_id!r} pending deletion (only what a forget request "
                "removed can be restored, within its undo window)"
            )
        return MemoryItem.model_validate_json(raw)

    def _take(self, user_id: str, item_id: str, now: float) -> str | None:
        """Drop one pending row and record its RESTORE, in one transaction: the item's JSON, None if not pending."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute(
                "SELECT item FROM pending WHERE user_id=? AND item_id=?", (user_id, item_id)
            ).fetchone()
            if row is not None:
                self._db.execute("DELETE FROM pending WHERE user_id=? AND item_id=?", (user_id, item_id))
                # The request stays readable in the DELETE event: the item (which restates it) is kept again.
                self._db.execute(
                    "INSERT INTO events (user_id, item_id, event, reason, request, at, restorable_until)"
                    " VALUES (?, ?, 'RESTORE', 'restore', NULL, ?, NULL)",
                    (user_id, item_id, now),
                )
            self._db.execute("COMMIT")
        return None if row is None else str(row[0])

    def next_due(self) -> float | None:
        with self._lock:
            row = self._db.execute("SELECT MIN(purge_at) FROM pending").fetchone()
        return row[0] if row and row[0] is not None else None

    def due(self, now: float | None = None) -> dict[str, list[str]]:
        """Users and their item ids whose undo window has ended."""
        with self._lock:
            rows = self._db.execute(
                "SELECT user_id, item_id FROM pending WHERE purge_at <= ? ORDER BY user_id", (now or time.time(),)
            ).fetchall()
        found: dict[str, list[str]] = {}
        for user_id, item_id in rows:
            found.setdefault(user_id, []).append(item_id)
        return found

    def purge(self, memory: Memory, user_id: str, item_ids: Sequence[str]) -> None:
        """Delete ``item_ids`` for good: from the backend, then their rows and the request texts here.

        Only the ids this caller claims are purged (``_claim``): one still pending and not being
        purged by a concurrent call. If the backend's delete fails, the rows stay pending (retried).
        """
        with self._claim(user_id, item_ids) as claimed:
            if claimed:
                DeleteAtOnce().remove(memory, user_id, [MemoryItem(id=i, text="") for i in claimed], "")

    @contextlib.contextmanager
    def _claim(self, user_id: str, item_ids: Sequence[str]) -> Iterator[list[str]]:
        """The ids of ``item_ids`` still pending; when the block ends without error their rows go,
        their events lose the request text and gain a PURGE event. A file store has one writer process."""
        claimed = [item_id for item_id in item_ids if self.is_pending(user_id, item_id)]
        yield claimed
        if not claimed:
            return
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            for item_id in claimed:
                self._db.execute("DELETE FROM pending WHERE user_id=? AND item_id=?", (user_id, item_id))
                self._db.execute("UPDATE events SET request=NULL WHERE user_id=? AND item_id=?", (user_id, item_id))
                self._db.execute(
                    "INSERT INTO events (user_id, item_id, event, reason, request, at, restorable_until)"
                    " VALUES (?, ?, 'PURGE', ?, NULL, ?, NULL)",
                    (user_id, item_id, REASON, now),
                )
            self._db.execute("COMMIT")
            self._checkpoint()

    def scrub(self, user_id: str, item_id: str) -> None:
        """``item_id`` was deleted through the API: its events keep no request text."""
        with self._lock:
            self._db.execute("UPDATE events SET request=NULL WHERE user_id=? AND item_id=?", (user_id, item_id))
            self._checkpoint()

    def forget_user(self, user_id: str) -> None:
        """Everything about ``user_id`` goes (``MemoryClient.forget``)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM pending WHERE user_id=?", (user_id,))
            self._db.execute("DELETE FROM events WHERE user_id=?", (user_id,))
            self._db.execute("COMMIT")
            self._checkpoint()

    def _checkpoint(self) -> None:
        # Deleted text must not linger in the write-ahead log either.
        if self.path is not None:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            self._db.close()


class PostgresForgetLedger(ForgetLedger):
    """The same records in the memory's PostgreSQL database (tables ``memlab_forget_pending`` and
    ``memlab_forget_events``), so every worker and host hides, restores and purges the same items.

    A purge claims its rows with ``SELECT ... FOR UPDATE SKIP LOCKED`` and keeps that transaction
    open while the backend deletes: two workers reaching the same due items purge each once, a
    restore racing a purge waits for it (then finds nothing to restore), and a purge whose backend
    delete fails (or whose worker dies) rolls back, leaving the rows pending for the next one.
    What is dropped is deleted with ``DELETE`` (and the events' request text set to NULL): no query
    returns it any more; its bytes stay in the table files until ``memlab compact-store`` rewrites
    them (the tables' ``memlab_`` prefix puts them in it), as for the idempotency log and the stores.
    """

    def __init__(self, url: str, *, undo_hours: float = DEFAULT_UNDO_HOURS) -> None:
        from memlab.pg import lock_key, open_pool

        self.undo_hours = _checked_hours(undo_hours)
        self.path = None
        self._pool = open_pool(url, max_size=POOL_SIZE, autocommit=True)
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("memlab-schema", PENDING_TABLE),))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {PENDING_TABLE} (user_id TEXT NOT NULL, item_id TEXT NOT NULL,"
                " item TEXT NOT NULL, request TEXT NOT NULL, forgotten_at DOUBLE PRECISION NOT NULL,"
                " purge_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (user_id, item_id))"
            )
            conn.execute(f"CREATE INDEX IF NOT EXISTS {PENDING_TABLE}_due ON {PENDING_TABLE} (purge_at)")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {EVENTS_TABLE} (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                " user_id TEXT NOT NULL, item_id TEXT NOT NULL, event TEXT NOT NULL, reason TEXT NOT NULL,"
                " request TEXT, at DOUBLE PRECISION NOT NULL, restorable_until DOUBLE PRECISION)"
            )
            conn.execute(f"CREATE INDEX IF NOT EXISTS {EVENTS_TABLE}_item ON {EVENTS_TABLE} (user_id, item_id)")

    def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._pool.connection() as conn:
            return list(conn.execute(sql, params).fetchall())

    def hidden(self, user_id: str) -> set[str]:
        return {row[0] for row in self._fetch(f"SELECT item_id FROM {PENDING_TABLE} WHERE user_id=%s", (user_id,))}

    def _hold(self, user_id: str, items: Sequence[tuple[str, str]], request: str, now: float, purge_at: float) -> None:
        with self._pool.connection() as conn, conn.transaction():
            for item_id, raw in items:
                conn.execute(
                    f"INSERT INTO {PENDING_TABLE} VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (user_id, item_id)"
                    " DO UPDATE SET item=EXCLUDED.item, request=EXCLUDED.request,"
                    " forgotten_at=EXCLUDED.forgotten_at, purge_at=EXCLUDED.purge_at",
                    (user_id, item_id, raw, request, now, purge_at),
                )
                conn.execute(
                    f"INSERT INTO {EVENTS_TABLE} (user_id, item_id, event, reason, request, at, restorable_until)"
                    " VALUES (%s, %s, 'DELETE', %s, %s, %s, %s)",
                    (user_id, item_id, REASON, request, now, purge_at),
                )

    def _events(
        self, user_id: str, item_ids: Sequence[str], event: str, request: str | None, at: float, until: float | None
    ) -> None:
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {EVENTS_TABLE} (user_id, item_id, event, reason, request, at, restorable_until)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(user_id, item_id, event, REASON, request, at, until) for item_id in item_ids],
            )

    def is_pending(self, user_id: str, item_id: str) -> bool:
        return bool(self._fetch(f"SELECT 1 FROM {PENDING_TABLE} WHERE user_id=%s AND item_id=%s", (user_id, item_id)))

    def _pending_rows(self, user_id: str) -> list[tuple[str, str, float, float]]:
        rows = self._fetch(
            f"SELECT item, request, forgotten_at, purge_at FROM {PENDING_TABLE} WHERE user_id=%s"
            " ORDER BY forgotten_at, item_id",
            (user_id,),
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def _event_rows(self, user_id: str, item_id: str) -> list[tuple[str, str, str | None, float, float | None]]:
        rows = self._fetch(
            f"SELECT event, reason, request, at, restorable_until FROM {EVENTS_TABLE}"
            " WHERE user_id=%s AND item_id=%s ORDER BY seq",
            (user_id, item_id),
        )
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def _take(self, user_id: str, item_id: str, now: float) -> str | None:
        # DELETE ... RETURNING waits for a purge holding the row, then finds it gone: one of them wins.
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                f"DELETE FROM {PENDING_TABLE} WHERE user_id=%s AND item_id=%s RETURNING item", (user_id, item_id)
            ).fetchone()
            if row is not None:
                conn.execute(
                    f"INSERT INTO {EVENTS_TABLE} (user_id, item_id, event, reason, request, at, restorable_until)"
                    " VALUES (%s, %s, 'RESTORE', 'restore', NULL, %s, NULL)",
                    (user_id, item_id, now),
                )
        return None if row is None else str(row[0])

    def next_due(self) -> float | None:
        rows = self._fetch(f"SELECT MIN(purge_at) FROM {PENDING_TABLE}", ())
        return rows[0][0] if rows and rows[0][0] is not None else None

    def due(self, now: float | None = None) -> dict[str, list[str]]:
        rows = self._fetch(
            f"SELECT user_id, item_id FROM {PENDING_TABLE} WHERE purge_at <= %s ORDER BY user_id, item_id",
            (now or time.time(),),
        )
        found: dict[str, list[str]] = {}
        for user_id, item_id in rows:
            found.setdefault(user_id, []).append(item_id)
        return found

    @contextlib.contextmanager
    def _claim(self, user_id: str, item_ids: Sequence[str]) -> Iterator[list[str]]:
        # The row locks are held until the backend's delete is done and the rows are gone (or rolled back).
        with self._pool.connection() as conn, conn.transaction():
            rows = conn.execute(
                f"SELECT item_id FROM {PENDING_TABLE} WHERE user_id=%s AND item_id = ANY(%s)"
                " ORDER BY item_id FOR UPDATE SKIP LOCKED",
                (user_id, list(item_ids)),
            ).fetchall()
            claimed = [row[0] for row in rows]
            yield claimed
            if claimed:
                conn.execute(f"DELETE FROM {PENDING_TABLE} WHERE user_id=%s AND item_id = ANY(%s)", (user_id, claimed))
                conn.execute(
                    f"UPDATE {EVENTS_TABLE} SET request=NULL WHERE user_id=%s AND item_id = ANY(%s)",
                    (user_id, claimed),
                )
                with conn.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO {EVENTS_TABLE} (user_id, item_id, event, reason, request, at, restorable_until)"
                        " VALUES (%s, %s, 'PURGE', %s, NULL, %s, NULL)",
                        [(user_id, item_id, REASON, time.time()) for item_id in claimed],
                    )

    def scrub(self, user_id: str, item_id: str) -> None:
        with self._pool.connection() as conn:
            conn.execute(f"UPDATE {EVENTS_TABLE} SET request=NULL WHERE user_id=%s AND item_id=%s", (user_id, item_id))

    def forget_user(self, user_id: str) -> None:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(f"DELETE FROM {PENDING_TABLE} WHERE user_id=%s", (user_id,))
            conn.execute(f"DELETE FROM {EVENTS_TABLE} WHERE user_id=%s", (user_id,))

    def close(self) -> None:
        self._pool.close()


def open_ledger(*, data_dir: Path | None, database_url: str | None, undo_hours: float) -> ForgetLedger:
    """The ledger beside the memory: its database, else its data directory, else process memory."""
    if database_url is not None:
        return PostgresForgetLedger(database_url, undo_hours=undo_hours)
    return ForgetLedger(data_dir, undo_hours=undo_hours)
