"""Metadata, filters and pages for every built-in backend, through ``MemoryClient``.

One user tells two sessions: "work" (March 2024, metadata topic=work) and "home" (May and June
2024, topic=pets, one turn tagged "adoption"). Filters by session, by time range and by metadata
must select exactly the matching items in search, list and export; what was stored must survive
a reopen with its metadata; pages must return every memory once, also while memories are added.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pg_fixtures import pg_server  # noqa: F401 - the session fixture

from memlab.client import MemoryClient
from memlab.errors import UnsupportedCapabilityError
from memlab.memory import Capability, MemoryFilter
from memlab.types import MemoryItem, Message

WORK = [
    Message(
        role="user",
        content="I enjoy writing the quarterly reports for my team.",
        timestamp=datetime(2024, 3, 4, 9, 0),
        metadata={"topic": "work"},
    ),
    Message(
        role="user",
        content="I love planning the Tuesday standup meeting.",
        timestamp=datetime(2024, 3, 5, 9, 0),
        metadata={"topic": "work"},
    ),
]
HOME = [
    Message(
        role="user",
        content="I love my grey cat Pixel and her balcony naps.",
        timestamp=datetime(2024, 5, 10, 18, 0),
        metadata={"topic": "pets"},
    ),
    Message(
        role="user",
        content="I adopted a second cat called Miso.",
        timestamp=datetime(2024, 6, 1, 18, 0),
        metadata={"topic": "pets", "tags": ["adoption", "cats"]},
    ),
]

BACKENDS: dict[str, tuple[str, dict[str, Any]]] = {
    "none": ("none", {}),
    "full_context": ("full_context", {}),
    "rag-turn": ("rag", {"embedder": "hashing"}),
    "rag-session": ("rag", {"embedder": "hashing", "chunking": "session"}),
    "profile": ("profile", {"embedder": "hashing", "supporting_turns": 2}),
    "mem0": ("mem0", {"embedder": "hashing"}),
    "rag-postgres": ("rag", {"embedder": "hashing"}),
    "profile-postgres": ("profile", {"embedder": "hashing", "supporting_turns": 2}),
}


@pytest.fixture(params=list(BACKENDS))
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    name, options = BACKENDS[request.param]
    options = dict(options)
    if request.param.endswith("postgres"):
        options["store"] = request.getfixturevalue("pg_server").database_for(tmp_path)

    def open_client() -> MemoryClient:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # none: not persistent
            return MemoryClient(name, options, data_dir=tmp_path / "data")

    client = open_client()
    client.remember("alice", WORK, session_id="work")
    client.remember("alice", HOME, session_id="home")
    client.remember("bob", [("user", "I love my dog Rex.")], session_id="home", metadata={"topic": "pets"})
    yield request.param, client, open_client
    client.close()


def _sessions(items: list[MemoryItem]) -> set[str]:
    found = set()
    for item in items:
        turns = [item.source, *item.source.get("turns", [])]
        found |= {t["session_id"] for t in turns if "session_id" in t}
    return found


def _check_selected(items: list[MemoryItem], selected: MemoryFilter) -> None:
    assert all(selected.matches(item) for item in items)


FILTERS = {
    "session": ({"session_id": "home"}, "cat"),
    "time": ({"since": "2024-05-01T00:00:00", "until": "2024-07-01T00:00:00Z"}, "cat"),
    "metadata": ({"metadata": {"topic": "work"}}, "report"),
    "tag": ({"metadata": {"tags": "adoption"}}, "Miso"),
}


@pytest.mark.parametrize("which", list(FILTERS))
def test_search_list_and_export_return_only_what_the_filter_selects(opened: Any, which: str) -> None:
    backend, client, _ = opened
    raw, expected_word = FILTERS[which]
    selected = MemoryFilter.model_validate(raw)
    retrieval = client.recall("alice", "what do I love? cat report Miso meeting", k=20, filters=raw)
    _check_selected(retrieval.items, selected)
    if backend == "none":
        assert retrieval.items == [] and not client.supports(Capability.LIST)
        assert client.export("alice", filters=raw)["items"] == []
        return
    assert retrieval.items, f"{backend}: the filter {raw} left nothing although matching turns exist"
    assert expected_word in retrieval.context
    unwanted = "quarterly" if expected_word != "report" else "Pixel"
    if backend != "profile" and not backend.startswith("profile"):
        assert unwanted not in retrieval.context
    listed = client.memories("alice", filters=raw)
    _check_selected(listed, selected)
    assert listed and any(expected_word in item.text for item in listed)
    everything = client.memories("alice")
    assert [i.id for i in listed] == [i.id for i in everything if selected.matches(i)]
    exported = client.export("alice", filters=raw)
    assert exported["filters"] and [i["id"] for i in exported["items"]] == [i.id for i in listed]
    # bob's memories never come back, whatever the filter
    assert not any("Rex" in item.text for item in listed) and "Rex" not in retrieval.context


def test_metadata_is_stored_with_each_turn_and_survives_a_reopen(opened: Any) -> None:
    backend, client, open_client = opened
    if backend == "none":
        return
    client.close()
    reopened = open_client()
    try:
        tagged = reopened.memories("alice", filters={"metadata": {"tags": "cats"}})
        assert (
            tagged
            and all("Miso" in item.text or "Miso" in str(item.source) for item in tagged)
            or backend.startswith("profile")
        )
        turns = [t for item in reopened.memories("alice") for t in [item.source, *item.source.get("turns", [])]]
        turns = [t for t in turns if t.get("turn_index") is not None]
        with_meta = [t for t in turns if t.get("metadata")]
        assert with_meta, f"{backend}: no stored turn kept its metadata"
        assert {t["metadata"]["topic"] for t in with_meta} <= {"work", "pets"}
    finally:
        reopened.close()


def test_pages_return_every_memory_once_while_memories_are_added(opened: Any) -> None:
    backend, client, _ = opened
    if backend == "none":
        with pytest.raises(UnsupportedCapabilityError):
            client.memories_page("alice", limit=2)
        return
    before = {item.id for item in client.memories("alice")}
    seen: list[str] = []
    page = client.memories_page("alice", limit=2)
    deleted: set[str] = set()
    while True:
        seen += [item.id for item in page.items]
        assert len(page.items) <= 2
        if len(seen) == len(page.items):  # between the first two pages: a write, and a delete of a seen item
            client.remember("alice", [("user", "I started learning the cello in July.")], session_id="music")
            if client.supports(Capability.DELETE):
                client.delete("alice", page.items[0].id)
                deleted.add(page.items[0].id)
        if page.next_cursor is None:
            break
        page = client.memories_page("alice", limit=2, cursor=page.next_cursor)
    assert len(seen) == len(set(seen)), "a memory came twice"
    assert before <= set(seen), "a memory that existed throughout was skipped"
    assert not deleted & {item.id for item in client.memories("alice")}
    # export pages the same items; its other parts come with the first page only
    first = client.export("alice", limit=1)
    assert len(first["items"]) == 1 and first["next_cursor"]
    rest = client.export("alice", limit=1000, cursor=first["next_cursor"])
    assert rest["next_cursor"] is None and set(rest) == {"backend", "user_id", "items", "next_cursor"}
    with pytest.raises(ValueError, match="cursor"):
        client.memories_page("alice", limit=2, cursor="not-a-cursor")


def test_filter_values_are_checked() -> None:
    inverted = MemoryFilter.model_validate({"since": "2024-06-01T00:00:00", "until": "2024-05-01T00:00:00"})
    dated = MemoryItem(id="x", text="x", source={"timestamp": "2024-05-15T00:00:00"})
    assert not inverted.matches(dated)  # an empty range selects nothing (it is not an error)
    with pytest.raises(ValueError):
        MemoryFilter.model_validate({"sessions": "x"})
    with pytest.raises(ValueError, match="metadata"):
        Message(role="user", content="x", metadata={"blob": "x" * 5000})
    with pytest.raises(ValueError, match="metadata"):
        Message(role="user", content="x", metadata={"nested": {"objects": "are not filterable"}})
    with pytest.raises(ValueError, match="since"):
        MemoryFilter.model_validate({"since": 0})  # a number is not read as a Unix time
    # turns without metadata dump as before (dataset files and caches keyed on dumps do not change)
    assert Message(role="user", content="x").model_dump() == {"role": "user", "content": "x", "timestamp": None}


def test_memory_client_async_twins_and_idempotency_keys(tmp_path: Path) -> None:
    import asyncio

    from memlab.errors import ConflictError

    async def scenario(client: MemoryClient) -> None:
        reports = await asyncio.gather(
            *(
                client.aremember("alice", [("user", f"fact {n}")], session_id=f"s{n}", idempotency_key=f"k{n}")
                for n in range(4)
            )
        )
        again = await client.aremember("alice", [("user", "fact 0")], session_id="s0", idempotency_key="k0")
        assert again == reports[0]  # the first call's report; nothing stored twice
        assert len(await client.amemories("alice")) == 4
        found = await client.arecall("alice", "fact", k=10, filters={"session_id": ["s1", "s3"]})
        assert sorted(i.text for i in found.items) == ["fact 1", "fact 3"]
        page = await client.amemories_page("alice", limit=3)
        assert len(page.items) == 3 and page.next_cursor
        with pytest.raises(ConflictError):
            await client.aremember("alice", [("user", "something else")], session_id="s0", idempotency_key="k0")
        await client.aforget("alice")
        fresh = await client.aremember("alice", [("user", "fact 0")], session_id="s0", idempotency_key="k0")
        assert fresh.first_turn == 0 and len(await client.amemories("alice")) == 1  # forget forgot the keys

    with MemoryClient("full_context", data_dir=tmp_path) as client:
        asyncio.run(scenario(client))
    with MemoryClient("full_context", data_dir=tmp_path) as reopened:  # keys survive a reopen
        assert reopened.remember("alice", [("user", "fact 0")], session_id="s0", idempotency_key="k0").first_turn == 0
        assert len(reopened.memories("alice")) == 1
