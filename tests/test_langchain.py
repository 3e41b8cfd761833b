"""langchain-core adapters behave as langchain-core documents its retrievers and chat histories."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from memlab.client import MemoryClient
from memlab.integrations.langchain import MemlabChatMessageHistory, MemlabRetriever
from memlab.registry import create_backend

PIXEL = "I adopted a grey cat named Pixel last spring."
BEES = "I keep bees on the roof of my apartment in Lisbon."


@pytest.fixture
def rag_client(tmp_path: Path) -> MemoryClient:
    client = MemoryClient("rag", {"embedder": "hashing", "top_k": 2}, data_dir=tmp_path / "rag")
    client.remember(
        "alice",
        [
            ("user", PIXEL),
            ("assistant", "Pixel is a lovely name."),
            ("user", "My sister lives in Porto and loves opera."),
        ],
        session_id="s1",
    )
    client.remember("bob", [("user", BEES)], session_id="s1")
    yield client
    client.close()


def test_retriever_returns_documents_with_score_and_source(rag_client: MemoryClient) -> None:
    retriever = MemlabRetriever(memory=rag_client, user_id="alice", k=2)
    docs = retriever.invoke("what is the name of my cat Pixel")
    assert docs and all(isinstance(d, Document) for d in docs)
    assert len(docs) <= 2
    assert any("Pixel" in d.page_content for d in docs)
    for doc in docs:
        assert isinstance(doc.metadata["score"], float)
        assert doc.metadata["source"]["session_id"] == "s1"
        assert doc.metadata["source"]["role"] in ("user", "assistant")
        assert doc.metadata["user_id"] == "alice" and doc.metadata["backend"] == "rag"
        assert doc.id == doc.metadata["id"]
    # Never another user's memories.
    assert all("bees" not in d.page_content for d in retriever.invoke("bees on the roof"))


def test_retriever_sort_batch_async_and_plain_memory(rag_client: MemoryClient) -> None:
    retriever = MemlabRetriever(memory=rag_client, user_id="alice", k=3, sort_by_score=True)
    docs = retriever.invoke("cat named Pixel")
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    batched = retriever.batch(["cat named Pixel", "sister in Porto"])
    assert len(batched) == 2 and batched[0] == docs
    assert asyncio.run(retriever.ainvoke("cat named Pixel")) == docs
    # Any memlab Memory works, not only a client.
    memory = create_backend("full_context")
    memory.ingest({"id": "s", "messages": [{"role": "user", "content": PIXEL}]}, user_id="carol")
    plain = MemlabRetriever(memory=memory, user_id="carol")
    assert [d.page_content for d in plain.invoke("cat")] == [PIXEL]
    with pytest.raises(ValueError):
        MemlabRetriever(memory=memory, user_id="not a valid id")
    with pytest.raises(TypeError):
        MemlabRetriever(memory=object(), user_id="carol")


def test_history_round_trip_and_memory_write_through(tmp_path: Path) -> None:
    client = MemoryClient("full_context", data_dir=tmp_path / "fc")
    history = MemlabChatMessageHistory(client, user_id="alice", session_id="conv-1")
    assert history.messages == []
    history.add_user_message(PIXEL)
    history.add_ai_message("Pixel is a lovely name.")
    history.add_messages([SystemMessage("be brief"), HumanMessage("thanks")])
    got = history.messages
    assert [type(m) for m in got] == [HumanMessage, AIMessage, SystemMessage, HumanMessage]
    assert [m.content for m in got] == [PIXEL, "Pixel is a lovely name.", "be brief", "thanks"]
    # Every message is also a turn of the session in long-term memory.
    stored = client.memories("alice")
    assert [(m.source["role"], m.source["turn_index"]) for m in stored] == [
        ("user", 0),
        ("assistant", 1),
        ("system", 2),
        ("user", 3),
    ]
    assert all(m.source["session_id"] == "conv-1" for m in stored)
    assert "Pixel" in MemlabRetriever(memory=client, user_id="alice").invoke("cat")[0].page_content
    # Messages that are not conversation turns are refused before anything is stored.
    with pytest.raises(ValueError, match="ToolMessage"):
        history.add_messages([HumanMessage("x"), ToolMessage("result", tool_call_id="1")])
    assert len(history.messages) == 4 and len(client.memories("alice")) == 4
    history.clear()
    assert history.messages == []
    assert len(client.memories("alice")) == 4, "clear() empties the transcript, not long-term memory"
    # Async variants (langchain-core defaults run the sync ones).
    asyncio.run(history.aadd_messages([HumanMessage("async hello")]))
    assert [m.content for m in asyncio.run(history.aget_messages())] == ["async hello"]
    client.close()


def test_history_transcript_survives_restart(tmp_path: Path) -> None:
    client = MemoryClient("full_context", data_dir=tmp_path / "fc")
    history = MemlabChatMessageHistory(client, user_id="alice", session_id="conv", transcript_dir=tmp_path / "tr")
    history.add_messages([HumanMessage(PIXEL), AIMessage("noted")])
    client.close()
    client = MemoryClient("full_context", data_dir=tmp_path / "fc")
    again = MemlabChatMessageHistory(client, user_id="alice", session_id="conv", transcript_dir=tmp_path / "tr")
    assert [m.content for m in again.messages] == [PIXEL, "noted"]
    again.add_user_message("next")
    assert client.memories("alice")[-1].source["turn_index"] == 2
    other = MemlabChatMessageHistory(client, user_id="bob", session_id="conv", transcript_dir=tmp_path / "tr")
    assert other.messages == []
    again.clear()
    assert (
        MemlabChatMessageHistory(client, user_id="alice", session_id="conv", transcript_dir=tmp_path / "tr").messages
        == []
    )
    client.close()


def test_history_ids_cannot_leave_the_transcript_dir(tmp_path: Path) -> None:
    # '..' as a directory name would write next to transcript_dir; validate_user_id refuses it.
    client = MemoryClient("full_context")
    for user_id, session_id in (("..", "conv"), (".", "conv"), ("alice", "..")):
        with pytest.raises(ValueError, match="dots only"):
            MemlabChatMessageHistory(client, user_id=user_id, session_id=session_id, transcript_dir=tmp_path / "tr")
    dotted = MemlabChatMessageHistory(client, user_id="a.b", session_id="v1.2", transcript_dir=tmp_path / "tr")
    dotted.add_user_message("hi")
    assert (tmp_path / "tr" / "a.b" / "v1.2.jsonl").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tr"]
    client.close()


def test_runnable_with_message_history_stores_into_memlab(tmp_path: Path) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory

    client = MemoryClient("full_context", data_dir=tmp_path / "fc")
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{input}")])
    model = FakeListChatModel(responses=["Nice to meet you, Ana.", "Your name is Ana."])
    seen: list[int] = []

    def record(value):  # type: ignore[no-untyped-def]
        seen.append(len(value.to_messages()))
        return value

    chain = RunnableWithMessageHistory(
        prompt | record | model,
        lambda session_id: MemlabChatMessageHistory(
            client, user_id="ana", session_id=session_id, transcript_dir=tmp_path / "tr"
        ),
        input_messages_key="input",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "c1"}}
    assert chain.invoke({"input": "Hi, I am Ana."}, config=config).content == "Nice to meet you, Ana."
    assert chain.invoke({"input": "What is my name?"}, config=config).content == "Your name is Ana."
    assert seen == [1, 3], "the second call sees the first turn from the history"
    assert [m.text for m in client.memories("ana")] == [
        "Hi, I am Ana.",
        "Nice to meet you, Ana.",
        "What is my name?",
        "Your name is Ana.",
    ]
    client.close()
