"""One user's RAG store: chunks, their vectors, the FAISS index, and crash-safe persistence.

In memory a store holds the chunks (``MemoryItem``), their dense vectors in a FAISS index (exact
``IndexFlatIP`` or ``IndexHNSWFlat``, both inner product on unit vectors = cosine), and, where
the scoring needs them, BGE-M3's sparse lexical weights and ColBERT token vectors.

On disk (``<data_dir>/user-<id>/``) every ingest appends one immutable *segment*
(``seg-NNNNNN.jsonl`` with the chunks, ``seg-NNNNNN.npz`` with their vectors), and then
atomically replaces ``manifest.json``, which lists the segments that count. A crash before the
manifest is replaced leaves an unlisted segment that the next open deletes, so what was stored
before is never lost or half-read. The FAISS index is written (``index-NNNNNN.faiss``) on
``close``; if a crash skipped that, the open adds the vectors of later segments to the last
saved index, so a restart never re-embeds anything.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np

from memlab.errors import DataFormatError
from memlab.types import MemoryItem

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
Output = Literal["sparse", "colbert"]


@dataclass(frozen=True)
class IndexSpec:
    """Which FAISS index to build over the dense vectors."""

    kind: Literal["flat", "hnsw"] = "flat"
    hnsw_m: int = 32
    ef_construction: int = 200
    ef_search: int = 128

    def build(self, dim: int) -> faiss.Index:
        if self.kind == "flat":
            return faiss.IndexFlatIP(dim)
        index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        index.hnsw.efSearch = self.ef_search
        return index

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "hnsw_m": self.hnsw_m, "ef_construction": self.ef_construction}


# ----------------------------------------------------------------------------- atomic files
def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Any) -> None:
    """Write through ``write(handle)`` to a temporary file, fsync it, then rename over ``path``."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


# ----------------------------------------------------------------------------- packing
def _pack_sparse(rows: list[dict[int, float]]) -> dict[str, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    ids = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(offsets[-1]))
    weights = np.fromiter((w for r in rows for w in r.values()), dtype=np.float32, count=int(offsets[-1]))
    return {"sparse_ids": ids, "sparse_weights": weights, "sparse_offsets": offsets}


def _unpack_sparse(data: Any) -> list[dict[int, float]]:
    ids, weights, offsets = data["sparse_ids"], data["sparse_weights"], data["sparse_offsets"]
    return [
        dict(zip(ids[a:b].tolist(), weights[a:b].tolist())) for a, b in zip(offsets[:-1], offsets[1:])
    ]


