"""The profile store on PostgreSQL: the same queries, one database for N workers.

Chosen by ``store: postgresql://...`` in the profile config (``--profile.store``; ``ProfileMemory._make_store``).
``PgProfileStore`` is ``store.ProfileStore`` with the PostgreSQL statements (``statements.POSTGRES``:
``%s`` parameters, ``ON CONFLICT`` upserts, ``RETURNING seq``, rows addressed by their keys and
locked ``FOR UPDATE`` where every user's rows are rewritten) and the schema below, written in
PostgreSQL (``BIGSERIAL``, ``BYTEA``) in the PostgreSQL schema ``memlab_profile``, with its own
migrations from stores an older memlab created. Nothing rewrites SQL at run time.

Concurrency: every write of one user (an ingest, ``update``, ``delete``, ``apply``, ``reset``,
``import``) runs inside ``user_scope`` (the backend wraps each one): one transaction holding a transaction-scoped advisory
lock on a hash of the user id, taken *before* the profile is read, so an ingest's read-resolve-write
(and its turn numbering) is serialised per user across all workers and hosts; other users never
wait. Reads (``retrieve``, ``list``, ``export``, ``history``) run in one REPEATABLE READ snapshot.
A rewrite of every user's vectors (``revectorize``, after the embedder changed) locks the rows it
reads, so a concurrent write to another user's rows waits for it instead of being overwritten or missed.
Deleted text leaves the live rows at once; PostgreSQL frees the dead tuples at the next (auto)vacuum
(``VACUUM`` forces it), there is no write-ahead-log truncation to do as for SQLite.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memlab.pg import ensure_schema, lock_key, open_pool
from memlab_plugins.profile import schema
from memlab_plugins.profile.statements import POSTGRES
from memlab_plugins.profile.store import ProfileStore

NAMESPACE = "memlab_profile"

# The newest schema (version ``schema.SCHEMA_VERSION``), in PostgreSQL; ``meta`` is ensure_schema's.
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries ("
    " entry_id TEXT NOT NULL, version INTEGER NOT NULL, user_id TEXT NOT NULL,"
    " aspect TEXT NOT NULL, value TEXT NOT NULL, stance TEXT NOT NULL, evidence TEXT NOT NULL,"
    " valid_from INTEGER NOT NULL, valid_from_time TEXT, valid_to INTEGER, valid_to_time TEXT,"
    " reason TEXT, closed_reason TEXT, op TEXT NOT NULL, created_at TEXT NOT NULL,"
    " aspect_vector BYTEA, text_vector BYTEA, erased_at TEXT, kind TEXT NOT NULL DEFAULT 'statement',"
    " PRIMARY KEY (entry_id, version))",
    "CREATE INDEX IF NOT EXISTS entries_user ON entries (user_id, valid_to)",
    "CREATE TABLE IF NOT EXISTS operations ("
    " seq BIGSERIAL PRIMARY KEY, user_id TEXT NOT NULL, session_id TEXT, session_order INTEGER,"
    " op TEXT NOT NULL, entry_id TEXT, version INTEGER, reason TEXT, evidence TEXT NOT NULL,"
    " source TEXT NOT NULL, created_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS operations_entry ON operations (user_id, entry_id)",
    "CREATE TABLE IF NOT EXISTS sessions ("
    " user_id TEXT NOT NULL, session_id TEXT NOT NULL, session_order INTEGER NOT NULL, turns INTEGER NOT NULL,"
    " PRIMARY KEY (user_id, session_id))",
    "CREATE TABLE IF NOT EXISTS turns ("
    " user_id TEXT NOT NULL, session_id TEXT NOT NULL, turn_index INTEGER NOT NULL,"
    " role TEXT NOT NULL, content TEXT NOT NULL, vector BYTEA, timestamp TEXT,"
    " PRIMARY KEY (user_id, session_id, turn_index))",
)

# Upgrades of stores older memlab versions created: version -> the statements taking it one version up
# (the same steps as ``schema.MIGRATIONS`` for SQLite, in PostgreSQL).
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE entries ADD COLUMN aspect_vector BYTEA",
        "ALTER TABLE entries ADD COLUMN text_vector BYTEA",
        "CREATE TABLE IF NOT EXISTS turns (user_id TEXT NOT NULL, session_id TEXT NOT NULL,"
        " turn_index INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, vector BYTEA,"
        " PRIMARY KEY (user_id, session_id, turn_index))",
    ),
    2: (
        "ALTER TABLE entries ADD COLUMN erased_at TEXT",
        "ALTER TABLE entries ADD COLUMN kind TEXT NOT NULL DEFAULT 'statement'",
        "ALTER TABLE turns ADD COLUMN timestamp TEXT",
    ),
}
assert set(_MIGRATIONS) == set(schema.MIGRATIONS), "a SQLite migration without its PostgreSQL twin"


class Row(tuple):
    """A result row addressed by position or column name, like ``sqlite3.Row`` (``dict(row)`` works)."""

    _names: Sequence[str]

    def __new__(cls, values: Sequence[Any], names: Sequence[str]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _rows(cursor: Any) -> Any:
    names = [d.name for d in cursor.description] if cursor.description else []
    return lambda values: Row(values, names)


class _Result:
    """What ``ProfileStore`` reads off a cursor: rows (fetched at once) and ``rowcount``."""

    lastrowid = None  # new ids come back as rows (RETURNING)

    def __init__(self, rows: list[Row], rowcount: int) -> None:
        self._rows, self.rowcount = rows, rowcount

    def fetchone(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Row]:
        return list(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)


def _run(conn: Any, statement: str, params: Sequence[Any]) -> _Result:
    with conn.cursor(row_factory=_rows) as cur:
        cur.execute(statement, tuple(params))
        rows = cur.fetchall() if cur.description else []
        return _Result(rows, cur.rowcount)


class _PgDb:
    """The ``db`` of a ``PgProfileStore``: runs the store's (PostgreSQL) statements on the connection
    bound to this thread (inside a transaction or user scope), else on a pooled connection for one statement."""

    def __init__(self, url: str, pool_size: int) -> None:
        self.pool = open_pool(url, max_size=pool_size, search_path=NAMESPACE)
        self._local = threading.local()

    def current(self) -> Any:
        return getattr(self._local, "conn", None)

    @contextmanager
    def bound(self, conn: Any) -> Iterator[Any]:
        previous, self._local.conn = self.current(), conn
        try:
            yield conn
        finally:
            self._local.conn = previous

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        conn = self.current()
        if conn is not None:
            return _run(conn, sql, params)
        with self.pool.connection() as conn:
            return _run(conn, sql, params)

    def close(self) -> None:
        self.pool.close()


def _create(conn: Any) -> None:
    """The newest schema from nothing."""
    for statement in _SCHEMA:
        conn.execute(statement)


def _migration(version: int) -> Any:
    def migrate(conn: Any) -> None:
        for statement in _MIGRATIONS[version]:
            conn.execute(statement)

    return migrate


class PgProfileStore(ProfileStore):
    """``ProfileStore`` on PostgreSQL (see the module doc): same queries, per-user advisory locks."""

    db: _PgDb
    sql = POSTGRES

    def __init__(self, url: str, *, pool_size: int = 4) -> None:  # noqa: D107 - no super(): no SQLite file
        self.path = None  # no file: ``purge`` has nothing to truncate
        self.url = url
        self._lock = threading.RLock()
        self.db = _PgDb(url, pool_size)
        try:
            ensure_schema(
                self.db.pool,
                f"{NAMESPACE}.",
                schema.SCHEMA_VERSION,
                _create,
                {version: _migration(version) for version in _MIGRATIONS},
                url=url,
                namespace=NAMESPACE,
            )
        except BaseException:
            self.db.close()
            raise

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # Inside a user scope: a savepoint, so a refused batch rolls back alone (as in SQLite).
        conn = self.db.current()
        if conn is not None:
            with conn.transaction():
                yield
            return
        with self.db.pool.connection() as conn, conn.transaction(), self.db.bound(conn):
            yield

    @contextmanager
    def user_scope(self, user_id: str) -> Iterator[None]:
        """One transaction holding ``user_id``'s advisory lock: that user's writes, one at a time everywhere."""
        if self.db.current() is not None:
            yield
            return
        with self.db.pool.connection() as conn, conn.transaction(), self.db.bound(conn):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("memlab-profile", user_id),))
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Several reads that see one consistent state (REPEATABLE READ, read only)."""
        if self.db.current() is not None:
            yield
            return
        with self.db.pool.connection() as conn, conn.transaction(), self.db.bound(conn):
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield
