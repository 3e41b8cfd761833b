"""One user's RAG store in memory: chunks, their vectors, the FAISS index, and its storage.

A store holds the chunks (``MemoryItem``, in conversation order), their dense vectors in a FAISS
index (exact ``IndexFlatIP`` or ``IndexHNSWFlat``, both inner product on unit vectors = cosine),
and, where the scoring needs them, BGE-M3's sparse lexical weights and ColBERT token vectors.
Persistence goes through a ``ChunkStorage`` (``memlab_plugins.rag.file_store``): every ``add`` is one
durable append, deletions and periodic compactions rewrite the storage as one batch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from memlab.errors import DataFormatError, NotFoundError
from memlab.types import MemoryItem
from memlab_plugins.rag.file_store import ChunkBatch, ChunkStorage

if TYPE_CHECKING:
    import faiss


def _faiss() -> Any:
    """faiss, imported when an index is first built or read: listing backends and --help need none of it."""
    import faiss

    return faiss


Output = Literal["sparse", "colbert"]


@dataclass(frozen=True)
class IndexSpec:
    """Which FAISS index to build over the dense vectors."""

    kind: Literal["flat", "hnsw"] = "flat"
    hnsw_m: int = 32
    ef_construction: int = 200
    ef_search: int = 128

    def build(self, dim: int) -> faiss.Index:
        faiss = _faiss()
        if self.kind == "flat":
            return faiss.IndexFlatIP(dim)
        index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        index.hnsw.efSearch = self.ef_search
        return index

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "hnsw_m": self.hnsw_m, "ef_construction": self.ef_construction}


@contextmanager
def _one_search_thread() -> Iterator[None]:
    """One query's search on one OpenMP thread (this thread's setting, restored after).

    FAISS splits even a single query across its threads; when other processes hold the cores the
    threads wait for each other: a flat search of 20k vectors took 66-104 ms (median) with 2
    threads and 2-23 ms with 1 on a loaded 2-core machine (benchmarks/bench_retrieve_scaling.py).
    """
    faiss = _faiss()
    previous = faiss.omp_get_max_threads()
    if previous == 1:
        yield
        return
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


class ChunkStore:
    """Chunks of one user with their dense index and optional sparse / ColBERT representations.

    ``storage`` is None for an in-memory store. ``lock`` serialises this user's reads and writes
    (other users' stores are independent).
    """

    def __init__(self, dim: int, spec: IndexSpec, storage: ChunkStorage | None = None) -> None:
        self.dim = dim
        self.spec = spec
        self.storage = storage
        self.lock = threading.RLock()
        self.index = spec.build(dim)
        self.chunks: list[MemoryItem] = []
        self.dense = np.zeros((0, dim), dtype=np.float32)
        self.sparse: list[dict[int, float] | None] = []
        self.colbert: list[np.ndarray | None] = []
        self.sessions: dict[str, int] = {}  # session id -> turns stored so far (continuations)
        self.version = 0  # bumped on every change
        self.removals = 0  # bumped on every deletion (derived indexes such as BM25 rebuild then; appends extend them)
        if storage is not None:
            self._load(storage.load())

    def __len__(self) -> int:
        return len(self.chunks)

    def _load(self, batches: list[ChunkBatch]) -> None:
        saved_index: faiss.Index | None = None
        for number, batch in enumerate(batches):
            if number == 0 and batch.faiss is not None and batch.index_kind == self.spec.as_dict():
                saved_index = _faiss().deserialize_index(np.frombuffer(batch.faiss, dtype=np.uint8))
                if saved_index.ntotal != len(batch.chunks):
                    saved_index = None
            self._extend(batch, add_to_index=False)
            self.sessions.update(batch.sessions)
        if saved_index is not None:
            # The snapshot's saved index covers its chunks; the log's vectors are added to it.
            self.index = saved_index
            if self.spec.kind == "hnsw":
                # The snapshot's index_kind matched this HNSW spec, so the saved index is an HNSW one.
                cast("faiss.IndexHNSW", self.index).hnsw.efSearch = self.spec.ef_search
            self.index.add(self.dense[saved_index.ntotal :])
        else:
            self.index.add(self.dense)
        if self.index.ntotal != len(self.chunks):
            raise DataFormatError(f"index holds {self.index.ntotal} vectors for {len(self.chunks)} chunks")

    def _extend(self, batch: ChunkBatch, *, add_to_index: bool) -> None:
        if not batch.chunks:
            return
        dense = np.ascontiguousarray(batch.dense, dtype=np.float32)
        if add_to_index:
            self.index.add(dense)
        self.chunks.extend(batch.chunks)
        self.dense = np.concatenate([self.dense, dense])
        self.sparse.extend(batch.sparse)
        self.colbert.extend(c.astype(np.float16) if c is not None else None for c in batch.colbert)
        self.version += 1

    # ------------------------------------------------------------------ changes
    def add(
        self,
        chunks: list[MemoryItem],
        dense: np.ndarray,
        sparse: list[dict[int, float]] | None = None,
        colbert: list[np.ndarray] | None = None,
        *,
        sessions: dict[str, int] | None = None,
    ) -> None:
        """Add chunks and their vectors (and session turn counts), durably when the store persists.

        The storage write comes first: if it fails nothing changes in memory either.
        """
        if len(dense) != len(chunks):
            raise ValueError(f"{len(chunks)} chunks but {len(dense)} dense vectors")
        batch = ChunkBatch(
            chunks=chunks,
            dense=np.asarray(dense, dtype=np.float32).reshape(len(chunks), self.dim),
            sparse=list(sparse or []),
            colbert=list(colbert or []),
            sessions=dict(sessions or {}),
        )
        with self.lock:
            if self.storage is not None:
                self.storage.append(batch)
            self._extend(batch, add_to_index=True)
            self.sessions.update(batch.sessions)
            if self.storage is not None and self.storage.wants_compaction():
                self.compact()

    def position(self, item_id: str) -> int:
        for i, chunk in enumerate(self.chunks):
            if chunk.id == item_id:
                return i
        raise NotFoundError(f"no memory item {item_id!r} for this user")

    def delete(self, item_id: str) -> MemoryItem:
        """Remove one chunk everywhere: memory, index, and (by a rewrite) every stored byte of it."""
        with self.lock:
            i = self.position(item_id)
            keep = np.ones(len(self.chunks), dtype=bool)
            keep[i] = False
            removed = self.chunks[i]
            state = (self.chunks, self.dense, self.sparse, self.colbert, self.index)
            self.chunks = self.chunks[:i] + self.chunks[i + 1 :]
            self.dense = np.ascontiguousarray(self.dense[keep])
            self.sparse = self.sparse[:i] + self.sparse[i + 1 :]
            self.colbert = self.colbert[:i] + self.colbert[i + 1 :]
            self.index = self.spec.build(self.dim)  # HNSW cannot remove; flat is a copy: rebuild both
            self.index.add(self.dense)
            try:
                if self.storage is not None:
                    self.storage.rewrite(self.snapshot())
            except BaseException:
                self.chunks, self.dense, self.sparse, self.colbert, self.index = state
                raise
            self.version += 1
            self.removals += 1
            return removed

    def snapshot(self, *, with_index: bool = False) -> ChunkBatch:
        blob = _faiss().serialize_index(self.index).tobytes() if with_index and self.chunks else None
        return ChunkBatch(
            chunks=list(self.chunks),
            dense=self.dense,
            sparse=list(self.sparse),
            colbert=list(self.colbert),
            sessions=dict(self.sessions),
            faiss=blob,
            index_kind=self.spec.as_dict() if blob else None,
        )

    def compact(self) -> None:
        """Rewrite storage as one snapshot (with the HNSW graph, which is slow to rebuild)."""
        with self.lock:
            if self.storage is not None:
                self.storage.rewrite(self.snapshot(with_index=self.spec.kind == "hnsw"))

    def close(self) -> None:
        with self.lock:
            if self.storage is not None:
                if self.spec.kind == "hnsw" and self.storage.appended_since_rewrite():
                    self.compact()
                self.storage.close()

    # ------------------------------------------------------------------ reading
    def search(self, query: np.ndarray, n: int) -> list[tuple[int, float]]:
        """Indexes and inner products of the ``n`` nearest chunks, best first."""
        n = min(n, len(self.chunks))
        if n <= 0:
            return []
        with _one_search_thread():
            scores, ids = self.index.search(np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32), n)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]

    def missing(self, output: Output) -> list[int]:
        """Chunks that lack ``output`` (stored by a run whose scoring did not need it)."""
        rows = self.sparse if output == "sparse" else self.colbert
        return [i for i, value in enumerate(rows) if value is None]

    def fill(self, output: Output, positions: list[int], values: list[Any]) -> None:
        """Supply a missing output for chunks (kept in memory; the next compaction stores it)."""
        rows = self.sparse if output == "sparse" else self.colbert
        for i, value in zip(positions, values):
            rows[i] = value.astype(np.float16) if output == "colbert" else value
