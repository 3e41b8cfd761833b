"""Where one user's RAG chunks live on disk: a snapshot plus an append-only log, compacted.

The storage interface is small (``ChunkStorage``: load, append, rewrite, destroy, close) so that
another store (a database) can take the place of the files without touching retrieval.

The file store keeps, per user directory, exactly two data files of one *generation* ``G``:

- ``snapshot-G.mlr``: everything stored when generation ``G`` began (written to a temporary
  file, fsynced, renamed: it is either complete or absent);
- ``log-G.mlr``: every ingest since, one record each, appended and fsynced before the ingest
  returns (acknowledged = durable).

Each record is ``MLR1 | crc32 | length | payload``. A crash mid-append leaves a torn last record,
which the next open recognises (short, or a checksum that does not match) and truncates, keeping
every earlier record. Compaction (when the log outgrows the snapshot, and on every deletion)
writes ``snapshot-(G+1)`` holding the current state and an empty ``log-(G+1)``, then removes
generation ``G``: the newest complete snapshot always wins on open, and files of other
generations are leftovers of an interrupted compaction, deleted. A deleted chunk is therefore
physically gone (its text, vectors and log record) as soon as ``delete`` returns.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import DataFormatError
from memlab.types import MemoryItem

FORMAT_VERSION = 2
MAGIC = b"MLR1"
_HEAD = struct.Struct("<4sIQ")  # magic, crc32 of the payload, payload length
_FILE = re.compile(r"^(snapshot|log)-(\d{6,})\.mlr$")
logger = logging.getLogger(__name__)


@dataclass
class ChunkBatch:
    """Chunks with their vectors, plus the session turn counts after them (one ingest, or a snapshot)."""

    chunks: list[MemoryItem]
    dense: np.ndarray
    sparse: list[dict[int, float] | None] = field(default_factory=list)
    colbert: list[np.ndarray | None] = field(default_factory=list)
    sessions: dict[str, int] = field(default_factory=dict)
    faiss: bytes | None = None  # a serialised FAISS index over exactly these chunks (snapshots only)
    index_kind: dict[str, Any] | None = None  # the IndexSpec that built ``faiss``

    def __post_init__(self) -> None:
        n = len(self.chunks)
        self.sparse = list(self.sparse) or [None] * n
        self.colbert = list(self.colbert) or [None] * n
        if not (len(self.dense) == len(self.sparse) == len(self.colbert) == n):
            raise ValueError(
                f"{n} chunks but {len(self.dense)} dense, {len(self.sparse)} sparse, {len(self.colbert)} colbert rows"
            )


class ChunkStorage(ABC):
    """Durable storage of one user's chunks. ``append`` must be durable when it returns."""

    @abstractmethod
    def load(self) -> list[ChunkBatch]:
        """Everything stored, oldest first (empty for a new store)."""

    @abstractmethod
    def append(self, batch: ChunkBatch) -> None:
        """Add one ingest's chunks; on return they survive a crash."""

    @abstractmethod
    def rewrite(self, batch: ChunkBatch) -> None:
        """Replace everything by ``batch`` (compaction, deletion); nothing else may remain anywhere."""

    @abstractmethod
    def wants_compaction(self) -> bool:
        """Whether appending has made storage worth rewriting as one batch."""

    def appended_since_rewrite(self) -> int:
        """Appends since the last ``rewrite`` (0 when storage is one batch)."""
        return 0

    @abstractmethod
    def destroy(self) -> None:
        """Remove the store and all its data."""

    def close(self) -> None:
        """Release open handles."""


