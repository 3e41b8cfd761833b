"""Dates, mem0's LoCoMo evaluation preset, ingestion cost, honest labels and replay invariance
of the mem0 backend, checked on mem0's real calls with the deterministic LangChain chat model."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memlab.memory import MAX_K
from memlab.testing import session
from memlab.testing.chat_models import (
    FunctionChatModel,
    Mem0ExtractionChatModel,
    mem0_extraction_reply,
)
from memlab.types import Message, Session
from memlab_plugins.mem0_backend import Mem0Memory
from memlab_plugins.mem0_backend.config import LOCOMO_EVAL_CUSTOM_INSTRUCTIONS

MAY_8 = datetime(2023, 5, 8, 13, 56)
MAY_25 = datetime(2023, 5, 25, 9, 0)
RULE_LLM = {
    "provider": "langchain",
    "langchain_class": "memlab.testing.chat_models:Mem0ExtractionChatModel",
    "cache": False,
    "max_retries": 0,
    "price": {"input_per_million": 1.0, "output_per_million": 2.0},
}


def dated(session_id: str, when: datetime, *turns: tuple[str, str]) -> Session:
    return Session(id=session_id, messages=[Message(role=r, content=t, timestamp=when) for r, t in turns])  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- dates
def test_timestamps_are_kept_and_rendered_as_date_headers(tmp_path: Path) -> None:
    memory = Mem0Memory({"embedder": "hashing"}, data_dir=tmp_path)
    memory.ingest(dated("s1", MAY_8, ("user", "I adopted a puppy yesterday.")), user_id="u")
    memory.ingest(dated("s2", MAY_25, ("user", "The puppy learned to sit.")), user_id="u")
    memory.close()
    memory = Mem0Memory({"embedder": "hashing"}, data_dir=tmp_path)  # the dates persist
    result = memory.retrieve("puppy", user_id="u", k=5)
    stamps = {i.text: i.source["timestamp"] for i in result.items}
    assert stamps == {
        "I adopted a puppy yesterday.": MAY_8.isoformat(),
        "The puppy learned to sit.": MAY_25.isoformat(),
    }
    assert "DATE: 8 May 2023, 13:56" in result.context and "DATE: 25 May 2023, 09:00" in result.context
    memory.close()


def test_inference_sees_the_session_date_not_todays(tmp_path: Path) -> None:
    model = FunctionChatModel(respond=mem0_extraction_reply)
    memory = Mem0Memory({"embedder": "hashing"}, data_dir=tmp_path, chat_model=model)
    memory.ingest(dated("s1", MAY_8, ("user", "I adopted a puppy yesterday."), ("assistant", "Congrats!")), user_id="u")
    prompt = model.calls[0][1].content
    assert "## Custom Instructions" in prompt
    assert "these New Messages were exchanged on 2023-05-08 (8 May 2023, 13:56)" in prompt
    fact = memory.list_memories(user_id="u")[0]
    assert fact.source["timestamp"] == MAY_8.isoformat()
    assert memory.retrieve("puppy", user_id="u").context.startswith("DATE: 8 May 2023, 13:56\n")
    memory.close()


def test_without_a_date_only_the_configured_instructions_are_sent(tmp_path: Path) -> None:
    model = FunctionChatModel(respond=mem0_extraction_reply)
    memory = Mem0Memory(
        {"embedder": "hashing", "custom_instructions": "Only hobbies."}, data_dir=tmp_path, chat_model=model
    )
    memory.ingest(session("s1", ("user", "I knit.")), user_id="u")
    prompt = model.calls[0][1].content
    assert "## Custom Instructions\nOnly hobbies." in prompt and "Observation Date override" not in prompt
    memory.close()


# ----------------------------------------------------------------------------- preset locomo-eval
class Spy:
    """Records the keyword arguments of mem0's own Memory.add / Memory.search."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import mem0

        self.adds: list[tuple[Any, dict[str, Any]]] = []
        self.searches: list[tuple[str, dict[str, Any]]] = []
        add, search = mem0.Memory.add, mem0.Memory.search

        def spy_add(memory: Any, messages: Any, **kwargs: Any) -> Any:
            self.adds.append((messages, kwargs))
            return add(memory, messages, **kwargs)

        def spy_search(memory: Any, query: str, **kwargs: Any) -> Any:
            self.searches.append((query, kwargs))
            return search(memory, query, **kwargs)

        monkeypatch.setattr(mem0.Memory, "add", spy_add)
        monkeypatch.setattr(mem0.Memory, "search", spy_search)


