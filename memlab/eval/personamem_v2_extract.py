"""PersonaMem-v2's official multiple-choice answer extraction and scoring.

Reproduced from reading ``extract_final_answer`` and ``check_mcq_correctness`` in
bowen-upenn/PersonaMem-v2 ``inference.py`` (commit 6a36975): the patterns below are tried in order
with ``re.IGNORECASE | re.MULTILINE``; the first pattern that matches anywhere in the reply wins,
its (first) match is upper-cased. Because of IGNORECASE, ``[A-Z]`` also matches lower-case letters,
so an early "Answer: I think ..." yields ``I``. No match gives ``""``. A reply is correct only when
its letter maps to an option whose text equals the correct answer's text exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# The pattern texts, verbatim from inference.py@6a36975 (extract_final_answer), in its order.
OFFICIAL_PATTERNS: tuple[str, ...] = (
    r"\$\\boxed\{([A-Z])\}\$",
    r"\\boxed\{([A-Z])\}",
    r"Final Answer:\s*([A-Z])",
    r"final answer:\s*([A-Z])",
    r"Answer:\s*([A-Z])",
    r"answer:\s*([A-Z])",
    r"final answer is\s*\$?\\boxed\{([A-Z])\}\$?",
    r"final answer is\s*([A-Z])",
    r"the answer is\s*\$?\\boxed\{([A-Z])\}\$?",
    r"the answer is\s*([A-Z])",
    r"\b([A-Z])\.\s*$",
)
_COMPILED = tuple(re.compile(p, re.IGNORECASE | re.MULTILINE) for p in OFFICIAL_PATTERNS)
LETTERS = ("A", "B", "C", "D")


def extract_letter(reply: str) -> str:
    """The reference's extracted letter (upper case), or ``""`` when no pattern matches."""
    if not reply:
        return ""
    for pattern in _COMPILED:
        match = pattern.search(reply)
        if match:
            return match.group(1).upper()
    return ""


def is_correct(letter: str, options: Sequence[str], correct_answer: str) -> bool:
    """``check_mcq_correctness``: the letter's option text equals the correct answer's text."""
    mapping = dict(zip(LETTERS, options))
    return bool(letter) and mapping.get(letter.upper(), "") == correct_answer


def choice_for(letter: str, options: Sequence[str], correct_index: int | None) -> int | None:
    """The option index to record so that ``choice == correct_index`` exactly when the reference
    scores the reply correct: the correct index when its text is the letter's (also for a duplicate
    text under another letter), the letter's index otherwise, None for no letter or one past D."""
    if letter not in LETTERS[: len(options)]:
        return None
    index = LETTERS.index(letter)
    if correct_index is not None and options[index] == options[correct_index]:
        return correct_index
    return index
