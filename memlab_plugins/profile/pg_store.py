"""The profile store on PostgreSQL: the same store, the same SQL, one database for N workers.

Chosen by ``store: postgresql://...`` in the profile config (``--profile.store``; ``ProfileMemory._make_store``). The tables are
the SQLite store's (``schema``: entries with versions, the operation log, sessions, raw turns and
``meta``), created in the PostgreSQL schema ``memlab_profile`` from the same DDL and the same
migrations, and the queries are ``store.ProfileStore``'s: ``PgProfileStore`` only swaps the
connection for ``_PgDb``, a small dialect layer that rewrites the few SQLite-only spellings
(``?`` placeholders, ``INSERT OR REPLACE``, ``AUTOINCREMENT``/``lastrowid``, ``BLOB``, ``rowid``).

Concurrency: every write of one user (an ingest, ``update``, ``delete``, ``apply``, ``reset``,
``import``) runs inside ``user_scope`` (the backend wraps each one): one transaction holding a transaction-scoped advisory
lock on a hash of the user id, taken *before* the profile is read, so an ingest's read-resolve-write
(and its turn numbering) is serialised per user across all workers and hosts; other users never
wait. Reads (``retrieve``, ``list``, ``export``, ``history``) run in one REPEATABLE READ snapshot.
Deleted text leaves the live rows at once; PostgreSQL frees the dead tuples at the next (auto)vacuum
(``VACUUM`` forces it), there is no write-ahead-log truncation to do as for SQLite.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memlab.pg import ensure_schema, lock_key, open_pool
from memlab_plugins.profile import schema
from memlab_plugins.profile.store import ProfileStore

NAMESPACE = "memlab_profile"
# Conflict targets of the tables SQLite writes with INSERT OR REPLACE (their primary keys).
_REPLACE_KEYS = {
    "meta": ("key",),
    "sessions": ("user_id", "session_id"),
    "turns": ("user_id", "session_id", "turn_index"),
}
# Column order of the tables SQLite writes with ``INSERT OR REPLACE INTO t VALUES (...)`` (no column list).
_COLUMNS = {"meta": ["key", "value"], "sessions": ["user_id", "session_id", "session_order", "turns"]}
_RETURNING = {"operations": "seq"}  # tables whose inserts report ``lastrowid``


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> tuple[str, bool]:
    """SQLite SQL of the profile store -> PostgreSQL; and whether the statement returns its new id."""
    out = sql.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY").replace(" BLOB", " BYTEA")
    out = re.sub(r"\browid\b", "ctid", out)
    out = out.replace("ctid=?", "ctid=?::tid")
    returning = False
    replace = re.match(r"\s*INSERT OR REPLACE INTO (\w+)\s*(\(([^)]*)\))?", out)
    if replace:
        table = replace.group(1)
        keys = _REPLACE_KEYS[table]
        columns = [c.strip() for c in replace.group(3).split(",")] if replace.group(3) else _COLUMNS[table]
        updates = ", ".join(f"{c}=EXCLUDED.{c}" for c in columns if c not in keys)
        out = out.replace("INSERT OR REPLACE INTO", "INSERT INTO", 1)
        out += f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    insert = re.match(r"\s*INSERT INTO (\w+)", out)
    if insert and insert.group(1) in _RETURNING:
        out += f" RETURNING {_RETURNING[insert.group(1)]}"
        returning = True
    return out.replace("?", "%s"), returning


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
    """What ``ProfileStore`` reads off a cursor: rows (fetched at once), ``rowcount``, ``lastrowid``."""

    def __init__(self, rows: list[Row], rowcount: int, lastrowid: int | None) -> None:
        self._rows, self.rowcount, self.lastrowid = rows, rowcount, lastrowid

    def fetchone(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Row]:
        return list(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)


class _PgDb:
    """The ``db`` of a ``PgProfileStore``: runs the store's SQL on the connection bound to this thread
    (inside a transaction or user scope), else on a pooled connection for one statement."""

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
        statement, returning = translate(sql)
        conn = self.current()
        if conn is not None:
            return self._run(conn, statement, params, returning)
        with self.pool.connection() as conn:
            return self._run(conn, statement, params, returning)

    @staticmethod
    def _run(conn: Any, statement: str, params: Sequence[Any], returning: bool) -> _Result:
        with conn.cursor(row_factory=_rows) as cur:
            cur.execute(statement, tuple(params))
            rows = cur.fetchall() if cur.description else []
            return _Result(rows, cur.rowcount, int(rows[0][0]) if returning and rows else None)

    def close(self) -> None:
        self.pool.close()


def _create(conn: Any) -> None:
    """The newest schema from nothing: SQLite's v1 DDL, then every migration, translated."""
    db = _BoundDb(conn)
    for statement in schema._SCHEMA_V1.split(";"):
        if statement.strip() and "meta" not in statement.split("(")[0]:
            db.execute(statement)
    for version in range(1, schema.SCHEMA_VERSION):
        schema.MIGRATIONS[version](db)


class _BoundDb:
    """A ``db`` over one given connection (schema creation and migrations)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        statement, returning = translate(sql)
        return _PgDb._run(self.conn, statement, params, returning)


def _migrations() -> dict[int, Any]:
    return {v: (lambda conn, v=v: schema.MIGRATIONS[v](_BoundDb(conn))) for v in schema.MIGRATIONS}


class PgProfileStore(ProfileStore):
    """``ProfileStore`` on PostgreSQL (see the module doc): same queries, per-user advisory locks."""

    db: _PgDb

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
                _migrations(),
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
