"""The mem0 backend on the real mem0ai library: conformance, offline/private behaviour, infer=True."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memlab.errors import MemlabError
from memlab.memory import Memory
from memlab.registry import create_backend
from memlab.testing import MemoryConformance, session
from memlab.testing.chat_models import (
    FunctionChatModel,
    Mem0ExtractionChatModel,
    mem0_extraction_reply,
    mem0_new_messages,
)
from memlab_plugins.mem0_backend import LEDGER_FILE, Mem0Memory

REPO = Path(__file__).resolve().parents[1]
RULE_LLM = {
    "provider": "langchain",
    "langchain_class": "memlab.testing.chat_models:Mem0ExtractionChatModel",
    "cache": False,
    "max_retries": 0,
}


# ----------------------------------------------------------------------------- conformance
class TestMem0Verbatim(MemoryConformance):
    """infer=False through mem0's own add(): one message, one memory."""

    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("mem0", {"embedder": "hashing", "top_k": 3}, data_dir=data_dir)


class TestMem0Bulk(MemoryConformance):
    """infer=False with one vector-store insert per session."""

    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("mem0", {"embedder": "hashing", "top_k": 3, "bulk_insert": True}, data_dir=data_dir)


class TestMem0Inferred(MemoryConformance):
    """infer=True: mem0's fact extraction, answered by a rule-based LangChain chat model."""

    exact_recall = False

    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("mem0", {"embedder": "hashing", "top_k": 3, "llm": RULE_LLM}, data_dir=data_dir)


# ----------------------------------------------------------------------------- helpers
@contextmanager
def record_connections() -> Iterator[list[Any]]:
    """Every connect / DNS lookup attempted inside the block, loopback included."""
    seen: list[Any] = []
    connect, connect_ex, getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def rec_connect(self: socket.socket, address: Any) -> Any:
        seen.append(address)
        return connect(self, address)

    def rec_connect_ex(self: socket.socket, address: Any) -> Any:
        seen.append(address)
        return connect_ex(self, address)

    def rec_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(("dns", host))
        return getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.socket.connect_ex = rec_connect, rec_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = rec_getaddrinfo  # type: ignore[assignment]
    try:
        yield seen
    finally:
        socket.socket.connect, socket.socket.connect_ex = connect, connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]


def _docstore(memory: Mem0Memory) -> dict[str, dict[str, Any]]:
    """id -> payload of every point in mem0's vector store."""
    points, _ = memory._mem.vector_store.list(top_k=10_000)
    return {str(p.id): dict(p.payload) for p in points}


# ----------------------------------------------------------------------------- defaults, offline
@pytest.fixture(scope="module")
def minilm_mem0(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Mem0Memory, list[Any]]]:
    """The default config (mem0's huggingface provider on the packaged MiniLM), built while recording sockets."""
    with record_connections() as seen:
        memory = Mem0Memory(data_dir=tmp_path_factory.mktemp("mem0-minilm"))
    yield memory, seen
    memory.close()


def test_default_embedder_is_packaged_minilm_through_mem0(minilm_mem0: tuple[Mem0Memory, list[Any]]) -> None:
    from mem0.embeddings.huggingface import HuggingFaceEmbedding

    from memlab.embedders.sentence_transformer import packaged_minilm_path

    memory, _ = minilm_mem0
    inner = memory._batcher.wrapped
    assert isinstance(inner, HuggingFaceEmbedding)
    assert inner.config.model == packaged_minilm_path()
    assert memory._mem.vector_store.embedding_model_dims == 384
    assert memory._mem.config.history_db_path == str(memory.root / "history.db")
    assert memory.infer is False


def test_no_socket_during_construction_ingest_and_search(minilm_mem0: tuple[Mem0Memory, list[Any]]) -> None:
    memory, seen_at_construction = minilm_mem0
    assert seen_at_construction == []
    with record_connections() as seen:
        memory.ingest(
            session(
                "net",
                ("user", "I play the ukulele every evening."),
                ("assistant", "Lovely hobby!"),
                ("user", "My favourite food is poke from Honolulu."),
            ),
            user_id="offline",
        )
        result = memory.retrieve("Which instrument do I play?", user_id="offline", k=1)
        memory.list_memories(user_id="offline")
    assert seen == []
    assert os.environ["MEM0_TELEMETRY"] == "False"
    from mem0.memory import telemetry

    assert telemetry.MEM0_TELEMETRY is False
    # real semantics: MiniLM ranks the ukulele turn first for an instrument question
    assert "ukulele" in result.items[0].text
    assert result.items[0].source == {"session_id": "net", "turn_index": 0, "role": "user"}


