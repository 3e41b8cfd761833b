"""The LLM extractor of the profile backend, driven by a local deterministic chat model."""

from __future__ import annotations

import json
import re

import pytest

from memlab.llm.base import LLM, ChatMessage, LLMResponse
from memlab.llm.errors import ContextWindowExceeded, LLMConfigError, LLMRequestFailed
from memlab.registry import create_backend
from memlab.testing import session
from memlab_plugins.profile.extract_llm import ExtractionError
from memlab_plugins.profile.models import OpType, Stance

_LIKE = re.compile(r"\bI (?:love|like|enjoy) (.+?)[.!]", re.I)
_HATE = re.compile(r"\bI (?:hate|dislike) (.+?)(?: now)?(?: because (.+?))?[.!]", re.I)
_STOP = re.compile(r"\bI (?:stopped|quit) (.+?)[.!]", re.I)


class RuleChatModel(LLM):
    """A real ``LLM``: it reads the profile and turns out of the prompt and answers with JSON ops.

    ``bad_replies`` are returned first (one per call), to exercise validation and the retry.
    """

    name = "test:rules"
    supports_json_mode = True

    def __init__(self, bad_replies: list[str] | None = None) -> None:
        self.bad_replies = list(bad_replies or [])
        self.prompts: list[list[ChatMessage]] = []

    def _chat(self, messages, *, json_mode, temperature, max_tokens) -> LLMResponse:  # type: ignore[no-untyped-def]
        self.prompts.append(messages)
        if self.bad_replies:
            return LLMResponse(text=self.bad_replies.pop(0), prompt_tokens=10, completion_tokens=5)
        prompt = messages[1].content
        profile_part, turns_part = prompt.split("\n\nUser turns of this session:\n")
        profile = json.loads(profile_part.removeprefix("Current profile:\n"))
        turns = json.loads(turns_part)
        current = {e["aspect"]: e for e in profile if e["current"]}
        ops = []
        for turn in turns:
            text, index = turn["text"], turn["turn_index"]
            if m := _STOP.search(text):
                aspect = m.group(1)
                if aspect in current:
                    ops.append(
                        {
                            "op": "DELETE",
                            "entry_id": current[aspect]["entry_id"],
                            "reason": "stopped",
                            "turn_index": index,
                        }
                    )
            elif m := _HATE.search(text):
                aspect, reason = m.group(1), m.group(2)
                if aspect in current:
                    ops.append(
                        {
                            "op": "UPDATE",
                            "entry_id": current[aspect]["entry_id"],
                            "stance": "dislikes",
                            "value": f"dislikes {aspect}",
                            "reason": reason,
                            "turn_index": index,
                        }
                    )
                else:
                    ops.append(
                        {
                            "op": "ADD",
                            "aspect": aspect,
                            "value": f"dislikes {aspect}",
                            "stance": "dislikes",
                            "turn_index": index,
                        }
                    )
            elif m := _LIKE.search(text):
                aspect = m.group(1)
                if aspect in current and current[aspect]["stance"] == "likes":
                    ops.append({"op": "NOOP", "entry_id": current[aspect]["entry_id"], "turn_index": index})
                else:
                    ops.append(
                        {
                            "op": "ADD",
                            "aspect": aspect,
                            "value": f"likes {aspect}",
                            "stance": "likes",
                            "turn_index": index,
                        }
                    )
        return LLMResponse(text=json.dumps({"operations": ops}), prompt_tokens=100, completion_tokens=20)


def make(llm: LLM, **extra):  # type: ignore[no-untyped-def]
    config = {"embedder": "hashing", "extractor": "llm", "llm": {"provider": "unused-in-tests"}, **extra}
    return create_backend("profile", config, llm=llm)


