"""mem0's embedded qdrant is searched one user's points at a time (memlab_plugins/mem0_backend/user_index.py):
the same results as qdrant's own filtered search, after every kind of write, without qdrant's scan of
every user's payloads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memlab.testing import session
from memlab_plugins.mem0_backend import Mem0Memory
from memlab_plugins.mem0_backend.user_index import UserPartitionedStore

CONFIG = {"embedder": "hashing"}
USERS = ["ann", "bo", "cy", "dee"]
TOPICS = ["tea", "coffee", "hiking", "chess", "pottery", "jazz", "sushi", "cycling"]
QUERIES = ["what do I drink?", "my hobbies", "music I like", "food", "sports on weekends"]


def _fill(memory: Mem0Memory) -> None:
    for u, user in enumerate(USERS):
        for s in range(3):
            turns = [("user", f"I am {user} and I like {TOPICS[(u + s + t) % len(TOPICS)]} a lot.") for t in range(4)]
            memory.ingest(session(f"s{s}", *turns), user_id=user)


def _ranked(points: list[Any]) -> list[tuple[float, str, Any]]:
    """Points by score, ids breaking ties; at the cut, which of equally scored points made it is arbitrary
    (qdrant's argsort is not stable either), so the lowest score's points are compared by score only."""
    last = min((round(p.score, 5) for p in points), default=0.0)
    return sorted((-round(p.score, 5), str(p.id), p.payload) for p in points if round(p.score, 5) > last)


def _assert_same_as_qdrant(memory: Mem0Memory) -> None:
    store = memory._mem.vector_store
    assert isinstance(store, UserPartitionedStore)
    inner = store._inner
    for user in [*USERS, "nobody"]:
        for query in QUERIES:
            vector = memory._mem.embedding_model.embed(query, "search")
            for top_k in (1, 5, 60):
                ours = store.search(query=query, vectors=vector, top_k=top_k, filters={"user_id": user})
                theirs = inner.search(query=query, vectors=vector, top_k=top_k, filters={"user_id": user})
                assert len(ours) == len(theirs)
                assert [round(p.score, 5) for p in ours] == [round(p.score, 5) for p in theirs]
                assert _ranked(ours) == _ranked(theirs)
        for top_k in (1, 3, 100):
            ours_page, ours_next = store.list(filters={"user_id": user}, top_k=top_k)
            theirs_page, theirs_next = inner.list(filters={"user_id": user}, top_k=top_k)
            assert [(str(p.id), p.payload) for p in ours_page] == [(str(p.id), p.payload) for p in theirs_page]
            assert (None if ours_next is None else str(ours_next)) == (
                None if theirs_next is None else str(theirs_next)
            )


def test_search_gives_qdrants_results_after_every_kind_of_write(tmp_path: Path) -> None:
    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    try:
        _fill(memory)
        _assert_same_as_qdrant(memory)
        items = memory.list_memories(user_id="bo")
        memory.update(items[0].id, "I am bo and I now play the cello.", user_id="bo")
        memory.delete(items[1].id, user_id="bo")
        memory.reset("cy")
        memory.ingest(session("s9", ("user", "I am dee and I collect stamps.")), user_id="dee")
        _assert_same_as_qdrant(memory)
        found = memory.retrieve("cello", user_id="bo", k=3)
        assert "cello" in found.items[0].text
        assert not memory.retrieve("tea", user_id="cy", k=5).items
        assert all(item.id != items[1].id for item in memory.retrieve("hiking chess", user_id="bo", k=50).items)
    finally:
        memory.close()
    reopened = Mem0Memory(CONFIG, data_dir=tmp_path)  # the partitions are rebuilt from qdrant alone
    try:
        _assert_same_as_qdrant(reopened)
    finally:
        reopened.close()


def test_other_filters_go_to_qdrant_unchanged(tmp_path: Path) -> None:
    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    try:
        _fill(memory)
        store = memory._mem.vector_store
        vector = memory._mem.embedding_model.embed("tea", "search")
        both = {"user_id": "ann", "session_id": "s1"}
        ours = store.search(query="tea", vectors=vector, top_k=10, filters=both)
        assert ours and all(p.payload["session_id"] == "s1" and p.payload["user_id"] == "ann" for p in ours)
        assert _ranked(ours) == _ranked(store._inner.search(query="tea", vectors=vector, top_k=10, filters=both))
    finally:
        memory.close()


def test_a_search_or_a_list_no_longer_scans_every_users_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """qdrant's local mode checks every point's payload in Python for a filtered search or scroll; the
    per-user search and list must not call it (it fails on the unwrapped store)."""
    from qdrant_client.local import local_collection

    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    try:
        _fill(memory)
        scans: list[int] = []
        real = local_collection.calculate_payload_mask

        def counting(payloads: list[dict[str, Any]], payload_filter: Any, *args: Any, **kwargs: Any) -> Any:
            if payload_filter is not None:  # None: no filter, no per-point check
                scans.append(len(payloads))
            return real(payloads, payload_filter, *args, **kwargs)

        monkeypatch.setattr(local_collection, "calculate_payload_mask", counting)
        memory.retrieve("tea", user_id="ann", k=5)  # builds ann's partition (reads by id, no scan)
        memory.retrieve("what do I like?", user_id="ann", k=5)
        assert memory.retrieve("tea", user_id="ann", k=5).items
        assert len(memory.list_memories(user_id="ann")) == 12
        assert scans == []
    finally:
        memory.close()