def test_no_socket_with_inference(tmp_path: Path) -> None:
    with record_connections() as seen:
        memory = create_backend("mem0", {"embedder": "hashing", "llm": RULE_LLM}, data_dir=tmp_path)
        memory.ingest(session("s", ("user", "I moved to Hilo last year.")), user_id="u")
        assert memory.retrieve("Where do I live?", user_id="u").items
        memory.close()
    assert seen == []


def test_files_stay_in_data_dir_and_home_is_untouched(tmp_path: Path) -> None:
    """A fresh process with HOME pointed at an empty folder and no MEM0_DIR: mem0 writes only under data_dir,
    and its telemetry stays off even though the environment asks for it (only the config may opt in)."""
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    script = textwrap.dedent(
        f"""
        import json, os
        from memlab.testing.network import block_network
        with block_network() as refused:
            from memlab_plugins.mem0_backend import Mem0Memory
            from memlab.testing.conformance import session
            m = Mem0Memory({{"embedder": "hashing"}}, data_dir={str(data)!r})
            m.ingest(session("s", ("user", "I surf at dawn.")), user_id="u")
            hits = len(m.retrieve("surf", user_id="u").items)
            m.close()
            from mem0.memory import telemetry
        print(json.dumps({{"refused": [str(r) for r in refused], "hits": hits,
                          "telemetry": telemetry.MEM0_TELEMETRY, "mem0_dir": os.environ["MEM0_DIR"]}}))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "MEM0_DIR"}
    env.update(HOME=str(home), MEM0_TELEMETRY="True", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"refused": [], "hits": 1, "telemetry": False, "mem0_dir": str((data / "mem0_home").resolve())}
    assert list(home.iterdir()) == [], "nothing may be written under HOME (~/.mem0, caches ...)"
    files = {str(p.relative_to(data)) for p in data.rglob("*") if p.is_file()}
    assert {
        "history.db",
        LEDGER_FILE,
        "qdrant/meta.json",
        "qdrant/collection/memlab/storage.sqlite",
        "mem0_home/config.json",
    } <= files


def test_without_data_dir_everything_goes_at_close() -> None:
    memory = Mem0Memory({"embedder": "hashing"})
    root = memory.root
    memory.ingest(session("s", ("user", "I like mangoes.")), user_id="u")
    assert (root / "qdrant").is_dir()
    memory.close()
    assert not root.exists()


def test_telemetry_opt_in_cannot_flip_after_import(tmp_path: Path) -> None:
    Mem0Memory({"embedder": "hashing"}, data_dir=tmp_path / "a").close()  # mem0 is imported, telemetry off
    with pytest.raises(MemlabError, match="telemetry"):
        Mem0Memory({"embedder": "hashing", "telemetry": True}, data_dir=tmp_path / "b")


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "config, match",
    [
        ({"embedder": "word2vec"}, "embedder"),
        ({"embedder": {"provider": "openai", "config": {}}}, "embedding_dims"),
        ({"vector_store": {"config": {}}}, "provider"),
        ({"infer_window": 0}, "infer_window"),
        ({"threshold": 2}, "threshold"),
    ],
)
def test_config_errors_are_clear(config: dict[str, Any], match: str) -> None:
    with pytest.raises(MemlabError, match=match):
        Mem0Memory.parse_config(config)


def test_infer_needs_an_llm_and_bulk_insert_needs_verbatim(tmp_path: Path) -> None:
    with pytest.raises(MemlabError, match="needs an LLM"):
        Mem0Memory({"embedder": "hashing", "infer": True}, data_dir=tmp_path / "a")
    with pytest.raises(MemlabError, match="bulk_insert"):
        Mem0Memory({"embedder": "hashing", "llm": RULE_LLM, "bulk_insert": True}, data_dir=tmp_path / "b")


def test_reopening_with_another_embedder_is_refused(tmp_path: Path) -> None:
    Mem0Memory({"embedder": "hashing"}, data_dir=tmp_path).close()
    with pytest.raises(MemlabError, match="written with"):
        Mem0Memory(
            {"embedder": {"provider": "openai", "config": {"embedding_dims": 8, "api_key": "x"}}}, data_dir=tmp_path
        )


# ----------------------------------------------------------------------------- infer=True end to end
def test_infer_sends_mem0s_prompt_and_stores_what_it_parses(tmp_path: Path) -> None:
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

    model = FunctionChatModel(respond=mem0_extraction_reply)
    memory = Mem0Memory({"embedder": "hashing", "infer_window": 2}, data_dir=tmp_path, chat_model=model)
    assert memory.infer is True
    memory.ingest(
        session(
            "s1",
            ("system", "You are a helpful assistant."),
            ("user", "I adopted a grey cat named Pixel. She sleeps a lot."),
            ("assistant", "Pixel is a lovely name!"),
            ("user", "My sister lives in Lisbon and keeps bees."),
        ),
        user_id="alice",
    )
    assert len(model.calls) == 2, "two windows of two messages: two extraction calls"
    system, user = model.calls[0]
    assert system.content == ADDITIVE_EXTRACTION_PROMPT
    assert mem0_new_messages(model.calls[0]) == [
        ("system", "You are a helpful assistant."),
        ("user", "I adopted a grey cat named Pixel. She sleeps a lot."),
    ]
    # the second call sees the first window's fact among mem0's existing memories
    assert "User said: I adopted a grey cat named Pixel." in model.calls[1][1].content

    stored = {i.text: i for i in memory.list_memories(user_id="alice")}
    assert set(stored) == {
        "User said: I adopted a grey cat named Pixel.",
        "User said: My sister lives in Lisbon and keeps bees.",
    }
    bees = stored["User said: My sister lives in Lisbon and keeps bees."]
    assert bees.source["turns"] == [{"session_id": "s1", "turn_index": 2}, {"session_id": "s1", "turn_index": 3}]
    assert bees.metadata["attributed_to"] == "user"
    result = memory.retrieve("Where does my sister live?", user_id="alice", k=1)
    assert result.items[0].text == bees.text
    assert memory.history(bees.id, user_id="alice")[0]["event"] == "ADD"
    memory.close()


def test_infer_through_a_memlab_llm_config(tmp_path: Path) -> None:
    memory = Mem0Memory({"embedder": "hashing", "llm": RULE_LLM}, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "I teach hula on Saturdays."), ("assistant", "Fun!")), user_id="u")
    assert [i.text for i in memory.list_memories(user_id="u")] == ["User said: I teach hula on Saturdays."]
    memory.close()


def test_reset_also_forgets_the_messages_mem0_keeps_for_extraction(tmp_path: Path) -> None:
    model = Mem0ExtractionChatModel()
    memory = Mem0Memory({"embedder": "hashing", "infer_window": 1}, data_dir=tmp_path, chat_model=model)
    memory.ingest(session("s", ("user", "My password hint is papaya.")), user_id="u")
    memory.reset("u")
    memory.ingest(session("s", ("user", "I like tea.")), user_id="u")
    assert "papaya" not in model.calls[-1][1].content, "mem0's 'Last k Messages' still held a forgotten message"
    assert memory.ingest(session("s", ("user", "More.")), user_id="u").first_turn == 1, "a reset restarts turns"
    memory.close()


def test_a_reply_mem0_cannot_parse_stores_nothing(tmp_path: Path) -> None:
    model = FunctionChatModel(respond=lambda messages: "Sure! Here are the memories you asked for.")
    memory = Mem0Memory({"embedder": "hashing"}, data_dir=tmp_path, chat_model=model)
    memory.ingest(session("s", ("user", "I like tea.")), user_id="u")
    assert len(model.calls) == 1
    assert memory.list_memories(user_id="u") == []
    memory.close()


# ----------------------------------------------------------------------------- verbatim details and cost
def test_bulk_insert_stores_what_mem0s_add_stores(tmp_path: Path) -> None:
    turns = (("system", "persona"), ("user", "I sail."), ("assistant", "Ahoy!"), ("user", "My boat is red."))
    stores = {}
    for bulk in (False, True):
        memory = Mem0Memory({"embedder": "hashing", "bulk_insert": bulk}, data_dir=tmp_path / str(bulk))
        memory.ingest(session("s", *turns), user_id="u")
        docs = sorted(_docstore(memory).values(), key=lambda p: p["turn_index"])
        history = [memory.history(i.id, user_id="u") for i in memory.list_memories(user_id="u")]
        stores[bulk] = (docs, history)
        memory.close()
    (add_docs, add_hist), (bulk_docs, bulk_hist) = stores[False], stores[True]
    assert [sorted(d) for d in add_docs] == [sorted(d) for d in bulk_docs]
    volatile = {"created_at", "updated_at"}
    assert [{k: v for k, v in d.items() if k not in volatile} for d in add_docs] == [
        {k: v for k, v in d.items() if k not in volatile} for d in bulk_docs
    ]
    assert [d["turn_index"] for d in add_docs] == [1, 2, 3], "mem0 skips system messages"
    strip = {"id", "memory_id", "created_at", "updated_at"}
    assert [[{k: v for k, v in h.items() if k not in strip} for h in hs] for hs in add_hist] == [
        [{k: v for k, v in h.items() if k not in strip} for h in hs] for hs in bulk_hist
    ]


def test_batch_embedding_calls_the_model_once_per_session_and_changes_nothing(tmp_path: Path) -> None:
    turns = [("user" if i % 2 == 0 else "assistant", f"Message {i}: I visited island number {i}.") for i in range(8)]
    results = {}
    for batch in (False, True):
        memory = Mem0Memory({"embedder": "hashing", "batch_embed": batch}, data_dir=tmp_path / str(batch))
        memory.ingest(session("s", *turns), user_id="u")
        if batch:
            assert memory._batcher.model_calls == 1
            assert memory._batcher.ready == {}, "the prefetch is dropped after each session"
        found = memory.retrieve("island number 5", user_id="u", k=3)
        results[batch] = [(i.text, round(i.score or 0, 6), i.source["turn_index"]) for i in found.items]
        memory.close()
    assert results[True] == results[False]


def test_other_users_ids_are_not_found(tmp_path: Path) -> None:
    memory = Mem0Memory({"embedder": "hashing"}, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "I fish.")), user_id="bob")
    bob_id = memory.list_memories(user_id="bob")[0].id
    for call in (
        lambda: memory.update(bob_id, "I hunt.", user_id="alice"),
        lambda: memory.history(bob_id, user_id="alice"),
        lambda: memory.delete("no-such-id", user_id="bob"),
    ):
        with pytest.raises(KeyError):
            call()
    memory.delete(bob_id, user_id="bob")
    events = [h["event"] for h in memory.history(bob_id, user_id="bob")]
    assert events == ["ADD", "DELETE"], "history outlives a delete, for its owner only"
    with pytest.raises(KeyError):
        memory.history(bob_id, user_id="alice")
    memory.close()


@pytest.mark.parametrize("bulk", [False, True])
def test_a_session_that_fails_half_way_is_rolled_back_and_retried_once(tmp_path: Path, bulk: bool) -> None:
    memory = create_backend("mem0", {"embedder": "hashing", "bulk_insert": bulk}, data_dir=tmp_path)
    count = 20 if bulk else 3  # bulk: the second of five write batches fails
    three = session("s1", *[("user", f"fact number {i}") for i in range(count)])
    owner, name = (memory._mem, "add") if not bulk else (memory._mem.vector_store, "insert")
    real_call, calls = getattr(owner, name), []

    def flaky(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("vector store down")
        return real_call(*args, **kwargs)

    setattr(owner, name, flaky)
    with pytest.raises(RuntimeError):
        memory.ingest(three, user_id="u")
    assert memory.list_memories(user_id="u") == []
    assert memory.ingest(three, user_id="u").first_turn == 0
    texts = sorted(item.text for item in memory.list_memories(user_id="u"))
    assert texts == sorted(m.content for m in three.messages)
    memory.close()


class TestMem0LocomoPreset(MemoryConformance):
    """Preset locomo-eval without an LLM: every message stored under both speakers' mem0 ids."""

    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("mem0", {"embedder": "hashing", "top_k": 3, "preset": "locomo-eval"}, data_dir=data_dir)
