"""Golden tests of PersonaMem's official answer extractor and of the llm reader's two parsers.

Each expected verdict (one case a line in ``data/personamem_extract_golden.jsonl``) was worked out
by hand from the reference's rules (bowen-upenn/PersonaMem ``Evaluation.extract_answer``; MemOS
``extract_choice_answer``): the set of letters after the last ``<final_answer>`` (exact spelling;
``</final_answer>`` cut), else the whole reply; parenthesised letters if any, else bare ones;
correct iff one of the two sets is exactly the correct letter.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlab.eval.personamem_extract import extract_official, official_is_correct, official_tail, option_set
from memlab.llm import LLM, LLMResponse
from memlab.readers.llm import LLMReader, lenient_only, parse_choice
from memlab.types import Question, Retrieval

OPTIONS = ["(a) Go hiking in the Alps", "(b) Visit a jazz club", "(c) Stay home and read", "(d) Try surfing"]

# Each case: reply, correct letter, the official and the lenient verdict, and (where it is not
# plain) why. The disagreements come first, then the agreements.
GOLDEN_FILE = Path(__file__).parent / "data" / "personamem_extract_golden.jsonl"
GOLDEN = [
    (case["reply"], case["correct"], case["official"], case["lenient"])
    for case in map(json.loads, GOLDEN_FILE.read_text(encoding="utf-8").splitlines())
]


@pytest.mark.parametrize(("reply", "correct", "official", "lenient"), GOLDEN)
def test_official_extractor_golden(reply, correct, official, lenient):
    assert official_is_correct(reply, f"({correct})") is official
    assert official_is_correct(reply, correct) is official  # "(c)" and "c" are the same answer
    assert (parse_choice(reply, OPTIONS) == "abcd".index(correct)) is lenient


def test_golden_set_is_large_and_holds_the_disagreements():
    assert len(GOLDEN) >= 20
    assert sum(1 for _, _, official, lenient in GOLDEN if lenient and not official) >= 6


def test_option_sets_and_tail():
    assert option_set("Options (a) and (B) ...") == {"a", "b"}
    assert option_set("a or c, maybe") == {"a", "c"}
    assert option_set("(c) and a") == {"c"}  # parentheses win over bare letters
    assert official_tail("  x <final_answer> one <final_answer> (d) </final_answer> ") == "(d)"
    assert official_tail("no tag ") == "no tag"


def test_a_reply_can_be_credited_for_two_letters():
    # Tail names d; the whole reply's parenthesised letters are {c}: the reference credits both.
    extraction = extract_official("(c) looks good at first. <final_answer> d")
    assert extraction.credits("c") and extraction.credits("d") and not extraction.credits("a")
    assert extraction.choice(2) == 2 and extraction.choice(3) == 3
    assert extraction.choice(0) == 3  # wrong: the letter of the tail
    assert extract_official("(a) or (b)").choice(0) is None  # names several: a parse failure


def _question(correct: int) -> Question:
    return Question(id="q", type="t", text="Any plans?", options=OPTIONS, answer=correct, context_id="c", end_index=1)


@pytest.mark.parametrize(("reply", "correct", "official", "lenient"), GOLDEN)
def test_lenient_only_metric(reply, correct, official, lenient):
    assert lenient_only(reply, _question("abcd".index(correct))) == float(lenient and not official)


class Replies(LLM):
    name = "replies:m"

    def __init__(self, replies):
        self.replies = list(replies)

    def _chat(self, messages, *, json_mode, temperature, max_tokens):
        return LLMResponse(text=self.replies.pop(0), prompt_tokens=10, completion_tokens=2)


@pytest.mark.parametrize("parser", ["official", "lenient"])
def test_llm_reader_scores_with_the_chosen_parser(parser):
    replies = [reply for reply, *_ in GOLDEN]
    reader = LLMReader({"llm": {"cache": False}, "parser": parser}, llm=Replies(replies))
    assert reader.describe() == f"llm:replies:m:{parser}"
    for reply, correct, official, lenient in GOLDEN:
        question = _question("abcd".index(correct))
        answer = reader.answer(question, Retrieval(context="memory"))
        expected = official if parser == "official" else lenient
        assert (answer.choice == question.answer) is expected, reply
        assert answer.metadata["parser"] == parser
        assert answer.metadata["metrics"] == {"lenient_only": float(lenient and not official)}
        assert answer.metadata["parse_failure"] is (answer.choice is None)
