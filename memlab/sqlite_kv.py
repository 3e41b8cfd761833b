"""One small persistent key-value store on SQLite, shared by memlab's caches (LLM responses,
embeddings, judge verdicts).

Safe for several threads (one lock per handle) and several processes (WAL journal, waits up to a
minute for a writer). Every ``put`` commits at once, so a killed run keeps what it paid for.
Values are ``str`` or ``bytes`` and come back as stored.
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


class SQLiteKV:
    """``SQLiteKV(path, table)``: ``get``/``put`` (and ``get_many``/``put_many``), ``len()``, ``close``."""

    def __init__(self, path: str | Path, table: str = "kv") -> None:
        if not _TABLE.match(table):
            raise ValueError(f"invalid table name {table!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.table = table
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value NOT NULL, created REAL NOT NULL)"
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

    def put(self, key: str, value: Value) -> None:
        self.put_many({key: value})

    def put_many(self, items: Mapping[str, Value]) -> None:
        now = time.time()
        with self._lock:
            db = self._conn()
            db.executemany(
                f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?, ?)", [(k, v, now) for k, v in items.items()]
            )
            db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn().execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
