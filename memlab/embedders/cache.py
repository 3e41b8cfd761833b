"""An on-disk embedding cache keyed by model name and text hash, with a bounded copy in RAM.

Replaying the same history for several backends, or re-running an interrupted run, embeds the same
texts again; the cache makes that free. It is one SQLite file per directory (safe for several
processes), holding float32 vectors as blobs. Vectors used in this process are also kept in RAM
(least recently used first out, ``memory_bytes`` at most), so a reader that looks up the same
items for every question (the whole history, with ``full_context``) or a query embedded before
the replay (``Memory.prepare``, ``Reader.prepare``) costs a dictionary lookup, not a database read.
Entries are tagged with the user whose text they embed (``memlab.data_subject``), so forgetting
that user deletes them.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from pathlib import Path
from typing import cast

import numpy as np

from memlab import data_subject
from memlab.embedders.base import Embedder
from memlab.sqlite_kv import SQLiteKV

MEMORY_BYTES = 256 * 2**20  # RAM copy: 170k MiniLM vectors, 65k BGE-M3 ones


class CachedEmbedder(Embedder):
    """Wraps an embedder; texts already embedded by the same model come from RAM or disk."""

    def __init__(self, inner: Embedder, cache_dir: str | Path, *, memory_bytes: int = MEMORY_BYTES) -> None:
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.hits = 0
        self._store = SQLiteKV(Path(cache_dir) / "embeddings.sqlite", table="vectors_v2")
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._recent_limit = max(0, memory_bytes // (4 * max(1, inner.dim)))
        self._recent_lock = threading.Lock()
        data_subject.register_cache(self)

    def forget_owner(self, owner: str) -> int:
        with self._recent_lock:  # the RAM copy cannot tell owners apart: drop it all (a recomputation at most)
            self._recent.clear()
        return self._store.forget_owner(owner)

    def _key(self, text: str, query: bool) -> str:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return f"{self.name}|{'q' if query else 'd'}|{digest}"

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        with self._recent_lock:
            for key, vector in vectors.items():
                self._recent[key] = vector
                self._recent.move_to_end(key)
            while len(self._recent) > self._recent_limit:
                self._recent.popitem(last=False)

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        keys = [self._key(t, query) for t in texts]
        with self._recent_lock:
            found = {key: self._recent[key] for key in keys if key in self._recent}
            for key in found:
                self._recent.move_to_end(key)
        unseen = [key for key in dict.fromkeys(keys) if key not in found]
        if unseen:
            # This table only holds the float32 bytes that put_many writes below, never text.
            stored = self._store.get_many(unseen)
            loaded = {key: np.frombuffer(cast(bytes, blob), dtype=np.float32) for key, blob in stored.items()}
            found.update(loaded)
            self._remember(loaded)
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
            new = {self._key(t, query): np.asarray(v, dtype=np.float32) for t, v in zip(unique, vectors)}
            self._store.put_many({k: v.tobytes() for k, v in new.items()}, owner=owner)
            found.update(new)
            self._remember(new)
        # Count only what the model computed, so benchmarks see real model calls.
        self.texts_embedded -= len(texts) - computed
        return np.stack([found[key] for key in keys])

    def close(self) -> None:
        self._store.close()
