"""The storage interface of the rag backend: where every user's chunks, vectors and turn counts live.

``RagMemory`` chunks and embeds; a ``RagStore`` numbers, keeps, ranks, lists and deletes. The
backend picks one by its ``store`` setting and only talks to this interface:

- ``local_store.LocalRagStore`` (``store`` unset): each user's chunks in RAM with a FAISS index,
  ranked by the backend's own rankers (dense, BM25 fusion, BGE-M3 re-ranking, neighbours), and
  persisted as files under the data directory when there is one (``file_store``).
- ``pg.PgRagStore`` (``store: postgresql://...``): rows in PostgreSQL + pgvector, ranked in SQL.

Item ids are unique per user (``<session>#<turn>`` and friends); two users may hold the same id.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memlab.memory import MemoryFilter
from memlab.types import MemoryItem, Session

Chunker = Callable[[int], list[MemoryItem]]  # first turn -> the chunks of the session part numbered from it


@dataclass
class Vectors:
    """One row per chunk: the dense vectors, and BGE-M3's sparse weights / ColBERT vectors when scoring needs them."""

    dense: np.ndarray
    sparse: list[Any] | None = None
    colbert: list[Any] | None = None


class RagStore(ABC):
    """Every user's chunks, their vectors and the sessions' turn counts (see the module doc)."""

    @abstractmethod
    def next_turn(self, user_id: str, session_id: str) -> int:
        """Turns of ``session_id`` stored so far: where its next part starts."""

    @abstractmethod
    def add(self, user_id: str, session: Session, chunk: Chunker, vectors: Vectors) -> int:
        """Store the next part of ``session``: the chunks ``chunk(first_turn)`` with ``vectors`` (same order).

        ``first_turn`` is the session's stored turn count, read and advanced by ``len(session.messages)``
        atomically with the write (two writers continuing one session number it without gaps);
        it is returned. Durable when it returns, for a store that persists.
        """

    def add_many(self, user_id: str, parts: list[tuple[Session, Chunker, Vectors]]) -> list[int]:
        """Store several parts in order, as ``add`` one by one would; each part's first turn.

        A store that can, writes them as one batch (the local store: one durable append); this
        default adds them one at a time.
        """
        return [self.add(user_id, session, chunk, vectors) for session, chunk, vectors in parts]

    @abstractmethod
    def search(self, user_id: str, query: str, k: int, filters: MemoryFilter | None = None) -> list[MemoryItem]:
        """At most ``k`` of the user's chunks for ``query``, each with its score, in conversation order;
        with ``filters``, the best ``k`` among the chunks it selects."""

    @abstractmethod
    def items(self, user_id: str) -> list[MemoryItem]:
        """Every chunk of the user, in conversation (insertion) order."""

    @abstractmethod
    def sessions(self, user_id: str) -> dict[str, int]:
        """Session id -> turns stored, for the user."""

    @abstractmethod
    def delete(self, user_id: str, item_id: str) -> None:
        """Remove one chunk for good; ``NotFoundError`` when the user has no such item."""

    @abstractmethod
    def reset(self, user_id: str) -> None:
        """Remove everything of the user, turn counts included."""

    def release(self, user_id: str) -> None:
        """Drop what is cached in RAM for the user (the data stays and reloads on use)."""

    def close(self) -> None:
        """Flush and release files, connections and locks."""

    def check_ready(self) -> None:  # noqa: B027 - optional hook: the file store has nothing to add
        """Raise when the store cannot serve a read (the service's ``/readyz``)."""
