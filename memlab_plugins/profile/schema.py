"""The profile store's SQLite schema, its migrations, and how a connection is opened.

One file per store (``profile.sqlite`` in the backend's data directory; ``:memory:`` without one),
WAL mode, ``secure_delete`` on (deleted text is overwritten with zeros, not left in free pages),
and a ``meta`` table holding the schema version; ``MIGRATIONS`` upgrade older files in place.
Queries live in ``store``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from memlab.errors import MemlabError
from memlab.schema_versions import upgrade_schema

SCHEMA_VERSION = 3


class ProfileStoreError(MemlabError):
    """An operation that cannot be applied (unknown entry, closed entry, wrong user), or a bad store file."""


class Cursor(Protocol):
    """What the store reads off an executed statement: a ``sqlite3.Cursor``, or pg_store's result."""

    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> int | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class SqlRunner(Protocol):
    """What runs the store's SQL: a ``sqlite3.Connection``, or pg_store's PostgreSQL connection wrapper."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...


class Database(SqlRunner, Protocol):
    """The connection a store holds: runs its SQL, and is closed with the store."""

    def close(self) -> None: ...


_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    entry_id TEXT NOT NULL, version INTEGER NOT NULL, user_id TEXT NOT NULL,
    aspect TEXT NOT NULL, value TEXT NOT NULL, stance TEXT NOT NULL, evidence TEXT NOT NULL,
    valid_from INTEGER NOT NULL, valid_from_time TEXT, valid_to INTEGER, valid_to_time TEXT,
    reason TEXT, closed_reason TEXT, op TEXT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (entry_id, version)
);
CREATE INDEX IF NOT EXISTS entries_user ON entries (user_id, valid_to);
CREATE TABLE IF NOT EXISTS operations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, session_id TEXT, session_order INTEGER,
    op TEXT NOT NULL, entry_id TEXT, version INTEGER, reason TEXT, evidence TEXT NOT NULL,
    source TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS operations_entry ON operations (user_id, entry_id);
CREATE TABLE IF NOT EXISTS sessions (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, session_order INTEGER NOT NULL, turns INTEGER NOT NULL,
    PRIMARY KEY (user_id, session_id)
);
"""


def _migrate_1_to_2(db: SqlRunner) -> None:
    # v2 keeps embeddings next to the rows (no re-embedding on reopen) and the raw user turns that
    # retrieval can add as supporting evidence.
    db.execute("ALTER TABLE entries ADD COLUMN aspect_vector BLOB")
    db.execute("ALTER TABLE entries ADD COLUMN text_vector BLOB")
    db.execute(
        "CREATE TABLE IF NOT EXISTS turns (user_id TEXT NOT NULL, session_id TEXT NOT NULL, turn_index INTEGER NOT NULL,"
        " role TEXT NOT NULL, content TEXT NOT NULL, vector BLOB, PRIMARY KEY (user_id, session_id, turn_index))"
    )


def _migrate_2_to_3(db: SqlRunner) -> None:
    # v3: an entry deleted through the API keeps its version chain with the text erased
    # (``erased_at`` set), raw turns keep their message timestamps for dated rendering, and an
    # entry says whether it is a statement ("likes jazz") or an attribute with one value ("lives in: Berlin").
    db.execute("ALTER TABLE entries ADD COLUMN erased_at TEXT")
    db.execute("ALTER TABLE entries ADD COLUMN kind TEXT NOT NULL DEFAULT 'statement'")
    db.execute("ALTER TABLE turns ADD COLUMN timestamp TEXT")


MIGRATIONS: dict[int, Callable[[SqlRunner], None]] = {1: _migrate_1_to_2, 2: _migrate_2_to_3}


def connect(path: Path | None) -> sqlite3.Connection:
    """Open (creating or migrating) a store file; ``None`` opens a private in-memory store."""
    if sqlite3.sqlite_version_info < (3, 35, 0):  # the store's statements use RETURNING (statements.py)
        raise ProfileStoreError(
            f"the profile store needs SQLite 3.35 or newer; this Python has {sqlite3.sqlite_version}"
        )
    # Autocommit mode: every transaction in ``store`` is explicit (BEGIN IMMEDIATE ... COMMIT).
    db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False, timeout=60, isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA secure_delete=ON")
    if path is not None:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    try:
        _initialise(db, path)
    except BaseException:
        db.close()
        raise
    return db


def _initialise(db: sqlite3.Connection, path: Path | None) -> None:
    db.executescript(
        "BEGIN IMMEDIATE;" + _SCHEMA_V1 + "INSERT OR IGNORE INTO meta VALUES ('schema_version', '1'); COMMIT;"
    )
    db.execute("BEGIN IMMEDIATE")
    try:
        stored = schema_version(db)
        upgrade_schema(db, stored, SCHEMA_VERSION, MIGRATIONS, where=f"{path} (profile store)", error=ProfileStoreError)
        if stored < SCHEMA_VERSION:
            db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def schema_version(db: SqlRunner) -> int:
    return int(db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