def _pack_colbert(rows: list[np.ndarray], dim: int) -> dict[str, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    flat = np.concatenate(rows).astype(np.float16) if rows else np.zeros((0, dim), dtype=np.float16)
    return {"colbert": flat, "colbert_offsets": offsets}


def _unpack_colbert(data: Any) -> list[np.ndarray]:
    flat, offsets = data["colbert"], data["colbert_offsets"]
    return [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


# ----------------------------------------------------------------------------- the store
class ChunkStore:
    """Chunks of one user with their dense index and optional sparse / ColBERT representations.

    ``directory`` is None for an in-memory store. ``signature`` (embedder name, dimension,
    chunking) is written to the manifest; opening a directory built with another signature is an
    error, since mixing vectors of two models or two chunkings would silently rank wrong.
    """

    def __init__(
        self,
        dim: int,
        spec: IndexSpec,
        signature: dict[str, Any],
        directory: Path | None = None,
    ) -> None:
        self.dim = dim
        self.spec = spec
        self.signature = signature
        self.directory = directory
        self.index = spec.build(dim)
        self.chunks: list[MemoryItem] = []
        self.sparse: list[dict[int, float] | None] = []
        self.colbert: list[np.ndarray | None] = []
        self.sessions: dict[str, int] = {}  # session id -> turns stored so far (continuations)
        self._dense: list[np.ndarray] = []  # per segment, to rebuild the index without re-embedding
        self._segments: list[dict[str, Any]] = []
        self._index_file: str | None = None
        self._index_chunks = 0  # chunks covered by the index file on disk
        self._counter = 0  # last number used for a file name
        if directory is not None and (directory / MANIFEST).exists():
            self._load()

    def __len__(self) -> int:
        return len(self.chunks)

    # ------------------------------------------------------------------ in memory
    def add(
        self,
        chunks: list[MemoryItem],
        dense: np.ndarray,
        sparse: list[dict[int, float]] | None = None,
        colbert: list[np.ndarray] | None = None,
    ) -> None:
        """Add chunks and their vectors, and persist them as one new segment."""
        if len(dense) != len(chunks):
            raise ValueError(f"{len(chunks)} chunks but {len(dense)} dense vectors")
        dense = np.ascontiguousarray(dense, dtype=np.float32)
        if chunks:
            self.index.add(dense)
            self.chunks.extend(chunks)
            self._dense.append(dense)
            self.sparse.extend(sparse if sparse is not None else [None] * len(chunks))
            self.colbert.extend(
                [c.astype(np.float16) for c in colbert] if colbert is not None else [None] * len(chunks)
            )
        if self.directory is not None:
            self._save_segment(chunks, dense, sparse, colbert)

    def search(self, query: np.ndarray, n: int) -> list[tuple[int, float]]:
        """Indexes and inner products of the ``n`` nearest chunks, best first."""
        n = min(n, len(self.chunks))
        if n <= 0:
            return []
        scores, ids = self.index.search(np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32), n)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]

    def missing(self, output: Output) -> list[int]:
        """Chunks that lack ``output`` (stored by a run whose scoring did not need it)."""
        rows = self.sparse if output == "sparse" else self.colbert
        return [i for i, value in enumerate(rows) if value is None]

    def fill(self, output: Output, positions: list[int], values: list[Any]) -> None:
        """Supply a missing output for chunks (kept in memory; the segments on disk are immutable)."""
        rows = self.sparse if output == "sparse" else self.colbert
        for i, value in zip(positions, values):
            rows[i] = value.astype(np.float16) if output == "colbert" else value

    # ------------------------------------------------------------------ persistence
    def _next_name(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter:06d}"

    def _manifest(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "signature": self.signature,
            "dim": self.dim,
            "segments": self._segments,
            "index": {"file": self._index_file, "chunks": self._index_chunks, **self.spec.as_dict()},
            "sessions": self.sessions,
            "counter": self._counter,
        }

    def _write_manifest(self) -> None:
        assert self.directory is not None
        data = json.dumps(self._manifest(), indent=1).encode("utf-8")
        atomic_write(self.directory / MANIFEST, lambda handle: handle.write(data))

    def _save_segment(
        self,
        chunks: list[MemoryItem],
        dense: np.ndarray,
        sparse: list[dict[int, float]] | None,
        colbert: list[np.ndarray] | None,
    ) -> None:
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        if chunks:
            name = self._next_name("seg")
            arrays: dict[str, np.ndarray] = {"dense": dense}
            outputs = ["dense"]
            if sparse is not None:
                arrays.update(_pack_sparse(sparse))
                outputs.append("sparse")
            if colbert is not None:
                arrays.update(_pack_colbert(colbert, self.dim))
                outputs.append("colbert")
            lines = "".join(c.model_dump_json() + "\n" for c in chunks).encode("utf-8")
            atomic_write(self.directory / f"{name}.jsonl", lambda handle: handle.write(lines))
            atomic_write(self.directory / f"{name}.npz", lambda handle: np.savez(handle, **arrays))
            self._segments.append({"name": name, "chunks": len(chunks), "outputs": outputs})
        # The manifest is the commit point: only now does the new segment count.
        self._write_manifest()

    def save_index(self) -> None:
        """Write the FAISS index if the one on disk does not cover every chunk yet."""
        if self.directory is None or self._index_chunks == len(self.chunks) or not self.chunks:
            return
        name = self._next_name("index") + ".faiss"
        blob = faiss.serialize_index(self.index).tobytes()
        atomic_write(self.directory / name, lambda handle: handle.write(blob))
        old = self._index_file
        self._index_file, self._index_chunks = name, len(self.chunks)
        self._write_manifest()
        if old:
            (self.directory / old).unlink(missing_ok=True)

    def _load(self) -> None:
        assert self.directory is not None
        path = self.directory / MANIFEST
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataFormatError(f"{path}: unreadable RAG manifest: {exc}") from exc
        if manifest.get("format") != FORMAT_VERSION:
            raise DataFormatError(f"{path}: RAG store format {manifest.get('format')}, this memlab reads {FORMAT_VERSION}")
        stored = manifest.get("signature", {})
        if stored != self.signature:
            diff = {k: (stored.get(k), self.signature.get(k)) for k in set(stored) | set(self.signature)
                    if stored.get(k) != self.signature.get(k)}
            raise DataFormatError(
                f"{self.directory} was built with other settings (stored vs configured: {diff}); "
                "open it with the same rag embedder/model/chunking, or use a new data_dir"
            )
        if int(manifest.get("dim", self.dim)) != self.dim:
            raise DataFormatError(
                f"{path}: vectors of {manifest.get('dim')} dimensions stored, the configured embedder makes "
                f"{self.dim}: open it with the model that built it, or use a new data_dir"
            )
        self._counter = int(manifest.get("counter", 0))
        self.sessions = {str(k): int(v) for k, v in manifest.get("sessions", {}).items()}
        listed = set()
        for segment in manifest.get("segments", []):
            name = segment["name"]
            listed.update({f"{name}.jsonl", f"{name}.npz"})
            jsonl = self.directory / f"{name}.jsonl"
            try:
                chunks = [MemoryItem.model_validate_json(line) for line in jsonl.read_text("utf-8").splitlines() if line]
                with np.load(self.directory / f"{name}.npz") as data:
                    dense = np.asarray(data["dense"], dtype=np.float32)
                    sparse = _unpack_sparse(data) if "sparse" in segment["outputs"] else [None] * len(chunks)
                    colbert = _unpack_colbert(data) if "colbert" in segment["outputs"] else [None] * len(chunks)
            except (OSError, ValueError, KeyError) as exc:
                raise DataFormatError(f"{jsonl.with_suffix('')}: unreadable RAG segment: {exc}") from exc
            if not (len(chunks) == len(dense) == segment["chunks"]):
                raise DataFormatError(f"{jsonl}: {len(chunks)} chunks and {len(dense)} vectors, manifest says {segment['chunks']}")
            self.chunks.extend(chunks)
            self._dense.append(dense)
            self.sparse.extend(sparse)
            self.colbert.extend(colbert)
        self._segments = list(manifest.get("segments", []))
        index_info = manifest.get("index", {})
        same_kind = {k: index_info.get(k) for k in self.spec.as_dict()} == self.spec.as_dict()
        if index_info.get("file") and same_kind:
            listed.add(index_info["file"])
            self.index = faiss.read_index(str(self.directory / index_info["file"]))
            self._index_file, self._index_chunks = index_info["file"], int(index_info.get("chunks", 0))
            if self.spec.kind == "hnsw":
                self.index.hnsw.efSearch = self.spec.ef_search
            done = self._index_chunks
        else:  # no index saved yet, or another index type configured: rebuild from stored vectors
            done = 0
        tail = np.concatenate(self._dense)[done:] if self._dense else np.zeros((0, self.dim), np.float32)
        if len(tail):
            self.index.add(np.ascontiguousarray(tail))
        if self.index.ntotal != len(self.chunks):
            raise DataFormatError(f"{self.directory}: index holds {self.index.ntotal} vectors for {len(self.chunks)} chunks")
        # Leftovers of a save that crashed before its manifest: never listed, safe to delete.
        for leftover in self.directory.iterdir():
            if leftover.name != MANIFEST and leftover.name not in listed:
                leftover.unlink(missing_ok=True)


def remove_store(directory: Path) -> None:
    """Delete a user's store; renamed first so a crash never leaves a half-deleted store that opens."""
    if not directory.exists():
        return
    trash = directory.with_name(f".{directory.name}.deleted")
    if trash.exists():
        shutil.rmtree(trash)
    os.replace(directory, trash)
    shutil.rmtree(trash)