def test_llm_ops_add_update_noop_delete() -> None:
    llm = RuleChatModel()
    mem = make(llm)
    mem.ingest(
        session("s1", ("user", "I love jazz."), ("assistant", "Nice!"), ("user", "I enjoy hiking.")), user_id="u"
    )
    mem.ingest(
        session("s2", ("user", "I hate jazz now because it got too loud."), ("user", "I like hiking.")), user_id="u"
    )
    mem.ingest(session("s3", ("user", "I quit hiking.")), user_id="u")
    assert [o.op for o in mem.operations("u")] == [OpType.ADD, OpType.ADD, OpType.UPDATE, OpType.NOOP, OpType.DELETE]
    assert all(o.source == "llm" for o in mem.operations("u"))
    (jazz,) = mem.get_profile("u")
    assert jazz.aspect == "jazz" and jazz.stance is Stance.DISLIKES and jazz.reason == "it got too loud"
    assert jazz.evidence[0].session_id == "s2" and jazz.evidence[0].turn_index == 0
    # the prompt of a later session shows the profile with its entry ids
    assert jazz.id in llm.prompts[-1][1].content
    assert mem.llm_extractor.calls == 3 and mem.llm_extractor.prompt_tokens == 300


def test_invalid_json_is_retried_once() -> None:
    llm = RuleChatModel(bad_replies=["this is not json {"])
    mem = make(llm)
    mem.ingest(session("s1", ("user", "I love jazz.")), user_id="u")
    assert [e.aspect for e in mem.get_profile("u")] == ["jazz"]
    assert mem.llm_extractor.retries == 1
    retry_prompt = llm.prompts[1]
    assert retry_prompt[-1].role == "user" and "not valid JSON" in retry_prompt[-1].content
    assert retry_prompt[-2].content == "this is not json {"


def test_half_valid_batch_is_never_applied() -> None:
    half_valid = json.dumps(
        {
            "operations": [
                {"op": "ADD", "aspect": "tea", "value": "likes tea", "stance": "likes", "turn_index": 0},
                {"op": "UPDATE", "entry_id": "p_invented", "stance": "dislikes", "turn_index": 0},
            ]
        }
    )
    wrong_turn = json.dumps(
        {"operations": [{"op": "ADD", "aspect": "tea", "value": "v", "stance": "likes", "turn_index": 9}]}
    )
    mem = make(RuleChatModel(bad_replies=[half_valid, wrong_turn]))
    mem.ingest(session("s1", ("user", "I love jazz.")), user_id="u")
    assert mem.get_profile("u") == [], "both replies were invalid: nothing from this session is applied"
    assert len(mem.extraction_failures) == 1 and "turn_index 9" in mem.extraction_failures[0]
    # the session itself is recorded, so the replay goes on with the next part
    assert mem.ingest(session("s1", ("user", "I love jazz.")), user_id="u").first_turn == 1
    assert [e.aspect for e in mem.get_profile("u")] == ["jazz"]


def test_raise_mode_and_missing_llm_config() -> None:
    mem = make(RuleChatModel(bad_replies=["[]", "{}"]), on_extraction_error="raise")
    with pytest.raises(ExtractionError, match="after a retry"):
        mem.ingest(session("s1", ("user", "I love jazz.")), user_id="u")
    with pytest.raises(Exception, match="needs an 'llm' config"):
        create_backend("profile", {"embedder": "hashing", "extractor": "llm"})


GARBAGE_REPLIES = [
    "",  # empty
    "Sure! Here are the operations: ADD jazz",  # prose
    "[1, 2, 3]",  # JSON, not an object
    '{"operations": [{"op": "ADD", "aspect": "tea"',  # cut off
    '{"operations": "none"}',  # wrong type
    '{"operations": [{"op": "MERGE", "turn_index": 0}]}',  # unknown op
    '{"operations": [{"op": "DELETE", "entry_id": "p_x", "turn_index": 0}]}',  # invented id
    "[" * 5000,  # deeply nested
]


