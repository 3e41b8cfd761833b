"""``MemlabStore``: LangGraph's ``BaseStore`` over memlab, checked against LangGraph's own ``InMemoryStore``.

The same operations run on both stores and must give the same answers (get, put over an existing
key, delete, search with filters/offset/limit, list_namespaces with prefix/suffix/max_depth); a
query search must use the backend's retrieval; a compiled graph with a checkpointer uses the store
for memory across threads; the async twins work; unmappable namespaces and backends that do not
keep values verbatim are refused.
"""

from __future__ import annotations

import asyncio
import operator
import warnings
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore, InvalidNamespaceError  # noqa: E402
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


def test_unmappable_namespaces_and_unsuitable_backends_are_refused(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path / "fc") as client:
        store = MemlabStore(client)
        with pytest.raises(InvalidNamespaceError, match="memlab user"):
            store.put(("memories",), "k", {"a": 1})
        with pytest.raises(InvalidNamespaceError, match="user"):
            store.put(("memories", "not a user id!"), "k", {"a": 1})
        with pytest.raises(InvalidNamespaceError, match="names the user"):
            store.list_namespaces()
        with pytest.raises(InvalidNamespaceError):
            store.search(("memories",))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with MemoryClient("none") as nothing, pytest.raises(MemlabError, match="list"):
            MemlabStore(nothing)
    with MemoryClient("profile", {"embedder": "hashing"}, data_dir=tmp_path / "profile") as profile:
        with pytest.raises(MemlabError, match="verbatim"):
            MemlabStore(profile).put(ALICE, "cat", VALUES["cat"])


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
        first = {"configurable": {"thread_id": "t1", "user_id": "alice"}}
        graph.invoke({"messages": ["remember: my cat is called Pixel"]}, first)
        graph.invoke({"messages": ["remember: I live in Lisbon"]}, first)
        assert len(graph.get_state(first).values["messages"]) == 4  # the checkpointer kept thread 1
        second = {"configurable": {"thread_id": "t2", "user_id": "alice"}}
        answer = graph.invoke({"messages": ["what is my cat called?"]}, second)["messages"][-1]
        assert answer == "my cat is called Pixel"
        other = {"configurable": {"thread_id": "t3", "user_id": "bob"}}
        assert graph.invoke({"messages": ["what is my cat called?"]}, other)["messages"][-1] == "I don't know"
