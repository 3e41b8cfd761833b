"""The default rag store: each user's chunks in RAM (``index.ChunkStore``), files under the data dir.

Without a data directory the RAM copy is the memory. With one, each user's chunks persist in
``user-<id>/`` (``file_store.FileChunkStorage``: a snapshot and an append-only log, compacted),
loaded on first use, and the directory is locked for this process (one writer per data dir).
Ranking is the backend's: ``rank`` gets the user's ``ChunkStore`` under its lock, since dense
search, BM25 fusion, BGE-M3 re-ranking and neighbour expansion all need the chunk set in memory.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import NotFoundError
from memlab.locks import DirectoryLock
from memlab.memory import MemoryFilter
from memlab.types import MemoryItem, Session
from memlab_plugins.rag.file_store import FileChunkStorage, remove_directory
from memlab_plugins.rag.index import ChunkStore, IndexSpec
from memlab_plugins.rag.store import Chunker, RagStore, Vectors

LOCK_PURPOSE = "memlab rag backend"

# (the user's store, user id, query, k) -> (position in the store, item with its score), best first
Ranker = Callable[[ChunkStore, str, str, int], list[tuple[int, MemoryItem]]]


class LocalRagStore(RagStore):
    """Per-user ``ChunkStore`` objects, persisted under ``data_dir`` when it is given (see the module doc).

    ``signature`` (embedder, chunking) is written with the files and checked on open; ``prepare``
    runs on each store as it is loaded (the backend computes outputs a store saved under another
    scoring lacks); ``rank`` is the backend's ranking over one user's chunks.
    """

    def __init__(
        self,
        data_dir: Path | None,
        *,
        signature: dict[str, Any],
        dim: int,
        spec: IndexSpec,
        rank: Ranker,
        prepare: Callable[[ChunkStore], None] = lambda store: None,
    ) -> None:
        self.data_dir = data_dir
        self.signature, self.dim, self.spec = signature, dim, spec
        self.rank, self.prepare = rank, prepare
        self._lock: DirectoryLock | None = None
        if data_dir is not None:
            # One process per data directory: a second one would interleave appends and compactions.
            self._lock = DirectoryLock(data_dir, purpose=LOCK_PURPOSE).acquire()
            # A user reset interrupted by a crash leaves a renamed folder: finish deleting it.
            for trash in data_dir.glob(".user-*.deleted"):
                shutil.rmtree(trash, ignore_errors=True)
        self.stores: dict[str, ChunkStore] = {}  # user id -> loaded store
        self._stores_lock = threading.Lock()

    def _user_dir(self, user_id: str) -> Path | None:
        return self.data_dir / f"user-{user_id}" if self.data_dir is not None else None

    def store(self, user_id: str, *, create: bool) -> ChunkStore | None:
        """The user's loaded store (loading it from its files on first use); None when it has none and not ``create``."""
        with self._stores_lock:
            store = self.stores.get(user_id)
            if store is None:
                directory = self._user_dir(user_id)
                if not create and (directory is None or not directory.exists()):
                    return None
                storage = FileChunkStorage(directory, self.signature, self.dim) if directory is not None else None
                store = ChunkStore(self.dim, self.spec, storage)
                self.prepare(store)
                self.stores[user_id] = store
            return store

    # ------------------------------------------------------------------ RagStore
    def next_turn(self, user_id: str, session_id: str) -> int:
        store = self.store(user_id, create=False)
        return store.sessions.get(session_id, 0) if store is not None else 0

    def add(self, user_id: str, session: Session, chunk: Chunker, vectors: Vectors) -> int:
        store = self.store(user_id, create=True)
        assert store is not None
        with store.lock:  # read the turn count and append in one step: numbering stays gap-free
            first_turn = store.sessions.get(session.id, 0)
            # One durable append carries the chunks and the session's new turn count together.
            store.add(
                chunk(first_turn),
                vectors.dense,
                vectors.sparse,
                vectors.colbert,
                sessions={session.id: first_turn + len(session.messages)},
            )
        return first_turn

    def add_many(self, user_id: str, parts: list[tuple[Session, Chunker, Vectors]]) -> list[int]:
        """All parts in one durable append (chunks and the sessions' new turn counts together)."""
        store = self.store(user_id, create=True)
        assert store is not None
        with store.lock:
            turns: dict[str, int] = {}  # a session may come twice in one batch: its parts continue each other
            firsts, chunks, dense, sparse, colbert = [], [], [], [], []
            for session, chunk, vectors in parts:
                first_turn = turns.get(session.id, store.sessions.get(session.id, 0))
                firsts.append(first_turn)
                turns[session.id] = first_turn + len(session.messages)
                chunks.extend(chunk(first_turn))
                dense.append(vectors.dense)
                sparse.extend(vectors.sparse or [])
                colbert.extend(vectors.colbert or [])
            if parts:
                store.add(chunks, np.concatenate(dense), sparse or None, colbert or None, sessions=turns)
        return firsts

    def search(self, user_id: str, query: str, k: int, filters: MemoryFilter | None = None) -> list[MemoryItem]:
        store = self.store(user_id, create=False)
        if store is None or not len(store):
            return []
        with store.lock:
            if filters is None:
                found = self.rank(store, user_id, query, k)
            else:
                # The k best among the matching chunks: rank them all, then keep the matching ones.
                allowed = {i for i, chunk in enumerate(store.chunks) if filters.matches(chunk)}
                ranked = self.rank(store, user_id, query, len(store.chunks)) if allowed else []
                found = [(i, item) for i, item in ranked if i in allowed][:k]
        found.sort(key=lambda pair: pair[0])  # store order is conversation order
        return [item for _, item in found]

    def items(self, user_id: str) -> list[MemoryItem]:
        store = self.store(user_id, create=False)
        if store is None:
            return []
        with store.lock:
            return list(store.chunks)

    def sessions(self, user_id: str) -> dict[str, int]:
        store = self.store(user_id, create=False)
        if store is None:
            return {}
        with store.lock:
            return dict(store.sessions)

    def delete(self, user_id: str, item_id: str) -> None:
        store = self.store(user_id, create=False)
        if store is None:
            raise NotFoundError(f"no memory item {item_id!r} for user {user_id!r}")
        try:
            store.delete(item_id)
        except NotFoundError:
            raise NotFoundError(f"no memory item {item_id!r} for user {user_id!r}") from None

    def reset(self, user_id: str) -> None:
        with self._stores_lock:
            store = self.stores.pop(user_id, None)
        if store is not None and store.storage is not None:
            with store.lock:
                store.storage.destroy()
        directory = self._user_dir(user_id)
        if directory is not None:
            remove_directory(directory)

    def release(self, user_id: str) -> None:
        if self.data_dir is None:
            return  # in-memory only: the RAM copy is the memory
        with self._stores_lock:
            store = self.stores.pop(user_id, None)
        if store is not None:
            with store.lock:
                store.close()

    def close(self) -> None:
        try:
            for store in list(self.stores.values()):
                store.close()
        finally:
            if self._lock is not None:
                self._lock.release()
