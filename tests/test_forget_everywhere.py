"""Forget means forget (issue 25): after ``forget`` no file memlab wrote still holds the user's text:
not the backend's store, not the LLM response cache, not the embedding cache, not the LangChain
transcripts. Every backend, with and without an LLM extractor; the PostgreSQL stores in
test_pg_stores.py (table files after ``memlab compact-store``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_profile_llm import RuleChatModel

from memlab.client import MemoryClient
from memlab.embedders.cache import CachedEmbedder
from memlab.integrations.langchain import MemlabChatMessageHistory
from memlab.llm.config import make_llm
from memlab.registry import create_backend

SECRET = "SECRET-4471-PIN"
SAID = f"I love jazz and my bank PIN is {SECRET}."
MEM0_LLM = {"provider": "langchain", "langchain_class": "memlab.testing.chat_models:Mem0ExtractionChatModel"}


def files_holding(root: Path, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()
    )


def _client(kind: str, tmp_path: Path) -> MemoryClient:
    data, cache = tmp_path / "data", tmp_path / "cache"
    if kind == "profile+llm":
        llm = make_llm({"provider": "auto", "cache_dir": str(cache)}, llm=RuleChatModel())
        memory = create_backend(
            "profile",
            {"embedder": "minilm", "extractor": "llm", "llm": {"provider": "test-rules"}},
            data_dir=data,
            cache_dir=cache,
            llm=llm,
        )
        return MemoryClient(memory)
    backend, config = {
        "full_context": ("full_context", {}),
        "rag": ("rag", {"embedder": "minilm"}),
        "profile": ("profile", {"embedder": "minilm"}),
        "mem0": ("mem0", {"embedder": "hashing"}),
        "mem0+llm": ("mem0", {"embedder": "hashing", "llm": MEM0_LLM}),
    }[kind]
    return MemoryClient(backend, config, data_dir=data, cache_dir=cache)


def _embedding_caches(client: MemoryClient) -> list[CachedEmbedder]:
    embedder: Any = getattr(client.memory, "embedder", None)
    found = []
    while embedder is not None:
        if isinstance(embedder, CachedEmbedder):
            found.append(embedder)
        embedder = getattr(embedder, "inner", None)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["full_context", "rag", "profile", "profile+llm", "mem0", "mem0+llm"])
def test_forget_leaves_no_byte_of_the_user_in_any_file_memlab_wrote(tmp_path: Path, kind: str) -> None:
    client = _client(kind, tmp_path)
    history = MemlabChatMessageHistory(
        client, user_id="alice", session_id="chat1", transcript_dir=tmp_path / "transcripts"
    )
    from langchain_core.messages import AIMessage, HumanMessage

    history.add_messages([HumanMessage(SAID), AIMessage("Noted.")])
    client.remember("bob", [("user", "I keep bees on my roof.")])
    assert SECRET in client.recall("alice", "what is my bank PIN?", k=5).context or kind.endswith("+llm")
    caches = _embedding_caches(client)
    keys = [c._key(SAID, False) for c in caches]
    if kind in ("rag", "profile"):
        assert caches and all(c._store.get(k) is not None for c, k in zip(caches, keys)), "the vector was cached"
    if kind.endswith("+llm"):
        assert files_holding(tmp_path / "cache", SECRET), "the LLM response cache holds the secret before forget"

    client.forget("alice")
    assert history.messages == [], "an open history forgets its copy"
    assert not (tmp_path / "transcripts" / "alice").exists()
    assert all(c._store.get(k) is None for c, k in zip(caches, keys)), "the embedding of the text left the cache"
    assert client.recall("bob", "bees", k=1).items, "another user's memory stays"
    client.close()
    assert files_holding(tmp_path, SECRET) == [], f"{kind}: the secret is still on disk after forget"
    assert files_holding(tmp_path, "bank PIN") == []


def test_deleting_an_item_drops_the_users_cache_entries_too(tmp_path: Path) -> None:
    client = _client("profile+llm", tmp_path)
    client.remember("alice", [("user", SAID)])
    assert files_holding(tmp_path / "cache", SECRET)
    for item in client.memories("alice"):
        if SECRET in item.text:
            client.delete("alice", item.id)
    assert files_holding(tmp_path / "cache", SECRET) == [], "the LLM reply naming the secret left the cache"
    client.close()
    assert files_holding(tmp_path, SECRET) == []


def test_transcripts_of_a_forgotten_user_are_deleted_by_a_later_process_too(tmp_path: Path) -> None:
    first = MemoryClient("full_context", data_dir=tmp_path / "data")
    MemlabChatMessageHistory(first, user_id="alice", session_id="c", transcript_dir=tmp_path / "t").add_user_message(
        SAID
    )
    first.close()
    second = MemoryClient("full_context", data_dir=tmp_path / "data")  # no history opened in this process
    second.forget("alice")
    second.close()
    assert files_holding(tmp_path, SECRET) == []
