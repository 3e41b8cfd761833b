"""What every PostgreSQL-backed store shares: URL checks, a connection pool, versioned schemas, locks.

A backend whose config key ``store`` holds a ``postgresql://`` URL keeps its state in that database
instead of files, so several processes (``memlab serve --workers N``, several hosts) can serve the
same users: every read goes to the database, so a write acknowledged by one worker is seen by the
next request on any other. Each store owns tables with its own prefix (``memlab_rag_``,
``memlab_profile_``) and a ``<prefix>meta`` table holding its schema version; ``ensure_schema``
creates or migrates them on first use under an advisory lock, so workers starting together do not
race. Per-user (and per-session) serialisation uses transaction-scoped advisory locks keyed by a
stable 64-bit hash of the key (``lock_key``); different users never wait for each other.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator

from memlab.errors import ConfigurationError, DataFormatError, MemlabError
from memlab.schema_versions import upgrade_schema

_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


class DatabaseError(MemlabError):
    """The database cannot be reached or used (bad URL, server down, missing extension)."""


def is_database_url(value: Any) -> bool:
    """Whether a backend's ``store`` value names a PostgreSQL database."""
    return isinstance(value, str) and bool(_URL.match(value))


def check_store_url(value: str | None) -> str | None:
    """Validate a ``store`` config value: None (the embedded file store) or a PostgreSQL URL."""
    if value is None or value == "" or value == "file":
        return None
    if not is_database_url(value):
        raise ValueError(f"store must be a PostgreSQL URL (postgresql://user@host:5432/db) or 'file', got {value!r}")
    return value


# A backend config's ``store`` field: None (the embedded file store) or a checked PostgreSQL URL.
StoreUrl = Annotated[str | None, AfterValidator(check_store_url)]


def config_uses_database(config: Mapping[str, Any] | Any) -> bool:
    """Whether a backend config (dict or model) selects a database store: several workers may share it."""
    value = config.get("store") if isinstance(config, Mapping) else getattr(config, "store", None)
    return is_database_url(value)


def reject_nul(session: Any) -> None:
    """PostgreSQL text cannot hold U+0000: refuse such a message with the same clear error as the
    service's validation (a ``DataFormatError``), before anything is written."""
    messages = session.get("messages", []) if isinstance(session, Mapping) else getattr(session, "messages", [])
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", "")
        if isinstance(content, str) and "\x00" in content:
            raise DataFormatError(f"message {index}: content must not contain NUL characters (U+0000)")


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


def lock_key(*parts: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``parts`` (the same in every process and host)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def open_pool(url: str, *, max_size: int, search_path: str | None = None, autocommit: bool = False) -> Any:
    """A thread-safe connection pool (fails fast with the reason when the database cannot be reached).

    ``search_path``: the PostgreSQL schema unqualified table names resolve to on these connections.
    ``autocommit``: each statement commits by itself (session-level advisory locks stay clean).
    """
    try:
        import psycopg
        from psycopg_pool import ConnectionPool
    except ImportError as exc:  # pragma: no cover - the 'postgres' extra is not installed
        raise ConfigurationError(
            "a PostgreSQL store needs psycopg and psycopg-pool: pip install 'memlab[postgres]'"
        ) from exc

    # Probe once without the pool, so a wrong URL is one clear error instead of pool retries.
    kwargs: dict[str, Any] = {"options": f"-c search_path={search_path}"} if search_path else {}
    if autocommit:
        kwargs["autocommit"] = True
    try:
        probe = psycopg.connect(url, connect_timeout=10, **kwargs)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to the store database {redact(url)}: {str(exc).strip()}") from exc
    probe.close()
    pool = ConnectionPool(url, min_size=1, max_size=max_size, kwargs=kwargs, open=False, timeout=60)
    pool.open(wait=True, timeout=30)
    return pool


def vector_literal(vector: Any) -> str:
    """A vector as pgvector's text input (``'[0.1,0.2]'``), sent with a ``::vector`` cast."""
    import numpy as np

    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(vector, dtype=np.float32).ravel()) + "]"


