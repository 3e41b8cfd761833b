"""The synthetic benchmark is calibrated: readers that never see memory stay at chance.

On a seed sweep, the ``none`` backend (an empty retrieval) read by the embedding reader, and the
longest-option control, must both score 25 % +- 8 points overall and on every question type with
at least 20 questions. A generator whose correct options differ from their distractors in length
or in closeness to the question (a generic reply that ignores the user, an outdated preference in
clumsier words) fails here.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from memlab.datasets.synthetic import generate
from memlab.readers.controls import LongestOptionReader
from memlab.readers.embedding import EmbeddingReader
from memlab.types import Question, Retrieval

SEEDS = (101, 202, 303, 404)  # 4 x 8 personas x 24 questions = 768 questions, >= 100 per type
CHANCE, TOLERANCE, MIN_PER_TYPE = 0.25, 0.08, 20


@pytest.fixture(scope="module")
def sweep() -> list[Question]:
    return [q for seed in SEEDS for q in generate(personas=8, seed=seed).questions]


def blind_accuracy(reader, questions: list[Question]) -> dict[str, tuple[float, int]]:  # type: ignore[no-untyped-def]
    hits: dict[str, list[bool]] = defaultdict(list)
    for question in questions:
        correct = reader.answer(question, Retrieval()).choice == question.answer  # the `none` backend's retrieval
        hits[question.type].append(correct)
        hits["overall"].append(correct)
    return {name: (sum(h) / len(h), len(h)) for name, h in hits.items()}


def assert_near_chance(name: str, scores: dict[str, tuple[float, int]]) -> None:
    off = {
        t: f"{acc:.1%} of {n}" for t, (acc, n) in scores.items() if n >= MIN_PER_TYPE and abs(acc - CHANCE) > TOLERANCE
    }
    assert not off, f"{name} is not at chance ({CHANCE:.0%} +- {TOLERANCE:.0%}): {off}"


def test_sweep_is_large_enough(sweep: list[Question]) -> None:
    per_type = defaultdict(int)
    for q in sweep:
        per_type[q.type] += 1
    assert len(per_type) == 7 and min(per_type.values()) >= 5 * MIN_PER_TYPE


def test_longest_option_stays_at_chance(sweep: list[Question]) -> None:
    assert_near_chance("longest_option", blind_accuracy(LongestOptionReader(), sweep))


@pytest.mark.slow  # MiniLM embeds the 768 questions and their 3,072 options: 10 minutes on 2 busy cores
def test_blind_embedding_reader_stays_at_chance(sweep: list[Question]) -> None:
    assert_near_chance("none + embedding", blind_accuracy(EmbeddingReader(), sweep))


def test_the_check_catches_a_biased_generator(sweep: list[Question]) -> None:
    """The assertion is not vacuous: a generator whose correct option is always the longest fails."""
    biased = []
    for q in sweep:
        options = list(q.options)
        options[q.answer] = options[q.answer] + " That is what you told me, so it should suit you well."
        biased.append(q.model_copy(update={"options": options}))
    with pytest.raises(AssertionError, match="not at chance"):
        assert_near_chance("longest_option", blind_accuracy(LongestOptionReader(), biased))