# ----------------------------------------------------------------------------- encoding
def _encode(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    specs, blobs = [], []
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        specs.append([name, array.dtype.str, list(array.shape)])
        blobs.append(array.tobytes())
    header = json.dumps({**meta, "arrays": specs}, separators=(",", ":")).encode("utf-8")
    payload = struct.pack("<I", len(header)) + header + b"".join(blobs)
    return _HEAD.pack(MAGIC, zlib.crc32(payload), len(payload)) + payload


def _decode(payload: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    (size,) = struct.unpack_from("<I", payload)
    meta = json.loads(payload[4 : 4 + size].decode("utf-8"))
    offset, arrays = 4 + size, {}
    for name, dtype, shape in meta.pop("arrays"):
        dt = np.dtype(dtype)
        count = int(np.prod(shape)) if shape else 1
        arrays[name] = np.frombuffer(payload, dtype=dt, count=count, offset=offset).reshape(shape)
        offset += count * dt.itemsize
    return meta, arrays


def _read_records(data: bytes) -> tuple[list[bytes], int]:
    """The complete records of ``data`` and the byte offset where the valid part ends."""
    records, offset = [], 0
    while offset + _HEAD.size <= len(data):
        magic, crc, length = _HEAD.unpack_from(data, offset)
        start = offset + _HEAD.size
        if magic != MAGIC or start + length > len(data) or zlib.crc32(data[start : start + length]) != crc:
            break
        records.append(data[start : start + length])
        offset = start + length
    return records, offset


def encode_batch(batch: ChunkBatch) -> bytes:
    arrays: dict[str, np.ndarray] = {"dense": np.asarray(batch.dense, dtype=np.float32)}
    has_sparse = [row is not None for row in batch.sparse]
    has_colbert = [row is not None for row in batch.colbert]
    sparse = [row for row in batch.sparse if row is not None]
    if sparse:
        offsets = np.zeros(len(sparse) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(r) for r in sparse])
        arrays["sparse_ids"] = np.fromiter((t for r in sparse for t in r), dtype=np.int64, count=int(offsets[-1]))
        arrays["sparse_weights"] = np.fromiter(
            (w for r in sparse for w in r.values()), dtype=np.float32, count=int(offsets[-1])
        )
        arrays["sparse_offsets"] = offsets
    colbert = [row for row in batch.colbert if row is not None]
    if colbert:
        offsets = np.zeros(len(colbert) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(r) for r in colbert])
        arrays["colbert"] = np.concatenate(colbert).astype(np.float16)
        arrays["colbert_offsets"] = offsets
    if batch.faiss is not None:
        arrays["faiss"] = np.frombuffer(batch.faiss, dtype=np.uint8)
    meta = {
        "type": "chunks",
        "chunks": [c.model_dump(mode="json") for c in batch.chunks],
        "sessions": batch.sessions,
        "has_sparse": has_sparse,
        "has_colbert": has_colbert,
        "index_kind": batch.index_kind,
    }
    return _encode(meta, arrays)


