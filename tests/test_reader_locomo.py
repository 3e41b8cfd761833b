"""The ``locomo`` reader: LoCoMo's prompt texts, the date hint, the two-option adversarial choice
mapped back, and scoring of what it returns with LoCoMo's F1."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from question_helpers import choice_question

from memlab.errors import ConfigurationError
from memlab.eval.answers import score_open_answer
from memlab.llm.base import LLM, ChatMessage, LLMResponse
from memlab.readers.locomo import (
    CONV_START_PROMPT,
    NOT_MENTIONED,
    LoCoMoReader,
    adversarial_options,
    map_adversarial_reply,
)
from memlab.registry import create_reader
from memlab.types import Question, Retrieval


class RecordingLLM(LLM):
    name = "recording"

    def __init__(self, reply: str | None = None) -> None:
        self.reply = reply
        self.requests: list[dict] = []
        self._lock = threading.Lock()

    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float, max_tokens: int | None
    ) -> LLMResponse:
        with self._lock:
            self.requests.append(
                {
                    "messages": [m.model_dump() for m in messages],
                    "temperature": temperature,
                    "max_tokens": max_tokens,
                    "json_mode": json_mode,
                }
            )
        return LLMResponse(
            text=self.reply if self.reply is not None else " Miso \n", prompt_tokens=50, completion_tokens=2
        )


def _question(
    category: int, *, qid: str = "conv-x:q0", answer: str = "Miso", text: str = "What is the cat called?"
) -> Question:
    names = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
    return Question(
        id=qid,
        type=names[category],
        text=text,
        answer_text=answer,
        context_id="conv-x",
        end_index=3,
        metadata={"category": category, "speakers": ["Ann", "Bob"]},
    )


CONTEXT = "DATE: 3 January 2024, 09:05\nuser: Ann: I adopted a cat named Miso."


def _reader(llm: LLM, tmp_path: Path, **config) -> LoCoMoReader:
    return LoCoMoReader({"llm": {"cache": False}, **config}, llm=llm, cache_dir=tmp_path)


def test_prompt_is_locomos(tmp_path: Path) -> None:
    llm = RecordingLLM()
    reader = _reader(llm, tmp_path)
    answer = reader.answer(_question(4), Retrieval(context=CONTEXT))
    assert answer.text == "Miso" and answer.error is None and answer.prompt_tokens == 50
    (request,) = llm.requests
    assert request["temperature"] == 0.0 and request["max_tokens"] == 32 and request["json_mode"] is False
    (message,) = request["messages"]
    assert message["role"] == "user"
    assert message["content"] == (
        "Below is a conversation between two people: Ann and Bob. The conversation takes place over multiple "
        "days and the date of each conversation is wriiten at the beginning of the conversation.\n\n"
        + CONTEXT
        + "\n\n\nBased on the above context, write an answer in the form of a short phrase for the following "
        "question. Answer with exact words from the context whenever possible.\n\n"
        "Question: What is the cat called? Short answer:\n"
    )
    assert reader.describe() == "locomo:recording"


def test_temporal_questions_get_the_date_hint(tmp_path: Path) -> None:
    llm = RecordingLLM(reply="7 May 2023")
    reader = _reader(llm, tmp_path)
    reader.answer(_question(2, text="When did Ann adopt Miso?"), Retrieval(context=CONTEXT))
    reader.answer(_question(1, text="Where did Ann go?"), Retrieval(context=CONTEXT))
    first, second = (r["messages"][0]["content"] for r in llm.requests)
    assert first.endswith(
        "Question: When did Ann adopt Miso? Use DATE of CONVERSATION to answer with an approximate date. Short answer:\n"
    )
    assert "Use DATE of CONVERSATION" not in second


def test_adversarial_is_a_two_option_choice_mapped_back(tmp_path: Path) -> None:
    orders = {tuple(adversarial_options(_question(5, qid=f"c:q{i}", answer="tomatoes"), 0).values()) for i in range(40)}
    assert orders == {(NOT_MENTIONED, "tomatoes"), ("tomatoes", NOT_MENTIONED)}  # both orders occur
    question = _question(5, answer="tomatoes", text="What did Ann grow?")
    options = adversarial_options(question, 0)
    assert adversarial_options(question, 0) == options  # seeded: the same prompt on every run
    letter = "a" if options["a"] == NOT_MENTIONED else "b"

    llm = RecordingLLM(reply=f" {letter.upper()} ")
    reader = _reader(llm, tmp_path)
    answer = reader.answer(question, Retrieval(context=CONTEXT))
    content = llm.requests[0]["messages"][0]["content"]
    assert content.endswith(
        "\nBased on the above context, answer the following question.\n\n"
        f"Question: What did Ann grow? Select the correct answer: (a) {options['a']} (b) {options['b']}.  Short answer:\n"
    )
    assert answer.text == NOT_MENTIONED and answer.metadata["options"] == options
    assert answer.metadata["raw_reply"] == f" {letter.upper()} "
    assert score_open_answer(question, answer.text)["f1"] == 1.0

    trap_letter = "b" if letter == "a" else "a"
    fooled = _reader(RecordingLLM(reply=f"({trap_letter})"), tmp_path).answer(question, Retrieval(context=CONTEXT))
    assert fooled.text == "tomatoes" and score_open_answer(question, fooled.text)["f1"] == 0.0


def test_adversarial_mapping_follows_get_cat_5_answer() -> None:
    options = {"a": "tomatoes", "b": NOT_MENTIONED}
    assert map_adversarial_reply("a", options) == "tomatoes"
    assert map_adversarial_reply("B", options) == NOT_MENTIONED
    assert map_adversarial_reply("x", options) == NOT_MENTIONED  # LoCoMo: anything but 'a' is b
    assert map_adversarial_reply("(a)", options) == "tomatoes"
    assert map_adversarial_reply("(b)", options) == NOT_MENTIONED
    # longer replies are kept (lower-cased), and scored by LoCoMo's phrase test
    assert (
        map_adversarial_reply("(a) Not mentioned in the conversation", options)
        == "(a) not mentioned in the conversation"
    )


def test_no_speakers_no_start_prompt_and_empty_memory(tmp_path: Path) -> None:
    llm = RecordingLLM()
    question = _question(4).model_copy(update={"metadata": {"category": 4}})
    _reader(llm, tmp_path).answer(question, Retrieval())
    content = llm.requests[0]["messages"][0]["content"]
    assert content.startswith("(nothing remembered)\n\n\nBased on the above context")
    assert CONV_START_PROMPT[:20] not in content


def test_multiple_choice_is_a_setup_error(tmp_path: Path) -> None:
    mc = choice_question()
    with pytest.raises(ConfigurationError, match="open questions"):
        _reader(RecordingLLM(), tmp_path).answer(mc, Retrieval())


def test_answer_many_and_registry(tmp_path: Path) -> None:
    llm = RecordingLLM()
    reader = create_reader("locomo", {"llm": {"cache": False, "max_concurrency": 3}}, llm=llm)
    answers = reader.answer_many([(_question(4, qid=f"c:q{i}"), Retrieval(context=CONTEXT)) for i in range(6)])
    assert [a.text for a in answers] == ["Miso"] * 6 and len(llm.requests) == 6
    reader.close()


def test_responses_are_cached_in_the_runs_cache_dir(tmp_path: Path) -> None:
    llm = RecordingLLM()
    first = LoCoMoReader({}, llm=llm, cache_dir=tmp_path)
    first.answer(_question(4), Retrieval(context=CONTEXT))
    first.close()
    again = LoCoMoReader({}, llm=llm, cache_dir=tmp_path)
    cached = again.answer(_question(4), Retrieval(context=CONTEXT))
    again.close()
    assert len(llm.requests) == 1 and cached.metadata["cached"] is True
    assert any(tmp_path.iterdir())
