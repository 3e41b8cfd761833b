"""Where the correct option sits: balanced over the letters, per question type and over the dataset.

A generator that draws the correct option's position independently per question leaves chance
imbalances (with 240 questions one letter can hold a third of the answers), and a reader with a
position bias (an LLM that prefers "(b)" or the last option) then scores above or below 25 % without
memory. ``balance_answers`` moves each correct option to a dealt position instead: per question type
every letter gets ``n // k`` or ``n // k + 1`` of the type's ``n`` questions, and the letters that get
the one more are chosen so that the dataset's totals are balanced too (at most one apart). The wrong
options keep their order; which question gets which letter is shuffled with the generator's seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from memlab.types import OPTION_LETTERS, Question

_LETTERED = re.compile(r"^\(([a-z])\) ")


def balanced_positions(types: Sequence[str], options: int, rng: random.Random) -> list[int]:
    """A correct-option position for each question (given by its type, in dataset order): per type
    every position ``n // options`` or one more times, the extras going to the positions the dataset
    has used least so far."""
    totals = [0] * options
    positions = [0] * len(types)
    for qtype in sorted(set(types)):
        members = [i for i, t in enumerate(types) if t == qtype]
        base, extra = divmod(len(members), options)
        # the least used positions so far take the extras (ties broken at random, not towards "a")
        ranked = sorted(range(options), key=lambda p: (totals[p], rng.random()))
        dealt = [p for p in range(options) for _ in range(base)] + ranked[:extra]
        rng.shuffle(dealt)
        for index, position in zip(members, dealt):
            positions[index] = position
            totals[position] += 1
    return positions


def _move(question: Question, position: int) -> Question:
    """``question`` with its correct option at ``position`` (swapped with the option there)."""
    assert question.answer is not None
    old = question.answer
    if old == position:
        return question
    order = list(range(len(question.options)))
    order[old], order[position] = order[position], order[old]
    texts = [question.options[i] for i in order]
    if all(_LETTERED.match(t) for t in question.options):  # "(a) ..." options carry their letter: re-letter
        texts = [f"({OPTION_LETTERS[p]}) {_LETTERED.sub('', t)}" for p, t in enumerate(texts)]
    metadata = dict(question.metadata)
    if isinstance(metadata.get("option_kinds"), list):
        metadata["option_kinds"] = [metadata["option_kinds"][i] for i in order]
    update: dict[str, object] = {"options": texts, "answer": position, "metadata": metadata}
    if question.answer_text is not None:
        update["answer_text"] = texts[position]
    return question.model_copy(update=update)


def balance_answers(questions: list[Question], rng: random.Random) -> list[Question]:
    """The questions with their correct options at balanced positions (see the module docstring);
    questions that are not four-option multiple choice are left as they are."""
    chosen = [i for i, q in enumerate(questions) if q.is_multiple_choice and len(q.options) == 4]
    positions = balanced_positions([questions[i].type for i in chosen], 4, rng)
    out = list(questions)
    for index, position in zip(chosen, positions):
        out[index] = _move(questions[index], position)
    return out
