"""Per-user search over mem0's embedded qdrant store.

qdrant-client's local mode answers a filtered search by testing every point's payload in Python and
scoring every point of the collection: one user's search costs time in proportion to *all* users'
memories and holds the GIL throughout, so concurrent searches cannot overlap and latency grows with
the number of users (1,600 points of 200 users: ~60 % of a search's time went to that filter).

``UserPartitionedStore`` wraps mem0's qdrant vector store. A search filtered by ``user_id`` alone is
answered from that user's points only, kept in RAM as one matrix, with the scores and order qdrant
gives (cosine: stored vectors are unit-normalised at upsert, the query is normalised here the same
way). Every other call goes to qdrant unchanged. Writes go to qdrant first, then drop the cached
partition of each user they touch; qdrant stays the only durable copy. A user's ``list`` (mem0's
``get_all``) is answered from the same partition.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SCROLL_PAGE = 1024


@dataclass(frozen=True)
class _Partition:
    ids: list[str]
    vectors: np.ndarray  # (n, d) float32, unit rows as qdrant stores them
    payloads: list[dict[str, Any]]


def _user_only(filters: Any) -> str | None:
    """The user id of a filter that names a user and nothing else."""
    if isinstance(filters, dict) and set(filters) == {"user_id"} and isinstance(filters["user_id"], str):
        return filters["user_id"]
    return None


class UserPartitionedStore:
    """mem0's local qdrant vector store, searched one user's points at a time (see the module doc)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._guard = threading.Lock()
        self._user_of: dict[str, str] | None = None  # point id -> user id; None until first needed
        self._ids_of: dict[str, set[str]] = {}
        self._partitions: dict[str, _Partition] = {}
        self._versions: dict[str, int] = {}  # bumped by every write touching the user
        self._generation = 0  # bumped when the whole collection is reset

    def __getattr__(self, name: str) -> Any:  # everything not overridden is qdrant's own
        return getattr(self._inner, name)

    # ------------------------------------------------------------------ search
    def search(
        self, query: str, vectors: list[float], top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[Any]:
        user = _user_only(filters)
        if user is None:
            return list(self._inner.search(query=query, vectors=vectors, top_k=top_k, filters=filters))
        part = self._partition(user)
        if not part.ids or top_k < 1:
            return []
        from qdrant_client.http import models

        q = np.asarray(vectors, dtype=np.float32)
        if np.isnan(q).any():
            raise ValueError("Query vector must not contain NaN")
        norm = np.linalg.norm(q)
        q = q / (norm if norm != 0.0 else np.finfo(np.float32).eps)
        scores = part.vectors @ q
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [
            models.ScoredPoint(
                id=part.ids[i], version=0, score=float(scores[i]), payload=copy.deepcopy(part.payloads[i]), vector=None
            )
            for i in order
        ]

    def list(self, filters: dict[str, Any] | None = None, top_k: int = 100) -> Any:
        """qdrant's ``scroll`` answer (points by id, the next id or None) for one user's points."""
        user = _user_only(filters)
        if user is None:
            return self._inner.list(filters=filters, top_k=top_k)
        from qdrant_client.http import models

        part = self._partition(user)
        ordered = sorted(range(len(part.ids)), key=lambda i: part.ids[i])
        page = [
            models.Record(id=part.ids[i], payload=copy.deepcopy(part.payloads[i]), vector=None) for i in ordered[:top_k]
        ]
        return page, (part.ids[ordered[top_k]] if len(ordered) > top_k else None)

    def _partition(self, user: str) -> _Partition:
        with self._guard:
            self._load_owners()
            if (cached := self._partitions.get(user)) is not None:
                return cached
            version = (self._generation, self._versions.get(user, 0))
            ids = sorted(self._ids_of.get(user, ()))
        points = self._inner.client.retrieve(
            collection_name=self._inner.collection_name, ids=ids, with_payload=True, with_vectors=True
        )
        # a point whose payload names another user now (a payload update) is not this user's
        points = [p for p in points if (p.payload or {}).get("user_id") == user]
        # newest first, so that equal scores rank the newer memory first (as qdrant's reversed argsort
        # over insertion order does), the same way in every process
        points.sort(key=lambda p: ((p.payload or {}).get("created_at") or "", str(p.id)), reverse=True)
        dims = int(self._inner.embedding_model_dims)
        part = _Partition(
            ids=[str(p.id) for p in points],
            vectors=np.asarray([_dense(p.vector) for p in points], dtype=np.float32).reshape(len(points), dims),
            payloads=[p.payload or {} for p in points],
        )
        with self._guard:
            if (self._generation, self._versions.get(user, 0)) == version:  # no write landed while it was read
                self._partitions[user] = part
        return part

    def _load_owners(self) -> None:
        """Which user owns each point: one pass over the payloads' ``user_id`` (called under the guard)."""
        if self._user_of is not None:
            return
        owners: dict[str, str | None] = {}
        offset = None
        while True:
            page, offset = self._inner.client.scroll(
                collection_name=self._inner.collection_name,
                limit=SCROLL_PAGE,
                offset=offset,
                with_payload=["user_id"],
                with_vectors=False,
            )
            for point in page:
                owners[str(point.id)] = (point.payload or {}).get("user_id")
            if offset is None:
                break
        self._user_of = {}
        for point_id, user in owners.items():
            self._own(point_id, user)

    # ------------------------------------------------------------------ writes
    def insert(
        self, vectors: Sequence[Any], payloads: Sequence[dict[str, Any]] | None = None, ids: Sequence[Any] | None = None
    ) -> None:
        try:
            self._inner.insert(vectors=vectors, payloads=payloads, ids=ids)
        finally:
            with self._guard:
                if self._user_of is not None:
                    for index in range(len(vectors)):
                        point_id = str(index if ids is None else ids[index])
                        payload = payloads[index] if payloads else {}
                        self._own(point_id, payload.get("user_id"))

    def update(
        self, vector_id: Any, vector: Sequence[float] | None = None, payload: dict[str, Any] | None = None
    ) -> None:
        try:
            self._inner.update(vector_id=vector_id, vector=vector, payload=payload)
        finally:
            with self._guard:
                if self._user_of is not None:
                    # set_payload merges: read back whose point it is now
                    found = self._inner.client.retrieve(
                        collection_name=self._inner.collection_name, ids=[vector_id], with_payload=["user_id"]
                    )
                    self._own(str(vector_id), (found[0].payload or {}).get("user_id") if found else None)

    def delete(self, vector_id: Any) -> None:
        try:
            self._inner.delete(vector_id=vector_id)
        finally:
            with self._guard:
                if self._user_of is not None:
                    self._own(str(vector_id), None)

    def reset(self) -> None:
        try:
            self._inner.reset()
        finally:
            self._forget_all()

    def delete_col(self) -> None:
        try:
            self._inner.delete_col()
        finally:
            self._forget_all()

    def _own(self, point_id: str, user: str | None) -> None:
        """Record ``point_id`` as ``user``'s (None: deleted), dropping both users' partitions."""
        assert self._user_of is not None
        before = self._user_of.pop(point_id, None)
        for touched in {before, user} - {None}:
            assert touched is not None
            self._partitions.pop(touched, None)
            self._versions[touched] = self._versions.get(touched, 0) + 1
        if before is not None:
            self._ids_of.get(before, set()).discard(point_id)
        if user is not None:
            self._user_of[point_id] = user
            self._ids_of.setdefault(user, set()).add(point_id)

    def _forget_all(self) -> None:
        with self._guard:
            self._generation += 1  # a partition read before the reset is not kept
            self._user_of = None
            self._ids_of.clear()
            self._partitions.clear()


def _dense(vector: Any) -> Any:
    """The unnamed dense vector of a retrieved point (mem0's collections also hold a named sparse one)."""
    return vector.get("", next(iter(vector.values()))) if isinstance(vector, dict) else vector
