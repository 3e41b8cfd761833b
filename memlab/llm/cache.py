"""A persistent response cache: one SQLite file, keyed by a hash of everything that changes an
answer: provider, endpoint (base URL), model, decoding parameters and the prompt. Two endpoints
serving the same model name never share responses. A rerun of the same configuration makes no
requests, and a killed run resumes where it stopped. Several threads and processes may share the
file (``memlab.sqlite_kv``). Each entry is tagged with the user whose data it holds (see
``memlab.data_subject``), so forgetting that user deletes it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from memlab import data_subject
from memlab.sqlite_kv import SQLiteKV

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
        self.path = Path(cache_dir) / CACHE_FILE
        self._store = SQLiteKV(self.path, table="responses_v2")
        self.hits = 0
        self.misses = 0
        data_subject.register_cache(self)

    def get(self, key: str) -> Any | None:
        value = self._store.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        owner = data_subject.current_owner()
        if owner is not None:  # this user's prompt produced it too: forgetting them removes it
            self._store.own([key], owner)
        return json.loads(value)

    def put(self, key: str, identity: str, value: Any) -> None:
        # ``identity`` is already part of ``key``; kept in the signature for callers.
        self._store.put(key, json.dumps(value, ensure_ascii=False), owner=data_subject.current_owner())

    def forget_owner(self, owner: str) -> int:
        return self._store.forget_owner(owner)

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        self._store.close()