def decode_batch(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> ChunkBatch:
    chunks = [MemoryItem.model_validate(c) for c in meta["chunks"]]
    dense = np.array(arrays["dense"], dtype=np.float32).reshape(len(chunks), -1)
    sparse_rows: list[dict[int, float]] = []
    if "sparse_offsets" in arrays:
        ids, weights, offsets = arrays["sparse_ids"], arrays["sparse_weights"], arrays["sparse_offsets"]
        sparse_rows = [dict(zip(ids[a:b].tolist(), weights[a:b].tolist())) for a, b in zip(offsets[:-1], offsets[1:])]
    colbert_rows: list[np.ndarray] = []
    if "colbert_offsets" in arrays:
        flat, offsets = np.array(arrays["colbert"]), arrays["colbert_offsets"]
        colbert_rows = [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    sparse_iter, colbert_iter = iter(sparse_rows), iter(colbert_rows)
    return ChunkBatch(
        chunks=chunks,
        dense=dense,
        sparse=[next(sparse_iter) if has else None for has in meta["has_sparse"]],
        colbert=[next(colbert_iter) if has else None for has in meta["has_colbert"]],
        sessions={str(k): int(v) for k, v in meta.get("sessions", {}).items()},
        faiss=arrays["faiss"].tobytes() if "faiss" in arrays else None,
        index_kind=meta.get("index_kind"),
    )


# ----------------------------------------------------------------------------- files
def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file, fsync it, then rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class FileChunkStorage(ChunkStorage):
    """A user's chunks as ``snapshot-G.mlr`` + ``log-G.mlr`` in one directory (see the module doc).

    ``signature`` (embedder name, chunking) and ``dim`` are written into every snapshot; opening a
    store built with other ones is an error, since mixing vectors of two models or two chunkings
    would silently rank wrong.
    """

    def __init__(self, directory: Path, signature: dict[str, Any], dim: int, *, compact_min_records: int = 16) -> None:
        self.directory = directory
        self.signature = signature
        self.dim = dim
        self.compact_min_records = compact_min_records
        self.generation = -1
        self._log: Any = None  # the open log file of the current generation
        self._log_records = 0
        self._log_bytes = 0
        self._snapshot_bytes = 0

    def _path(self, kind: str, generation: int) -> Path:
        return self.directory / f"{kind}-{generation:06d}.mlr"

    # ------------------------------------------------------------------ reading
    def _header(self) -> bytes:
        return _encode({"type": "header", "format": FORMAT_VERSION, "signature": self.signature, "dim": self.dim}, {})

    def _check_header(self, path: Path, meta: dict[str, Any]) -> None:
        if meta.get("type") != "header" or meta.get("format") != FORMAT_VERSION:
            raise DataFormatError(f"{path}: RAG store format {meta.get('format')}, this memlab reads {FORMAT_VERSION}")
        stored = meta.get("signature", {})
        if stored != self.signature:
            diff = {
                k: (stored.get(k), self.signature.get(k))
                for k in set(stored) | set(self.signature)
                if stored.get(k) != self.signature.get(k)
            }
            raise DataFormatError(
                f"{self.directory} was built with other settings (stored vs configured: {diff}); "
                "open it with the same rag embedder/model/chunking, or use a new data_dir"
            )
        if int(meta.get("dim", self.dim)) != self.dim:
            raise DataFormatError(
                f"{path}: vectors of {meta.get('dim')} dimensions stored, the configured embedder makes "
                f"{self.dim}: open it with the model that built it, or use a new data_dir"
            )

    def load(self) -> list[ChunkBatch]:
        if not self.directory.exists():
            return []
        generations: dict[int, set[str]] = {}
        for path in self.directory.iterdir():
            match = _FILE.match(path.name)
            if match:
                generations.setdefault(int(match.group(2)), set()).add(match.group(1))
        snapshots = sorted(g for g, kinds in generations.items() if "snapshot" in kinds)
        if not snapshots:
            if (self.directory / "manifest.json").exists():
                raise DataFormatError(
                    f"{self.directory}: a RAG store of an older memlab (format 1, manifest.json); "
                    "re-ingest the history into a new data_dir"
                )
            self._cleanup(keep=-1)
            return []
        self.generation = snapshots[-1]
        snapshot = self._path("snapshot", self.generation)
        data = snapshot.read_bytes()
        records, end = _read_records(data)
        if end != len(data) or not records:
            raise DataFormatError(
                f"{snapshot}: damaged RAG snapshot ({len(data) - end} unreadable bytes at offset {end})"
            )
        try:
            header, _ = _decode(records[0])
            self._check_header(snapshot, header)
            batches = [decode_batch(*_decode(r)) for r in records[1:]]
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            if isinstance(exc, DataFormatError):
                raise
            raise DataFormatError(f"{snapshot}: unreadable RAG snapshot: {exc}") from exc
        self._snapshot_bytes = len(data)
        self._cleanup(keep=self.generation)
        log = self._path("log", self.generation)
        log_data = log.read_bytes() if log.exists() else b""
        records, end = _read_records(log_data)
        if end != len(log_data):
            # A torn tail: the last append never completed, so it was never acknowledged.
            logger.warning("%s: dropping %d bytes of an incomplete last record", log, len(log_data) - end)
            with log.open("r+b") as handle:
                handle.truncate(end)
                os.fsync(handle.fileno())
        try:
            batches += [decode_batch(*_decode(r)) for r in records]
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            raise DataFormatError(f"{log}: unreadable RAG log record: {exc}") from exc
        self._log_records, self._log_bytes = len(records), end
        return batches

    def _cleanup(self, keep: int) -> None:
        """Delete files of other generations and temporary files (leftovers of interrupted writes)."""
        if not self.directory.exists():
            return
        for path in self.directory.iterdir():
            match = _FILE.match(path.name)
            if (match and int(match.group(2)) != keep) or path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ writing
    def _open_log(self) -> None:
        if self._log is None:
            path = self._path("log", self.generation)
            existed = path.exists()
            self._log = path.open("ab")
            if not existed:
                fsync_dir(self.directory)

    def append(self, batch: ChunkBatch) -> None:
        if self.generation < 0:
            self.rewrite(ChunkBatch(chunks=[], dense=np.zeros((0, self.dim), np.float32)))
        self._open_log()
        record = encode_batch(batch)
        start = self._log.tell()
        try:
            self._log.write(record)
            self._log.flush()
            os.fsync(self._log.fileno())
        except BaseException:
            # Leave no partial record behind in this process either (the next open would drop it too).
            try:
                self._log.truncate(start)
                self._log.seek(start)
            except OSError:
                pass
            raise
        self._log_records += 1
        self._log_bytes += len(record)

    def appended_since_rewrite(self) -> int:
        return self._log_records

    def wants_compaction(self) -> bool:
        return self._log_records >= self.compact_min_records and self._log_bytes >= self._snapshot_bytes

    def rewrite(self, batch: ChunkBatch) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        new = self.generation + 1
        data = self._header() + (encode_batch(batch) if batch.chunks or batch.sessions else b"")
        atomic_write(self._path("snapshot", new), data)  # the commit point of the new generation
        old, self.generation = self.generation, new
        if self._log is not None:
            self._log.close()
            self._log = None
        self._log_records = self._log_bytes = 0
        self._snapshot_bytes = len(data)
        self._open_log()
        if old >= 0:
            self._path("log", old).unlink(missing_ok=True)
            self._path("snapshot", old).unlink(missing_ok=True)
            fsync_dir(self.directory)

    def destroy(self) -> None:
        self.close()
        remove_directory(self.directory)
        self.generation = -1

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def remove_directory(directory: Path) -> None:
    """Delete a directory; renamed first so a crash never leaves a half-deleted store that opens."""
    if not directory.exists():
        return
    trash = directory.with_name(f".{directory.name}.deleted")
    if trash.exists():
        shutil.rmtree(trash)
    os.replace(directory, trash)
    shutil.rmtree(trash)
    fsync_dir(directory.parent)
