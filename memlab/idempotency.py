"""Idempotency keys for writes: a write retried with the same key is stored once.

A client that timed out does not know whether its write landed; it retries with the same key.
``IdempotencyLog`` remembers, per user and key, a fingerprint of the request and its result:

- a key seen before with the same request returns the first result and stores nothing;
- a key seen before with a different request is a ``ConflictError`` (the service answers 409);
- a key whose first request is still running (another thread, worker or host) is a
  ``WriteInProgressError`` (a ``ConflictError`` too).

Before the backend is called the log records the intent: the session and the turn index the write
starts at. If the process dies between the backend's durable write and the log's "done" mark, the
intent is resolved from the backend's own turn count (``Memory._next_turn_index``): the write landed
when the session has grown by its messages (then the key answers with the result rebuilt from the
intent), otherwise the intent is dropped and a retry stores the messages once.

The keys live where the memory lives (``open_log``):

- a backend whose store is a PostgreSQL database: one table, ``memlab_idempotency``, in that
  database (``PostgresIdempotencyLog``), shared by every worker and host and surviving restarts;
  nothing is written to a data directory. A write holds a session advisory lock on its key while
  it runs, so a claim whose lock is free belongs to a writer that died: the next request with that
  key (or the next worker to start) resolves it as above;
- a data directory: a SQLite file (``.memlab-idempotency.sqlite``, WAL, ``secure_delete`` so a
  forgotten user's rows leave no bytes behind); a file store has one writer process, which resolves
  a dead process's intents when it opens;
- neither: process memory.

Keys expire after ``ttl_seconds`` (default one week).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memlab.errors import ConflictError, WriteInProgressError
from memlab.memory import IngestReport

LOG_FILE = ".memlab-idempotency.sqlite"
TABLE = "memlab_idempotency"  # the PostgreSQL table (its prefix makes ``memlab compact`` rewrite it)
DEFAULT_TTL_SECONDS = 7 * 24 * 3600
MAX_KEY_CHARS = 255
POOL_SIZE = 8  # a keyed write holds one connection (its key's lock) while the backend writes

# (user_id, session_id) -> the backend's turn count of that session
TurnsStored = Callable[[str, str], int]
# A stored row: (fingerprint, intent as JSON, result as JSON or None while the write runs)
Row = tuple[str, str, str | None]


def check_key(key: str) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS or not key.isprintable() or key.strip() != key:
        raise ValueError(f"an idempotency key must be 1-{MAX_KEY_CHARS} printable characters without outer spaces")
    return key


def fingerprint(payload: Any) -> str:
    """A stable hash of a request (what a reused key must repeat exactly)."""
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def open_log(*, data_dir: Path | None, database_url: str | None) -> IdempotencyLog:
    """The log beside the memory: its database, else its data directory, else process memory."""
    if database_url is not None:
        return PostgresIdempotencyLog(database_url)
    return IdempotencyLog(data_dir)


class IdempotencyLog:
    """Per-user record of write keys: ``run`` does a write once per key (see the module doc).

    Kept in SQLite (a file in ``data_dir``, or memory without one); ``PostgresIdempotencyLog``
    keeps the same records in a database table.
    """

    def __init__(self, data_dir: Path | None, *, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
        self._writing: set[tuple[str, str]] = set()  # keys whose write runs in this process now
        if data_dir is not None:
            Path(data_dir).mkdir(parents=True, exist_ok=True)
        path = ":memory:" if data_dir is None else str(Path(data_dir) / LOG_FILE)
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=60, isolation_level=None)
        with self._lock:
            if data_dir is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.execute("PRAGMA synchronous=FULL")  # an intent is on disk before the backend writes
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS writes (user_id TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
                " intent TEXT NOT NULL, result TEXT, created REAL NOT NULL, PRIMARY KEY (user_id, key))"
            )
            self._db.execute("DELETE FROM writes WHERE created < ?", (time.time() - ttl_seconds,))

    # ------------------------------------------------------------------ the one operation
    def run(
        self,
        user_id: str,
        key: str,
        request: Any,
        intent: dict[str, Any],
        write: Callable[[], IngestReport],
        *,
        turns_stored: TurnsStored | None = None,
    ) -> IngestReport:
        """``write()`` once for (``user_id``, ``key``); a repeat returns the first report.

        ``turns_stored`` (the backend's turn count, callable under the caller's lock of the user)
        resolves a claim left by a writer that died, instead of answering "in progress" forever.
        """
        check_key(key)
        digest = fingerprint(request)
        with self._exclusive(user_id, key) as exclusive:
            claimed = exclusive and self._insert(user_id, key, digest, json.dumps(intent))
            if not claimed:
                row = self._row(user_id, key)
                if row is None or row[0] == digest and row[2] is None and not exclusive:
                    raise WriteInProgressError(
                        f"the write with idempotency key {key!r} is still in progress; retry shortly"
                    )
                stored_digest, stored_intent, result = row
                if stored_digest != digest:
                    raise ConflictError(
                        f"idempotency key {key!r} was used for a different write of user {user_id!r}; use a new key"
                    )
                if result is not None:
                    return IngestReport.model_validate_json(result)
                # Unfinished, and nobody writes it now: its writer died. Resolve it as recover() does.
                if turns_stored is not None:
                    landed = self._resolve(user_id, key, stored_intent, turns_stored)
                    if landed is not None:
                        return landed
                else:
                    self._forget_key(user_id, key)
                if not self._insert(user_id, key, digest, json.dumps(intent)):
                    raise WriteInProgressError(
                        f"the write with idempotency key {key!r} is still in progress; retry shortly"
                    )
            try:
                report = write()
            except BaseException:
                self._forget_key(user_id, key)  # nothing was stored: a retry must be able to store it
                raise
            self._mark_done(user_id, key, report)
            return report

    # ------------------------------------------------------------------ recovery, erasure
    def recover(self, turns_stored: TurnsStored) -> tuple[int, int]:
        """Resolve intents left by a process that died mid-write: (completed, dropped).

        ``turns_stored(user_id, session_id)`` is the backend's current turn count of that session.
        An intent whose write is still running (another worker) is left alone.
        """
        completed = dropped = 0
        for user_id, key in self._pending():
            with self._exclusive(user_id, key) as exclusive:
                row = self._row(user_id, key) if exclusive else None
                if row is None or row[2] is not None:
                    continue  # being written, finished or gone meanwhile
                if self._resolve(user_id, key, row[1], turns_stored) is None:
                    dropped += 1
                else:
                    completed += 1
        return completed, dropped

    def _resolve(self, user_id: str, key: str, raw_intent: str, turns_stored: TurnsStored) -> IngestReport | None:
        """An unfinished intent whose writer is gone: its report when the write landed (marked done),
        else None (the claim is dropped)."""
        intent = json.loads(raw_intent)
        first, count = int(intent["first_turn"]), int(intent["messages"])
        if turns_stored(user_id, intent["session_id"]) >= first + count:
            report = IngestReport(session_id=intent["session_id"], first_turn=first, messages=count, seconds=0.0)
            self._mark_done(user_id, key, report)
            return report
        self._forget_key(user_id, key)
        return None

    # ------------------------------------------------------------------ the records (SQLite here)
    @contextlib.contextmanager
    def _exclusive(self, user_id: str, key: str) -> Iterator[bool]:
        """Whether this caller alone may write (or resolve) the key now; held until the block ends.
        A file store has one writer process, so this process's own writes are all there is."""
        with self._lock:
            exclusive = (user_id, key) not in self._writing
            if exclusive:
                self._writing.add((user_id, key))
        try:
            yield exclusive
        finally:
            if exclusive:
                with self._lock:
                    self._writing.discard((user_id, key))

    def _insert(self, user_id: str, key: str, digest: str, intent: str) -> bool:
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO writes (user_id, key, fingerprint, intent, result, created) VALUES (?, ?, ?, ?, NULL, ?)",
                    (user_id, key, digest, intent, time.time()),
                )
            except sqlite3.IntegrityError:
                return False
        return True

    def _row(self, user_id: str, key: str) -> Row | None:
        with self._lock:
            row = self._db.execute(
                "SELECT fingerprint, intent, result FROM writes WHERE user_id=? AND key=?", (user_id, key)
            ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def _pending(self) -> list[tuple[str, str]]:
        with self._lock:
            rows = self._db.execute("SELECT user_id, key FROM writes WHERE result IS NULL").fetchall()
        return [(user_id, key) for user_id, key in rows]

    def _mark_done(self, user_id: str, key: str, report: IngestReport) -> None:
        # Not fsynced: if a crash loses this mark, the intent (fsynced before the write) is resolved from the
        # backend on the next open, to the same report. One fsync per keyed write, not two.
        with self._lock:
            self._db.execute("PRAGMA synchronous=OFF")
            try:
                self._db.execute(
                    # Without what a forget request removed: a replay must not keep that text past its purge.
                    "UPDATE writes SET result=? WHERE user_id=? AND key=?",
                    (report.model_dump_json(exclude={"forgotten"}), user_id, key),
                )
            finally:
                self._db.execute("PRAGMA synchronous=FULL")

    def forget_user(self, user_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM writes WHERE user_id=?", (user_id,))

    def _forget_key(self, user_id: str, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM writes WHERE user_id=? AND key=?", (user_id, key))

    def close(self) -> None:
        with self._lock:
            self._db.close()


class PostgresIdempotencyLog(IdempotencyLog):
    """The same records in the memory's PostgreSQL database (table ``memlab_idempotency``), so every
    worker and host sees every key; a write holds its key's session advisory lock while it runs."""

    def __init__(self, url: str, *, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        from memlab.pg import lock_key, open_pool

        self.ttl_seconds = ttl_seconds
        self._pool = open_pool(url, max_size=POOL_SIZE, autocommit=True)
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("memlab-schema", TABLE),))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (user_id TEXT NOT NULL, key TEXT NOT NULL,"
                " fingerprint TEXT NOT NULL, intent TEXT NOT NULL, result TEXT, created DOUBLE PRECISION NOT NULL,"
                " PRIMARY KEY (user_id, key))"
            )
            conn.execute(f"DELETE FROM {TABLE} WHERE created < %s", (time.time() - ttl_seconds,))

    @contextlib.contextmanager
    def _exclusive(self, user_id: str, key: str) -> Iterator[bool]:
        from memlab.pg import lock_key

        lock = lock_key("memlab-idempotency", user_id, key)
        # One connection for the whole write: the lock is its session's, freed if the process dies.
        with self._pool.connection() as conn:
            held = bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()[0])
            try:
                yield held
            finally:
                if held:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))

    def _execute(self, sql: str, params: tuple[Any, ...]) -> Any:
        with self._pool.connection() as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else cursor.rowcount

    def _insert(self, user_id: str, key: str, digest: str, intent: str) -> bool:
        inserted = self._execute(
            f"INSERT INTO {TABLE} (user_id, key, fingerprint, intent, result, created)"
            " VALUES (%s, %s, %s, %s, NULL, %s) ON CONFLICT (user_id, key) DO NOTHING",
            (user_id, key, digest, intent, time.time()),
        )
        return bool(inserted)

    def _row(self, user_id: str, key: str) -> Row | None:
        rows = self._execute(
            f"SELECT fingerprint, intent, result FROM {TABLE} WHERE user_id=%s AND key=%s", (user_id, key)
        )
        return None if not rows else (rows[0][0], rows[0][1], rows[0][2])

    def _pending(self) -> list[tuple[str, str]]:
        return [(u, k) for u, k in self._execute(f"SELECT user_id, key FROM {TABLE} WHERE result IS NULL", ())]

    def _mark_done(self, user_id: str, key: str, report: IngestReport) -> None:
        self._execute(
            f"UPDATE {TABLE} SET result=%s WHERE user_id=%s AND key=%s",
            (report.model_dump_json(exclude={"forgotten"}), user_id, key),
        )

    def forget_user(self, user_id: str) -> None:
        self._execute(f"DELETE FROM {TABLE} WHERE user_id=%s", (user_id,))

    def _forget_key(self, user_id: str, key: str) -> None:
        self._execute(f"DELETE FROM {TABLE} WHERE user_id=%s AND key=%s", (user_id, key))

    def close(self) -> None:
        self._pool.close()
