"""Idempotency keys for writes: a write retried with the same key is stored once.

A client that timed out does not know whether its write landed; it retries with the same key.
``IdempotencyLog`` remembers, per user and key, a fingerprint of the request and its result:

- a key seen before with the same request returns the first result and stores nothing;
- a key seen before with a different request is a ``ConflictError`` (the service answers 409);
- a key whose first request is still running (another thread or worker) is a ``ConflictError`` too.

Before the backend is called the log records the intent: the session and the turn index the write
starts at. If the process dies between the backend's durable write and the log's "done" mark, the
next open resolves the intent from the backend's own turn count (``Memory._next_turn_index``): the
write landed when the session has grown by its messages (then the key answers with the result
rebuilt from the intent), otherwise the intent is dropped and a retry stores the messages once.

With a data directory the log is a SQLite file (``.memlab-idempotency.sqlite``, WAL, shared by
worker processes, ``secure_delete`` so a forgotten user's rows leave no bytes behind); without one
it lives in process memory. Keys expire after ``ttl_seconds`` (default one week).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memlab.errors import ConflictError, WriteInProgressError
from memlab.memory import IngestReport

LOG_FILE = ".memlab-idempotency.sqlite"
DEFAULT_TTL_SECONDS = 7 * 24 * 3600
MAX_KEY_CHARS = 255


def check_key(key: str) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS or not key.isprintable() or key.strip() != key:
        raise ValueError(f"an idempotency key must be 1-{MAX_KEY_CHARS} printable characters without outer spaces")
    return key


def fingerprint(payload: Any) -> str:
    """A stable hash of a request (what a reused key must repeat exactly)."""
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class IdempotencyLog:
    """Per-user record of write keys: ``run`` does a write once per key (see the module doc)."""

    def __init__(self, data_dir: Path | None, *, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
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
    ) -> IngestReport:
        """``write()`` once for (``user_id``, ``key``); a repeat returns the first report."""
        check_key(key)
        digest = fingerprint(request)
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO writes (user_id, key, fingerprint, intent, result, created) VALUES (?, ?, ?, ?, NULL, ?)",
                    (user_id, key, digest, json.dumps(intent), time.time()),
                )
                claimed = True
            except sqlite3.IntegrityError:
                claimed = False
                row = self._db.execute(
                    "SELECT fingerprint, result FROM writes WHERE user_id=? AND key=?", (user_id, key)
                ).fetchone()
        if not claimed:
            stored_digest, result = row
            if stored_digest != digest:
                raise ConflictError(
                    f"idempotency key {key!r} was used for a different write of user {user_id!r}; use a new key"
                )
            if result is None:
                raise WriteInProgressError(
                    f"the write with idempotency key {key!r} is still in progress; retry shortly"
                )
            return IngestReport.model_validate_json(result)
        try:
            report = write()
        except BaseException:
            self._forget_key(user_id, key)  # nothing was stored: a retry must be able to store it
            raise
        self._mark_done(user_id, key, report)
        return report

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

    # ------------------------------------------------------------------ recovery, erasure
    def recover(self, turns_stored: Callable[[str, str], int]) -> tuple[int, int]:
        """Resolve intents left by a process that died mid-write: (completed, dropped).

        ``turns_stored(user_id, session_id)`` is the backend's current turn count of that session.
        """
        with self._lock:
            pending = self._db.execute("SELECT user_id, key, intent FROM writes WHERE result IS NULL").fetchall()
        completed = dropped = 0
        for user_id, key, raw in pending:
            intent = json.loads(raw)
            first, count = int(intent["first_turn"]), int(intent["messages"])
            if turns_stored(user_id, intent["session_id"]) >= first + count:
                report = IngestReport(session_id=intent["session_id"], first_turn=first, messages=count, seconds=0.0)
                self._mark_done(user_id, key, report)
                completed += 1
            else:
                self._forget_key(user_id, key)
                dropped += 1
        return completed, dropped

    def forget_user(self, user_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM writes WHERE user_id=?", (user_id,))

    def _forget_key(self, user_id: str, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM writes WHERE user_id=? AND key=?", (user_id, key))

    def close(self) -> None:
        with self._lock:
            self._db.close()