def locomo_session(session_id: str, when: datetime, pairs: int) -> Session:
    """A LoCoMo-shaped session as memlab's loader builds it: speaker_a is ``user``, speaker_b
    ``assistant``, every text starting with the speaker's name."""
    messages = []
    for i in range(pairs):
        messages.append(Message(role="user", content=f"Caroline: I went to gallery number {i}.", timestamp=when))
        messages.append(Message(role="assistant", content=f"Melanie: I painted canvas number {i}.", timestamp=when))
    return Session(id=session_id, messages=messages)


def test_preset_adds_under_two_speaker_ids_with_dates_and_searches_both_with_top_k_30(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

    spy = Spy(monkeypatch)
    model = Mem0ExtractionChatModel()
    memory = Mem0Memory(
        {"embedder": "hashing", "preset": "locomo-eval", "threshold": 0.0}, data_dir=tmp_path, chat_model=model
    )
    assert memory.config.top_k == 60 and memory.config.infer_window == 2, "30 per speaker"
    report = memory.ingest(locomo_session("session_1", MAY_8, pairs=32), user_id="conv-26")

    users = [kwargs["user_id"] for _, kwargs in spy.adds]
    assert sorted(set(users)) == ["conv-26:Caroline", "conv-26:Melanie"]
    assert users.count("conv-26:Caroline") == users.count("conv-26:Melanie") == 32, "windows of 2 messages each"
    first_a = next(m for m, kw in spy.adds if kw["user_id"] == "conv-26:Caroline")
    first_b = next(m for m, kw in spy.adds if kw["user_id"] == "conv-26:Melanie")
    assert first_a == [
        {"role": "user", "content": "Caroline: I went to gallery number 0."},
        {"role": "assistant", "content": "Melanie: I painted canvas number 0."},
    ]
    assert first_b == [
        {"role": "assistant", "content": "Caroline: I went to gallery number 0."},
        {"role": "user", "content": "Melanie: I painted canvas number 0."},
    ], "roles flipped"
    assert all(kw["metadata"]["timestamp"] == MAY_8.isoformat() and kw["infer"] is True for _, kw in spy.adds)
    assert all(kw["prompt"].startswith(LOCOMO_EVAL_CUSTOM_INSTRUCTIONS.strip()) for _, kw in spy.adds)
    assert "2023-05-08" in spy.adds[0][1]["prompt"]
    assert model.calls[0][0].content == ADDITIVE_EXTRACTION_PROMPT
    assert report.prompt_tokens > 0 and report.completion_tokens > 0

    result = memory.retrieve("Which gallery did Caroline visit?", user_id="conv-26")
    assert [(kw["filters"], kw["top_k"]) for _, kw in spy.searches] == [
        ({"user_id": "conv-26:Caroline"}, 30),
        ({"user_id": "conv-26:Melanie"}, 30),
    ]
    assert len(result.items) == 60
    assert {i.metadata["speaker"] for i in result.items} == {"Caroline", "Melanie"}
    blocks = result.context.split("\n\n")
    assert blocks[0].startswith("Memories for user Caroline:\n8 May 2023, 13:56: User said: ")
    assert blocks[1].startswith("Memories for user Melanie:\n8 May 2023, 13:56: User said: ")
    assert "Melanie: I painted" in blocks[1] and "Melanie" not in blocks[0].split("\n", 1)[1], (
        "each speaker's own facts"
    )

    # the user's data is everything under both speaker ids: listed, exported and forgotten together
    assert len(memory.list_memories(user_id="conv-26")) == 64
    assert memory.export("conv-26")["speakers"]["assistant"] == {"name": "Melanie", "mem0_user_id": "conv-26:Melanie"}
    some = memory.list_memories(user_id="conv-26")[0]
    memory.delete(some.id, user_id="conv-26")
    memory.reset("conv-26")
    assert memory.list_memories(user_id="conv-26") == []
    memory.close()


def test_preset_shares_k_between_the_speakers(tmp_path: Path) -> None:
    memory = Mem0Memory({"embedder": "hashing", "preset": "locomo-eval", "threshold": 0.0}, data_dir=tmp_path)
    memory.ingest(locomo_session("session_1", MAY_8, pairs=4), user_id="c")
    for k, expected in ((1, [1, 0]), (5, [3, 2]), (MAX_K, [8, 8])):
        items = memory.retrieve("gallery", user_id="c", k=k).items
        assert [sum(i.metadata["speaker"] == s for i in items) for s in ("Caroline", "Melanie")] == expected
    memory.close()


def test_preset_speakers_persist_across_sessions_and_reopen(tmp_path: Path) -> None:
    config = {"embedder": "hashing", "preset": "locomo-eval"}
    memory = Mem0Memory(config, data_dir=tmp_path)  # no LLM: each perspective stores the messages
    memory.ingest(locomo_session("session_1", MAY_8, pairs=1), user_id="c")
    memory.close()
    memory = Mem0Memory(config, data_dir=tmp_path)
    memory.ingest(locomo_session("session_2", MAY_25, pairs=1), user_id="c")
    result = memory.retrieve("gallery", user_id="c", k=4)
    assert result.context.startswith("Memories for user Caroline:\n")
    assert "25 May 2023, 09:00: Caroline: I went to gallery number 0." in result.context
    assert len(memory.list_memories(user_id="c")) == 8, "2 sessions x 2 messages x 2 perspectives"
    memory.close()


def test_preset_is_reachable_as_a_cli_option() -> None:
    from memlab.config_files import parse_dotted_options as parse_dotted
    from memlab.registry import backends

    cls = backends.get("mem0")
    options = parse_dotted(["--mem0.preset", "locomo-eval"])["mem0"]
    assert cls.parse_config(options).top_k == 60
    assert cls.parse_config({"preset": "locomo-eval", "top_k": 12}).top_k == 12, "explicit keys win"


# ----------------------------------------------------------------------------- ingestion cost
def test_ingest_report_carries_llm_tokens_and_cost(tmp_path: Path) -> None:
    memory = Mem0Memory({"embedder": "hashing", "llm": RULE_LLM}, data_dir=tmp_path)
    report = memory.ingest(
        session("s", ("user", "I teach hula."), ("assistant", "Fun!"), ("user", "I surf.")), user_id="u"
    )
    assert report.prompt_tokens > 500, "two calls of mem0's long extraction prompt"
    assert report.completion_tokens > 0
    assert report.cost_usd == pytest.approx((report.prompt_tokens * 1.0 + report.completion_tokens * 2.0) / 1e6)
    quiet = Mem0Memory({"embedder": "hashing"}, data_dir=tmp_path / "verbatim")
    verbatim = quiet.ingest(session("s", ("user", "I teach hula.")), user_id="u")
    assert (verbatim.prompt_tokens, verbatim.completion_tokens, verbatim.cost_usd) == (0, 0, 0.0)
    quiet.close()
    memory.close()


# ----------------------------------------------------------------------------- labels and replay
def test_display_name_says_when_no_llm_is_configured() -> None:
    assert Mem0Memory.display_name(Mem0Memory.parse_config({})) == "mem0 (no LLM)"
    assert Mem0Memory.display_name(Mem0Memory.parse_config({"llm": RULE_LLM})) == "mem0"
    assert Mem0Memory.display_name(Mem0Memory.parse_config({"llm": RULE_LLM, "preset": "locomo-eval"})) == (
        "mem0 [locomo-eval]"
    )


def test_memory_depends_only_on_turns_without_inference_and_it_is_true(tmp_path: Path) -> None:
    assert Mem0Memory.memory_depends_only_on_turns(Mem0Memory.parse_config({})) is True
    assert Mem0Memory.memory_depends_only_on_turns(Mem0Memory.parse_config({"llm": RULE_LLM})) is False
    turns = [("user" if i % 2 == 0 else "assistant", f"Message {i} about island {i}.") for i in range(6)]
    stored = []
    for split, bulk in ((None, False), (2, False), (5, False), (None, True), (3, True)):
        memory = Mem0Memory({"embedder": "hashing", "bulk_insert": bulk}, data_dir=tmp_path / f"{split}-{bulk}")
        parts = [turns] if split is None else [turns[:split], turns[split:]]
        for part in parts:
            memory.ingest(dated("s", MAY_8, *part), user_id="u")
        stored.append(
            sorted(
                (i.text, i.source["turn_index"], i.source["role"], i.source["timestamp"])
                for i in memory.list_memories(user_id="u")
            )
        )
        hits = memory.retrieve("island 3", user_id="u", k=3)
        stored.append([(i.text, round(i.score or 0, 6)) for i in hits.items])
        memory.close()
    assert all(s == stored[0] for s in stored[0::2]) and all(s == stored[1] for s in stored[1::2])


def test_cache_dir_reaches_the_embedder_and_the_llm(tmp_path: Path) -> None:
    from memlab.embedders.cache import CachedEmbedder

    cache = tmp_path / "cache"
    memory = Mem0Memory(
        {"embedder": "minilm", "llm": {**RULE_LLM, "cache": True}}, data_dir=tmp_path / "d", cache_dir=cache
    )
    inner = memory._batcher.wrapped.langchain_model.inner
    assert isinstance(inner, CachedEmbedder)
    memory.ingest(session("s", ("user", "I teach hula.")), user_id="u")
    assert (cache / "embeddings.sqlite").is_file() and (cache / "llm_responses.sqlite").is_file()
    memory.close()
