"""One small persistent key-value store on SQLite, shared by memlab's caches (LLM responses,
embeddings, judge verdicts).

Safe for several threads (one lock per handle) and several processes (WAL journal, waits up to a
minute for a writer). Every ``put`` commits at once, so a killed run keeps what it paid for.
Values are ``str`` or ``bytes`` and come back as stored.

Entries may carry owners (``put_many(..., owner=tag)``, see ``memlab.data_subject``);
``forget_owner(tag)`` deletes them and rewrites the file, so the deleted values leave the database
file and its write-ahead log (``secure_delete`` zeroes freed pages; VACUUM, then a WAL truncate).
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

Value = str | bytes
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _use_wal(db: sqlite3.Connection, *, deadline: float) -> None:
    """Put the file in WAL mode (once per file: the mode persists). Two connections opening a new
    file at once make one fail at once with "database is locked" (SQLite skips the busy handler
    there), so that is retried until ``deadline``."""
    while True:
        try:
            if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class SQLiteKV:
    """``SQLiteKV(path, table)``: ``get``/``put`` (and ``get_many``/``put_many``), ``len()``, ``close``."""

    def __init__(self, path: str | Path, table: str = "kv") -> None:
        if not _TABLE.match(table):
            raise ValueError(f"invalid table name {table!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.table = table
        self._lock = threading.Lock()
        self._owned: set[tuple[str, str]] = set()  # (key, owner) pairs known to be recorded
        self._db: sqlite3.Connection | None = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        with self._lock:
            _use_wal(self._db, deadline=time.monotonic() + 60)
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value NOT NULL, created REAL NOT NULL)"
            )
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {table}_owners (key TEXT NOT NULL, owner TEXT NOT NULL,"
                " PRIMARY KEY (owner, key))"
            )
            self._db.commit()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise sqlite3.ProgrammingError(f"{self.path}: the store is closed")
        return self._db

    def get(self, key: str) -> Value | None:
        with self._lock:
            row = self._conn().execute(f"SELECT value FROM {self.table} WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def get_many(self, keys: Iterable[str]) -> dict[str, Value]:
        """The stored values of those keys that are present."""
        keys = list(keys)
        found: dict[str, Value] = {}
        with self._lock:
            for start in range(0, len(keys), 500):  # SQLite limits the number of parameters
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, value FROM {self.table} WHERE key IN ({marks})"
                found.update(self._conn().execute(query, chunk).fetchall())
        return found

    def put(self, key: str, value: Value, *, owner: str | None = None) -> None:
        self.put_many({key: value}, owner=owner)

    def put_many(self, items: Mapping[str, Value], *, owner: str | None = None) -> None:
        now = time.time()
        with self._lock:
            db = self._conn()
            db.executemany(
                f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?, ?)", [(k, v, now) for k, v in items.items()]
            )
            if owner is not None:
                db.executemany(f"INSERT OR IGNORE INTO {self.table}_owners VALUES (?, ?)", [(k, owner) for k in items])
            db.commit()

    def own(self, keys: Iterable[str], owner: str) -> None:
        """Tag entries already stored (a cache hit for another user) with one more owner."""
        with self._lock:
            new = [(k, owner) for k in keys if (k, owner) not in self._owned]
            if not new:  # a hit this process tagged already: no write per cache hit
                return
            db = self._conn()
            db.executemany(f"INSERT OR IGNORE INTO {self.table}_owners VALUES (?, ?)", new)
            db.commit()
            if len(self._owned) > 200_000:
                self._owned.clear()
            self._owned.update(new)

    def forget_owner(self, owner: str) -> int:
        """Delete every entry ``owner`` wrote or used, then rewrite the file without their bytes."""
        with self._lock:
            db = self._conn()
            keys = [row[0] for row in db.execute(f"SELECT key FROM {self.table}_owners WHERE owner = ?", (owner,))]
            if not keys:
                return 0
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                db.execute(f"DELETE FROM {self.table} WHERE key IN ({marks})", chunk)
                db.execute(f"DELETE FROM {self.table}_owners WHERE key IN ({marks})", chunk)
            db.commit()
            self._owned.clear()
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return len(keys)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn().execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
