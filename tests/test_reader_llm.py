"""The llm reader's prompt and its answer parsing, with a scripted LLM (no network)."""

from __future__ import annotations

import pytest
from question_helpers import choice_question

from memlab.llm import LLM, LLMResponse
from memlab.readers.llm import LLMReader, final_text, parse_choice
from memlab.types import Retrieval

OPTIONS = ["(a) Go hiking in the Alps", "(b) Visit a jazz club", "(c) Stay home and read", "(d) Try surfing"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("(b)", 1),
        ("b", 1),
        ("B.", 1),
        ("**C**", 2),
        ("<final_answer> (d)", 3),
        ("Option (a) ignores the knee injury. <final_answer>(c)", 2),
        ("I think (a) is wrong; the user loves music, so (b).\n<final_answer>: (b)", 1),
        ("Final answer: c", 2),
        ("The answer is (D) because they like the ocean.", 3),
        ("The best response is (a) given the user's love of mountains.", 0),
        ("Visit a jazz club", 1),
        ("c) Stay home and read", 2),
        ('{"answer": "d"}', 3),
    ],
)
def test_parse_choice_accepts_common_reply_shapes(reply, expected):
    assert parse_choice(reply, OPTIONS) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "I cannot tell from the memory.",
        "Either (a) or (b) would fit.",
        "A good plan depends on the weather.",  # the article 'A' is not an answer
        "<final_answer>",
    ],
)
def test_parse_choice_refuses_to_guess(reply):
    assert parse_choice(reply, OPTIONS) is None


def test_parse_choice_json_mode():
    assert parse_choice('{"answer": "(b)"}', OPTIONS, json_mode=True) == 1
    assert parse_choice('{"answer": "ab"}', OPTIONS, json_mode=True) is None


def test_final_text():
    assert final_text("thinking... <final_answer> Lisbon") == "Lisbon"
    assert final_text(" Lisbon ") == "Lisbon"


class Replies(LLM):
    name = "replies:m"

    def __init__(self, replies):
        self.replies = list(replies)
        self.prompts = []
        self.closed = False

    def _chat(self, messages, *, json_mode, temperature, max_tokens):
        self.prompts.append(messages)
        return LLMResponse(text=self.replies.pop(0), prompt_tokens=40, completion_tokens=3)

    def close(self):
        self.closed = True


QUESTION = choice_question("User: Any plans for me?", OPTIONS, answer=1)


def test_prompt_holds_memory_question_and_relabelled_options(tmp_path):
    llm = Replies(["(b)"])
    reader = LLMReader({"llm": {"cache": False}, "max_context_tokens": 5}, llm=llm)
    answer = reader.answer(QUESTION, Retrieval(context="old old old old old. User: I love jazz."))
    system, user = llm.prompts[0]
    assert system.role == "system" and "I love jazz." in system.content and "old old" not in system.content
    assert user.content.startswith("User: Any plans for me?")
    assert "(a) Go hiking in the Alps\n(b) Visit a jazz club" in user.content and "(a) (a)" not in user.content
    assert answer.choice == 1 and answer.scores == [0.0, 1.0, 0.0, 0.0]
    assert answer.metadata["model"] == "replies:m" and answer.metadata["cost_usd"] == 0.0


def test_empty_memory_is_said_explicitly():
    llm = Replies(["nothing fits"])
    answer = LLMReader({"llm": {"cache": False}}, llm=llm).answer(QUESTION, Retrieval())
    assert "(nothing remembered)" in llm.prompts[0][0].content
    assert answer.choice is None and answer.metadata["parse_failure"] and answer.error is None


def test_describe_does_not_build_the_llm():
    reader = LLMReader({"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "qwen2.5-7b"}})
    assert reader.describe() == "llm:openai:qwen2.5-7b:lenient"
    assert reader._llm is None
    assert (
        LLMReader({"llm": {"model": "/models/smollm.gguf"}, "parser": "official"}).describe()
        == "llm:hf:smollm.gguf:official"
    )


@pytest.mark.parametrize(
    ("prompt", "match"),
    [("You remember nothing.", r"must contain \{memory\}"), ('Reply as {"a": 1}. {memory}', "only field")],
)
def test_system_prompt_template_is_checked_at_config_time(prompt, match):
    from memlab.errors import MemlabError
    from memlab.readers.logprob import LogprobReader

    with pytest.raises(MemlabError, match=match):
        LLMReader({"system_prompt": prompt})
    with pytest.raises(MemlabError, match=match):
        LogprobReader({"system_prompt": prompt})
    escaped = LLMReader(
        {"llm": {"cache": False}, "system_prompt": 'Reply as {{"a": 1}}.\n{memory}'}, llm=Replies(["(a)"])
    )
    assert escaped.messages(QUESTION, Retrieval(context="x"))[0].content == 'Reply as {"a": 1}.\nx'


def test_answer_many_builds_one_llm_for_all_threads(monkeypatch):
    import threading
    import time

    import memlab.readers.llm_backed as reader_module

    built = []
    real = reader_module.make_llm

    def slow_make_llm(*args, **kwargs):
        time.sleep(0.05)  # widen the window in which threads would each build their own
        built.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(reader_module, "make_llm", slow_make_llm)
    reader = LLMReader({"llm": {"cache": False, "max_concurrency": 4}}, llm=Replies(["(a)"] * 8))
    answers = reader.answer_many([(QUESTION, Retrieval())] * 8)
    assert [a.choice for a in answers] == [0] * 8 and len(built) == 1


def test_close_keeps_a_given_llm_open_and_closes_the_cache_it_opened(tmp_path):
    import sqlite3

    given = Replies(["(a)"])
    reader = LLMReader({"llm": {"cache_dir": str(tmp_path)}}, llm=given)
    reader.answer(QUESTION, Retrieval())
    cache = reader.llm.cache
    reader.close()
    assert not given.closed and reader._llm is None
    with pytest.raises(sqlite3.ProgrammingError):
        cache.get("any")
