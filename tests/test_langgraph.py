"""``MemlabStore``: LangGraph's ``BaseStore`` over memlab, checked against LangGraph's own ``InMemoryStore``.

The same operations run on both stores and must give the same answers (get, put over an existing
key, delete, search with filters/offset/limit, list_namespaces with prefix/suffix/max_depth); a
query search must use the backend's retrieval; a compiled graph with a checkpointer uses the store
for memory across threads; the async twins work; unmappable namespaces and backends that do not
keep values verbatim are refused.
"""

from __future__ import annotations

import asyncio
import importlib.util
import operator
import sys
import time
import uuid
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memlab.client import MemoryClient  # noqa: E402
from memlab.errors import MemlabError  # noqa: E402
from memlab.integrations.langgraph import MemlabStore  # noqa: E402

ALICE = ("memories", "alice")
VALUES = {
    "cat": {"memory": "Alice has a grey cat named Pixel", "kind": "pet", "age": 3},
    "bees": {"memory": "Alice keeps bees on her roof", "kind": "hobby", "age": 7},
    "city": {"memory": "Alice lives in Lisbon", "kind": "place", "age": 1, "tags": ["home", "city"]},
}


def _view(items: list[Any]) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    return [(i.namespace, i.key, i.value) for i in items]


@pytest.fixture(params=["full_context", "rag", "mem0"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    options = {"full_context": {}, "rag": {"embedder": "hashing"}, "mem0": {"embedder": "hashing"}}[request.param]
    client = MemoryClient(request.param, options, data_dir=tmp_path / "data")
    yield MemlabStore(client)
    client.close()


def test_behaves_like_langgraphs_in_memory_store(store: MemlabStore) -> None:
    reference = InMemoryStore()
    for target in (store, reference):
        for key, value in VALUES.items():
            target.put(ALICE, key, value)
        target.put(("memories", "alice", "work"), "job", {"memory": "Alice is a nurse", "kind": "job", "age": 2})
        target.put(("memories", "bob"), "dog", {"memory": "Bob has a dog", "kind": "pet", "age": 5})
        target.put(ALICE, "cat", {**VALUES["cat"], "age": 4})  # an update keeps created_at
        target.delete(ALICE, "bees")
    assert store.get(ALICE, "bees") is None and reference.get(ALICE, "bees") is None
    mine, theirs = store.get(ALICE, "cat"), reference.get(ALICE, "cat")
    assert mine is not None and theirs is not None
    assert _view([mine]) == _view([theirs]) and mine.value["age"] == 4
    assert mine.created_at < mine.updated_at
    assert store.get(("memories", "alice"), "no-such-key") is None
    cases: list[dict[str, Any]] = [
        {},
        {"filter": {"kind": "pet"}},
        {"filter": {"age": {"$gte": 2}}},
        {"filter": {"age": {"$gt": 1, "$lt": 4}}},
        {"filter": {"kind": {"$ne": "pet"}}},
        {"filter": {"tags": ["home", "city"]}},
        {"limit": 1},
        {"limit": 1, "offset": 1},
        {"offset": 5},
    ]
    for case in cases:
        assert sorted(_view(store.search(ALICE, **case))) == sorted(_view(reference.search(ALICE, **case))), case
        assert len(store.search(ALICE, **case)) == len(reference.search(ALICE, **case)), case
    assert _view(store.search(("memories", "alice", "work"))) == _view(reference.search(("memories", "alice", "work")))
    for kwargs in ({}, {"max_depth": 2}, {"suffix": ("work",)}, {"limit": 1, "offset": 1}):
        assert store.list_namespaces(prefix=ALICE, **kwargs) == reference.list_namespaces(prefix=ALICE, **kwargs)
    assert _view(store.search(("memories", "bob"))) == _view(reference.search(("memories", "bob")))


def test_query_search_uses_the_backends_retrieval(store: MemlabStore) -> None:
    for key, value in VALUES.items():
        store.put(ALICE, key, value)
    store.put(("memories", "bob"), "pet", {"memory": "Bob has a grey cat too"})
    found = store.search(ALICE, query="grey cat named Pixel", limit=2)
    assert found and found[0].key == "cat" and all(i.namespace == ALICE for i in found)
    if store.client.backend != "full_context":  # full_context returns turns, unscored
        assert found[0].score is not None
    assert [i.key for i in store.search(ALICE, query="what does Alice do", filter={"kind": "hobby"})] == ["bees"]


def test_async_methods(store: MemlabStore) -> None:
    async def scenario() -> None:
        await store.aput(ALICE, "cat", VALUES["cat"])
        await asyncio.gather(*(store.aput(ALICE, f"k{n}", {"n": n}) for n in range(4)))
        item = await store.aget(ALICE, "cat")
        assert item is not None and item.value == VALUES["cat"]
        assert len(await store.asearch(ALICE, limit=10)) == 5
        assert await store.alist_namespaces(prefix=("memories", "alice")) == [ALICE]
        await store.adelete(ALICE, "cat")
        assert await store.aget(ALICE, "cat") is None

    asyncio.run(scenario())


def test_values_survive_a_restart_and_forget_removes_them(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        MemlabStore(client).put(ALICE, "cat", VALUES["cat"])
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        store = MemlabStore(client)
        item = store.get(ALICE, "cat")
        assert item is not None and item.value == VALUES["cat"]
        client.forget("alice")
        assert store.get(ALICE, "cat") is None


def test_unsuitable_backends_are_refused(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with MemoryClient("none") as nothing, pytest.raises(MemlabError, match="list"):
            MemlabStore(nothing)
    with MemoryClient("profile", {"embedder": "hashing"}, data_dir=tmp_path / "profile") as profile:
        with pytest.raises(MemlabError, match="verbatim"):
            MemlabStore(profile).put(ALICE, "cat", VALUES["cat"])


def test_any_namespace_maps_to_a_user_and_forget_and_isolation_hold(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        store = MemlabStore(client)
        store.put(("user_123", "memories"), "a", {"memory": "first"})
        store.put(("memories", "user_123"), "b", {"memory": "second"})
        store.put(("memories", "bob"), "c", {"memory": "bob's"})
        store.put(("memories",), "d", {"memory": "nobody's"})  # no user label: the shared user
        store.put(("tenant", "a%b", "star*"), "e", {"memory": "escaped"})
        assert {m.source["metadata"]["langgraph_key"] for m in client.memories("user_123")} == {"a", "b"}
        assert [m.source["metadata"]["langgraph_key"] for m in client.memories("bob")] == ["c"]
        assert store.get(("tenant", "a%b", "star*"), "e") is not None
        assert [i.key for i in store.search(("memories", "bob"))] == ["c"]
        assert store.list_namespaces() == [
            ("memories",),
            ("memories", "bob"),
            ("memories", "user_123"),
            ("tenant", "a%b", "star*"),
            ("user_123", "memories"),
        ]
        assert sorted(i.key for i in store.search(())) == ["a", "b", "c", "d", "e"]
        client.forget("user_123")
        assert store.get(("user_123", "memories"), "a") is None and store.get(("memories", "user_123"), "b") is None
        assert ("user_123", "memories") not in store.list_namespaces()
        assert not [m for m in client.memories("langgraph") if "user_123" in m.text]  # its catalog entry went too
        # A position names the user instead (user_index is the earlier name of the same thing).
        for positional in (MemlabStore(client, user_namespace=0), MemlabStore(client, user_index=0)):
            positional.put(("memories", "x"), "k", {"v": 1})
            assert [m.source["metadata"]["langgraph_key"] for m in client.memories("memories")] == ["k"]
    with pytest.raises(TypeError, match="user_namespace"):
        MemlabStore(client, user_namespace="memories")


def test_values_round_trip_and_filters_raise_as_langgraph_does(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        store, reference = MemlabStore(client), InMemoryStore()
        when = datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc)
        value = {"when": when, "id": uuid.UUID(int=7), "nested": {"at": [when]}, "plain": {"$langgraph": 1}}
        store.put(ALICE, "typed", value)
        item = store.get(ALICE, "typed")
        assert item is not None and item.value == value
        for target in (store, reference):
            target.put(ALICE, "n", {"age": 3, "name": "x"})
            with pytest.raises(ValueError, match="Unsupported operator"):
                target.search(ALICE, filter={"age": {"$regex": "3"}})
            with pytest.raises((TypeError, ValueError)):  # a value that is not a number, as InMemoryStore
                target.search(ALICE, filter={"name": {"$gt": 1}})


def test_index_config_fields_and_index_false(tmp_path: Path) -> None:
    with MemoryClient("rag", {"embedder": "hashing"}, data_dir=tmp_path / "rag") as client:
        plain = MemlabStore(client)
        assert plain.index_config is None
        plain.put(ALICE, "seen", {"memory": "Alice paints watercolours"})
        plain.put(ALICE, "hidden", {"memory": "Alice paints watercolours"}, index=False)
        found = plain.search(ALICE, query="watercolours")
        assert [i.key for i in found] == ["seen"]  # the backend's retrieval never sees index=False items
        assert {i.key for i in plain.search(ALICE)} == {"seen", "hidden"}
    with MemoryClient("full_context", data_dir=tmp_path / "fc") as client:
        index = {"dims": 256, "embed": "memlab:hashing", "fields": ["title"]}
        store = MemlabStore(client, index=index)  # type: ignore[arg-type]
        assert store.index_config is not None and store.index_config["fields"] == ["title"]
        store.put(("docs", "alice"), "t", {"title": "sailing boats", "body": "nothing"})
        store.put(("docs", "alice"), "b", {"body": "sailing boats"})  # no title: no vector, no score
        store.put(("docs", "alice"), "o", {"title": "x", "body": "sailing boats"}, index=["body"])
        scores = {i.key: i.score for i in store.search(("docs", "alice"), query="sailing boats")}
        assert scores["b"] is None and scores["t"] == pytest.approx(1.0) and scores["o"] == pytest.approx(1.0)


def test_ttl_expires_refreshes_and_sweeps(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        store = MemlabStore(client, ttl={"default_ttl": 1 / 600, "omit_expired": True})  # 0.1 s
        assert store.supports_ttl
        store.put(ALICE, "short", {"v": 1})
        store.put(ALICE, "kept", {"v": 2}, ttl=None)
        time.sleep(0.2)
        assert store.get(ALICE, "short") is None and store.get(ALICE, "kept") is not None
        assert store.sweep_ttl() == 1
        assert [m.source["metadata"]["langgraph_key"] for m in client.memories("alice")] == ["kept"]
        long = MemlabStore(client, ttl={"default_ttl": 10, "refresh_on_read": True})
        long.put(ALICE, "refreshed", {"v": 3})
        before = next(m for m in client.memories("alice") if "refreshed" in str(m.source))
        assert long.get(ALICE, "refreshed") is not None
        after = next(m for m in client.memories("alice") if "refreshed" in str(m.source))
        expiry = "langgraph_expires_at"
        assert after.source["metadata"][expiry] > before.source["metadata"][expiry]
        swept = MemlabStore(client, ttl={"default_ttl": 1 / 600, "sweep_interval_minutes": 1 / 600})
        swept.put(("memories", "carol"), "gone", {"v": 4})
        swept.start_ttl_sweeper()
        deadline = time.monotonic() + 10
        while client.memories("carol") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert swept.stop_ttl_sweeper(timeout=10)
        assert client.memories("carol") == []  # the sweeper deleted the expired item


def test_a_left_over_version_is_shown_once(tmp_path: Path) -> None:
    """An interrupted put (or two concurrent TTL refreshes) leaves two turns for a key: reads show the newest."""
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        store = MemlabStore(client)
        store.put(ALICE, "cat", {"v": 1})
        (turn,) = client.memories("alice")
        metadata = {**turn.source["metadata"], "langgraph_updated_at": "2099-01-01T00:00:00+00:00"}
        client.remember("alice", [{"role": "user", "content": '{"v": 2}', "metadata": metadata}], session_id="x")
        assert [(i.key, i.value) for i in store.search(ALICE)] == [("cat", {"v": 2})]
        assert [(i.key, i.value) for i in store.search(ALICE, query="v")] == [("cat", {"v": 2})]
        item = store.get(ALICE, "cat")
        assert item is not None and item.value == {"v": 2}
        store.put(ALICE, "cat", {"v": 3})  # a put replaces every version
        assert len(client.memories("alice")) == 1


@pytest.mark.slow
def test_langgraphs_own_store_suite_passes_with_memlab_swapped_in(tmp_path: Path) -> None:
    """benchmarks/bench_langgraph_store_suite.py: LangGraph's test_store.py (from the langgraph-checkpoint
    sdist on PyPI, or $MEMLAB_LANGGRAPH_SUITE) with InMemoryStore swapped for MemlabStore."""
    pytest.importorskip("pytest_asyncio")
    pytest.importorskip("pytest_mock")
    spec = importlib.util.spec_from_file_location(
        "bench_langgraph_store_suite", Path(__file__).parents[1] / "benchmarks" / "bench_langgraph_store_suite.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_langgraph_store_suite"] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    try:
        tests = bench.obtain_suite(None, tmp_path / "suite")
    except bench.SuiteUnavailable as exc:
        pytest.skip(str(exc))
    for backend in ("full_context", "rag"):
        result = bench.run_suite(tests, backend, tmp_path)
        assert result.tests > 0 and result.tests_passed >= result.tests - 1, (backend, result.failed)


class State(TypedDict):
    messages: Annotated[list[str], operator.add]


def test_a_graph_with_a_checkpointer_uses_the_store_for_long_term_memory(tmp_path: Path) -> None:
    """Thread 1 learns a fact into the store; thread 2 (a new conversation, same user) recalls it."""

    def remember_or_recall(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, list[str]]:
        user = config["configurable"]["user_id"]
        text = state["messages"][-1]
        namespace = ("memories", user)
        if text.startswith("remember: "):
            fact = text.removeprefix("remember: ")
            store.put(namespace, f"fact-{len(store.search(namespace, limit=100))}", {"memory": fact})
            return {"messages": [f"ok, I will remember that {fact}"]}
        found = store.search(namespace, query=text, limit=1)
        return {"messages": [found[0].value["memory"] if found else "I don't know"]}

    builder = StateGraph(State)
    builder.add_node("memory", remember_or_recall)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    with MemoryClient("rag", {"embedder": "hashing"}, data_dir=tmp_path) as client:
        graph = builder.compile(checkpointer=InMemorySaver(), store=MemlabStore(client))
        first: RunnableConfig = {"configurable": {"thread_id": "t1", "user_id": "alice"}}
        graph.invoke({"messages": ["remember: my cat is called Pixel"]}, first)
        graph.invoke({"messages": ["remember: I live in Lisbon"]}, first)
        assert len(graph.get_state(first).values["messages"]) == 4  # the checkpointer kept thread 1
        second: RunnableConfig = {"configurable": {"thread_id": "t2", "user_id": "alice"}}
        answer = graph.invoke({"messages": ["what is my cat called?"]}, second)["messages"][-1]
        assert answer == "my cat is called Pixel"
        other: RunnableConfig = {"configurable": {"thread_id": "t3", "user_id": "bob"}}
        assert graph.invoke({"messages": ["what is my cat called?"]}, other)["messages"][-1] == "I don't know"
