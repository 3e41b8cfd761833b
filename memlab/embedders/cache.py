"""An on-disk embedding cache keyed by model name and text hash.

Replaying the same history for several backends, or re-running an interrupted run, embeds the same
texts again; the cache makes that free. It is one SQLite file per directory (safe for several
processes), holding float32 vectors as blobs.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np

from memlab.embedders.base import Embedder


class CachedEmbedder(Embedder):
    """Wraps an embedder; texts already embedded by the same model come from disk."""

    def __init__(self, inner: Embedder, cache_dir: str | Path) -> None:
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.hits = 0
        path = Path(cache_dir)
        path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path / "embeddings.sqlite", check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._db.commit()

    def _key(self, text: str, query: bool) -> str:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return f"{self.name}|{'q' if query else 'd'}|{digest}"

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        keys = [self._key(t, query) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        missing = [i for i, key in enumerate(keys) if key not in found]
        self.hits += len(texts) - len(missing)
        computed = 0
        if missing:
            unique = list(dict.fromkeys(texts[i] for i in missing))
            vectors = self.inner.embed(unique, query=query)
            computed = len(unique)
            new = {self._key(t, query): v for t, v in zip(unique, vectors)}
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?)", [(k, v.tobytes()) for k, v in new.items()]
                )
                self._db.commit()
            found.update(new)
        # Count only what the model computed, so benchmarks see real model calls.
        self.texts_embedded -= len(texts) - computed
        return np.stack([found[key] for key in keys])

    def close(self) -> None:
        self._db.close()