Migration = Callable[[Any], None]


def ensure_schema(
    pool: Any,
    prefix: str,
    version: int,
    create: Callable[[Any], None],
    migrations: Mapping[int, Migration],
    *,
    url: str,
    namespace: str | None = None,
) -> None:
    """Create the store's tables (at ``version``) or migrate older ones, once, under an advisory lock.

    ``create(conn)`` makes the newest schema from nothing; ``migrations[v](conn)`` upgrades v to v+1.
    ``namespace``: a PostgreSQL schema to create first (``prefix`` then starts with ``namespace.``).
    Everything runs in one transaction: a failed migration leaves the old schema untouched.
    """
    meta = f"{prefix}meta"
    with pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("memlab-schema", prefix),))
        if namespace is not None:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {namespace}")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {meta} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = conn.execute(f"SELECT value FROM {meta} WHERE key='schema_version'").fetchone()
        if row is None:
            create(conn)
            conn.execute(f"INSERT INTO {meta} VALUES ('schema_version', %s)", (str(version),))
            return
        upgrade_schema(
            conn, int(row[0]), version, migrations, where=f"{redact(url)} ({prefix} tables)", error=DataFormatError
        )
        conn.execute(f"UPDATE {meta} SET value=%s WHERE key='schema_version'", (str(version),))


def get_meta(conn: Any, prefix: str, key: str) -> str | None:
    row = conn.execute(f"SELECT value FROM {prefix}meta WHERE key=%s", (key,)).fetchone()
    return row[0] if row else None


def set_meta(conn: Any, prefix: str, key: str, value: str) -> None:
    conn.execute(
        f"INSERT INTO {prefix}meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value=EXCLUDED.value", (key, value)
    )


def ensure_vector_extension(pool: Any, url: str) -> None:
    """``CREATE EXTENSION vector`` when it is missing (needs a role allowed to create it)."""
    import psycopg

    with pool.connection() as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname='vector'").fetchone():
            return
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("memlab-extension", "vector"),))
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise DatabaseError(
                f"{redact(url)}: the pgvector extension is not installed and could not be created "
                f"({str(exc).strip()}); install pgvector on the server and run CREATE EXTENSION vector as its owner"
            ) from exc


def compact_store(url: str) -> list[str]:
    """Rewrite every memlab table of the database (``VACUUM FULL``, then ``CHECKPOINT``) and return
    their names.

    PostgreSQL deletes a row by marking it dead: its bytes stay in the table file (and its TOAST
    and index files) until the space is reused, and plain ``VACUUM`` only marks it reusable.
    ``VACUUM FULL`` writes each table anew without dead rows and drops the old files, so a deleted
    user's text leaves the table files. It takes an exclusive lock per table while it runs (reads
    and writes of that table wait): run it after deletions, at a quiet time. What it cannot reach:
    the write-ahead log (``pg_wal``) keeps the deleted text until its segments are recycled after
    later checkpoints, and WAL archives, base backups and replicas keep it until they expire.
    ``CHECKPOINT`` (run here, needs a superuser or ``pg_checkpoint``; skipped otherwise) lets the
    segments be recycled sooner.
    """
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the 'postgres' extra is not installed
        raise ConfigurationError("compacting a PostgreSQL store needs psycopg: pip install 'memlab[postgres]'") from exc
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)  # VACUUM cannot run in a transaction
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to the store database {redact(url)}: {str(exc).strip()}") from exc
    with conn:
        rows = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
            " AND (table_name LIKE 'memlab\\_%%' OR table_schema = 'memlab_profile') ORDER BY 1, 2"
        ).fetchall()
        tables = [f'"{schema}"."{name}"' for schema, name in rows]
        for table in tables:
            conn.execute(f"VACUUM FULL {table}")
        try:
            conn.execute("CHECKPOINT")
        except psycopg.Error:  # not allowed for this role: the WAL is recycled at the next automatic one
            pass
    return tables