def test_tiny_model_garbage_is_counted_never_crashes_and_costs_are_recorded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    llm = RuleChatModel(bad_replies=list(GARBAGE_REPLIES))
    mem = create_backend("profile", {"embedder": "hashing", "extractor": "llm"}, data_dir=tmp_path, llm=llm)
    reports = [
        mem.ingest(session(f"s{i}", ("user", "I love jazz."), ("assistant", "ok")), user_id="u")
        for i in range(len(GARBAGE_REPLIES) // 2 + 1)
    ]
    # Two garbage replies (first try + retry) per session, then the model answers properly.
    assert [r.prompt_tokens for r in reports] == [20] * (len(GARBAGE_REPLIES) // 2) + [reports[-1].prompt_tokens]
    assert reports[0].completion_tokens == 10 and reports[-1].prompt_tokens > 0
    stats = mem.extraction_stats()
    assert stats == {
        "llm_calls": len(GARBAGE_REPLIES) + 1,
        "retries": len(GARBAGE_REPLIES) // 2,
        "invalid_replies": len(GARBAGE_REPLIES),
        "rejected_batches": len(GARBAGE_REPLIES) // 2,
    }
    assert mem.export("u")["extraction_stats"] == stats
    assert [e.aspect for e in mem.get_profile("u")] == ["jazz"]
    assert len(mem.export("u")["turns"]) == len(reports), "every session's turns are stored"
    mem.close()
    with create_backend("profile", {"embedder": "hashing"}, data_dir=tmp_path) as reopened:
        assert [e.aspect for e in reopened.get_profile("u")] == ["jazz"]  # the store is intact


def test_a_batch_the_store_refuses_is_rejected_whole(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from memlab_plugins.profile.store import ProfileStoreError

    mem = make(RuleChatModel())
    real = mem.store.apply_session

    def refusing(user_id, session_id, operations, **kwargs):  # type: ignore[no-untyped-def]
        if list(operations):  # e.g. a constraint the parser does not know about
            raise ProfileStoreError("ADD: entry id 'p_x' is already in use")
        return real(user_id, session_id, operations, **kwargs)

    monkeypatch.setattr(mem.store, "apply_session", refusing)
    mem.ingest(session("s1", ("user", "I love jazz.")), user_id="u")
    assert mem.extraction_stats()["rejected_batches"] == 1 and "refused" in mem.extraction_failures[0]
    assert mem.get_profile("u") == []
    assert mem.ingest(session("s1", ("user", "More.")), user_id="u").first_turn == 1, "the turns were stored"


class FailingLLM(LLM):
    name = "failing"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def _chat(self, messages, *, json_mode, temperature, max_tokens) -> LLMResponse:  # type: ignore[no-untyped-def]
        raise self.error


def test_a_session_the_endpoint_refuses_is_rejected_and_its_turns_kept() -> None:
    mem = make(FailingLLM(ContextWindowExceeded("9000 tokens exceed the model's window of 8192")))
    mem.ingest(session("s1", ("user", "I love jazz.")), user_id="u")
    assert mem.extraction_stats()["rejected_batches"] == 1
    assert "refused" in mem.extraction_failures[0] and "window" in mem.extraction_failures[0]
    assert mem.ingest(session("s1", ("user", "More.")), user_id="u").first_turn == 1, "the turns were stored"


@pytest.mark.parametrize("error", [LLMConfigError("bad key"), LLMRequestFailed("failed after 5 attempts")])
def test_a_broken_setup_or_a_down_endpoint_still_raises(error: Exception) -> None:
    mem = make(FailingLLM(error))
    with pytest.raises(type(error)):
        mem.ingest(session("s1", ("user", "I love jazz.")), user_id="u")
    assert mem.extraction_stats()["rejected_batches"] == 0


def test_json_wrapped_in_prose_is_read() -> None:
    wrapped = 'Sure! Here it is: {"operations": [{"op": "ADD", "aspect": "tea", "value": "likes tea", "stance": "likes", "turn_index": 0}]} Hope this helps.'
    mem = make(RuleChatModel(bad_replies=[wrapped]))
    mem.ingest(session("s1", ("user", "I love tea.")), user_id="u")
    assert [e.aspect for e in mem.get_profile("u")] == ["tea"]
    assert mem.extraction_stats()["invalid_replies"] == 0
