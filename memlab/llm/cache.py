"""A persistent response cache: one SQLite file, keyed by a hash of provider, model, parameters
and prompt. A rerun of the same configuration makes no requests, and a killed run resumes where
it stopped. Several threads and processes may share the file (WAL mode, one lock per handle)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

CACHE_FILE = "llm_responses.sqlite"

_default_cache_dir: Path | None = None


def set_default_cache_dir(path: str | Path | None) -> Path | None:
    """Where responses are cached when a config names no ``cache_dir`` (the runner sets this).
    Returns the previous setting, so a caller can restore it."""
    global _default_cache_dir
    previous, _default_cache_dir = _default_cache_dir, (Path(path) if path else None)
    return previous


def default_cache_dir() -> Path:
    if _default_cache_dir is not None:
        return _default_cache_dir
    env = os.environ.get("MEMLAB_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "memlab"


def cache_key(identity: str, params: dict[str, Any], payload: Any) -> str:
    """Stable hash of what determines a response. JSON with sorted keys, so dict order is irrelevant."""
    blob = json.dumps({"identity": identity, "params": params, "payload": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """JSON values by key, in ``<cache_dir>/llm_responses.sqlite``."""

    def __init__(self, cache_dir: str | Path) -> None:
        directory = Path(cache_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / CACHE_FILE
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses "
            "(key TEXT PRIMARY KEY, identity TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL)"
        )
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, identity: str, value: Any) -> None:
        # Committed at once: a run killed right after a request keeps what it paid for.
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                (key, identity, json.dumps(value, ensure_ascii=False), time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
