"""Questions for reader tests, with placeholders for the fields a test is not about."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlab.types import Question

OPTIONS = ("(a) x", "(b) y", "(c) z", "(d) w")
PLACEHOLDERS: dict[str, Any] = {"id": "q", "type": "t", "context_id": "c", "end_index": 0}


def choice_question(text: str = "?", options: Sequence[str] = OPTIONS, *, answer: int = 0, **fields: Any) -> Question:
    """A four-option question; ``fields`` set any other ``Question`` field (id, type, context_id and
    end_index are placeholders otherwise)."""
    return Question(text=text, options=list(options), answer=answer, **{**PLACEHOLDERS, **fields})


def open_question(text: str, answer_text: str, **fields: Any) -> Question:
    """An open question with a reference answer; other fields as for ``choice_question``."""
    return Question(text=text, answer_text=answer_text, **{**PLACEHOLDERS, **fields})
