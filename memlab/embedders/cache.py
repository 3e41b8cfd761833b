"""An on-disk embedding cache keyed by model name and text hash.

Replaying the same history for several backends, or re-running an interrupted run, embeds the same
texts again; the cache makes that free. It is one SQLite file per directory (safe for several
processes), holding float32 vectors as blobs. Entries are tagged with the user whose text they
embed (``memlab.data_subject``), so forgetting that user deletes them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import cast

import numpy as np

from memlab import data_subject
from memlab.embedders.base import Embedder
from memlab.sqlite_kv import SQLiteKV


class CachedEmbedder(Embedder):
    """Wraps an embedder; texts already embedded by the same model come from disk."""

    def __init__(self, inner: Embedder, cache_dir: str | Path) -> None:
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.hits = 0
        self._store = SQLiteKV(Path(cache_dir) / "embeddings.sqlite", table="vectors_v2")
        data_subject.register_cache(self)

    def forget_owner(self, owner: str) -> int:
        return self._store.forget_owner(owner)

    def _key(self, text: str, query: bool) -> str:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return f"{self.name}|{'q' if query else 'd'}|{digest}"

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        keys = [self._key(t, query) for t in texts]
        # This table only holds the float32 bytes that put_many writes below, never text.
        stored = self._store.get_many(keys)
        found = {key: np.frombuffer(cast(bytes, blob), dtype=np.float32) for key, blob in stored.items()}
        missing = [i for i, key in enumerate(keys) if key not in found]
        self.hits += len(texts) - len(missing)
        owner = data_subject.current_owner()
        if owner is not None and found:
            self._store.own(list(found), owner)
        computed = 0
        if missing:
            unique = list(dict.fromkeys(texts[i] for i in missing))
            vectors = self.inner.embed(unique, query=query)
            computed = len(unique)
            new = {self._key(t, query): v for t, v in zip(unique, vectors)}
            self._store.put_many({k: np.asarray(v, dtype=np.float32).tobytes() for k, v in new.items()}, owner=owner)
            found.update(new)
        # Count only what the model computed, so benchmarks see real model calls.
        self.texts_embedded -= len(texts) - computed
        return np.stack([found[key] for key in keys])

    def close(self) -> None:
        self._store.close()
