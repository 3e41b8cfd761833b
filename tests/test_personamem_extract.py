"""Golden tests of PersonaMem's official answer extractor and of the llm reader's two parsers.

Each expected verdict was worked out by hand from the reference's rules
(bowen-upenn/PersonaMem ``Evaluation.extract_answer``; MemOS ``extract_choice_answer``): the set
of letters after the last ``<final_answer>`` (exact spelling; ``</final_answer>`` cut), else the
whole reply; parenthesised letters if any, else bare ones; correct iff one of the two sets is
exactly the correct letter.
"""

from __future__ import annotations

import pytest

from memlab.eval.personamem_extract import extract_official, official_is_correct, official_tail, option_set
from memlab.llm import LLM, LLMResponse
from memlab.readers.llm import LLMReader, lenient_only, parse_choice
from memlab.types import Question, Retrieval

OPTIONS = ["(a) Go hiking in the Alps", "(b) Visit a jazz club", "(c) Stay home and read", "(d) Try surfing"]

# (reply, correct letter, official verdict, lenient verdict)
GOLDEN = [
    # --- the disagreements: lenient credits, official does not
    ("Options (a) and (b) ignore the user's knee injury, so the answer is (c).", "c", False, True),
    ("Answer: C. It suggests a quiet evening, which fits.", "c", False, True),  # "a" is a second letter
    ("Visit a jazz club", "b", False, True),  # bare option text: the article "a" is the only letter
    ("<final_answer> B) Visit a jazz club", "b", False, True),  # "b)" is not "(b)"; "a" counts too
    ("Option (d) forgets the injury; the final answer is (b).", "b", False, True),
    ("Final answer: d, because a surf trip fits the user.", "d", False, True),
    ("Maybe (b). <Final_Answer> (a)", "a", False, True),  # the tag is matched case-sensitively
    # --- the other way round: official credits, lenient refuses
    ("A good plan depends on the weather.", "a", True, False),
    # --- agreements
    ("(b)", "b", True, True),
    ("b", "b", True, True),
    ("B.", "b", True, True),
    ("(C)", "c", True, True),
    ("<final_answer>(c)", "c", True, True),
    ("<final_answer>(b)</final_answer>", "b", True, True),
    ("Reasoning: (a) is wrong, (d) too. <final_answer> (c) </final_answer>", "c", True, True),
    ("I think (a) is wrong; the user loves music, so (b).\n<final_answer>: (b)", "b", True, True),
    ("<final_answer> c", "c", True, True),
    ("The answer is (D) because they like the ocean.", "d", True, True),
    ("(c) is the best choice.\n<final_answer> as above", "c", True, True),  # tail empty: whole reply
    ("(e) none of these, so (b)", "b", True, True),  # only a-d count
    ('{"answer": "d"}', "d", True, True),
    ("I'd pick (a) or (b).", "a", False, False),
    ("", "a", False, False),
    ("I cannot tell from the memory.", "c", False, False),
    ("<final_answer>", "b", False, False),
    ("The answer is (b).", "c", False, False),
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
