"""The synthetic generators have no position bias: the correct option's letter is balanced.

Per seed and per question type every letter holds ``n // 4`` or ``n // 4 + 1`` of the type's ``n``
questions (the closest to 25 % whole questions allow), and over a seed's questions each letter is
within 2 points of 25 %: a reader that always answers "(b)" scores 25 %, not more or less. The
length of the correct option is balanced against the wrong ones too (it is the longest in about a
quarter of the questions, and as long as they are on average).
"""

from __future__ import annotations

import functools
import random
import statistics
from collections import Counter, defaultdict

import pytest

from memlab.datasets import load_dataset
from memlab.datasets.synthetic.positions import balance_answers, balanced_positions
from memlab.types import Question

SEEDS = range(1, 21)
SPECS = ("synthetic:personas=10,seed={seed}", "synthetic:personas=2,seed={seed}", "synthetic:style=v2,seed={seed}")


@functools.cache  # both tests read the same 60 datasets
def _questions(spec: str) -> list[list[Question]]:
    return [[q for q in load_dataset(spec.format(seed=s)).questions if q.is_multiple_choice] for s in SEEDS]


@pytest.mark.parametrize("spec", SPECS)
def test_correct_letter_is_balanced_per_seed_and_per_type(spec: str) -> None:
    for questions in _questions(spec):
        letters = Counter(q.answer for q in questions)
        assert max(abs(letters[p] / len(questions) - 0.25) for p in range(4)) <= 0.02, (spec, letters)
        by_type: dict[str, Counter[int | None]] = defaultdict(Counter)
        for q in questions:
            by_type[q.type][q.answer] += 1
        for qtype, counts in by_type.items():
            n = sum(counts.values())
            assert {counts[p] for p in range(4)} <= {n // 4, -(-n // 4)}, (spec, qtype, counts)
        for q in questions:  # the letter moved with its option: texts, kinds and answer_text agree
            assert q.options[q.answer].startswith(f"({'abcd'[q.answer]}) ") or not q.options[0].startswith("(a) ")
            kinds = q.metadata.get("option_kinds")
            assert kinds is None or kinds[q.answer] == "correct"
            assert q.answer_text is None or q.answer_text == q.options[q.answer]


@pytest.mark.parametrize("spec", SPECS)
def test_correct_option_length_is_balanced(spec: str) -> None:
    longest, ratios, n = 0, [], 0
    for questions in _questions(spec):
        for q in questions:
            lengths = [len(o) for o in q.options]
            longest += lengths[q.answer] == max(lengths)
            ratios.append(lengths[q.answer] / statistics.fmean(x for i, x in enumerate(lengths) if i != q.answer))
            n += 1
    assert abs(longest / n - 0.25) <= 0.035, longest / n  # a longest-option reader stays at chance
    assert abs(statistics.fmean(ratios) - 1.0) <= 0.03, statistics.fmean(ratios)


def test_balanced_positions_spreads_the_extras_over_the_letters() -> None:
    types = ["x"] * 5 + ["y"] * 5 + ["z"] * 6  # three types, each one letter short or over
    positions = balanced_positions(types, 4, random.Random(0))
    assert sorted(Counter(positions).values()) == [4, 4, 4, 4]
    for qtype in "xyz":
        counts = Counter(p for p, t in zip(positions, types) if t == qtype)
        assert max(counts.values()) - min(counts[p] for p in range(4)) <= 1


def test_balance_answers_moves_the_correct_option_with_its_letter() -> None:
    question = Question(
        id="q", context_id="c", text="?", type="t", end_index=0, answer=3,
        options=["(a) w1", "(b) w2", "(c) w3", "(d) right"],
        metadata={"option_kinds": ["wrong", "wrong", "wrong", "correct"]},
    )  # fmt: skip
    moved = balance_answers([question], random.Random(1))[0]
    assert moved.options[moved.answer] == f"({'abcd'[moved.answer]}) right"
    assert moved.metadata["option_kinds"][moved.answer] == "correct"
    assert sorted(o[4:] for o in moved.options) == ["right", "w1", "w2", "w3"]
