"""Questions for reader tests, with placeholders for the fields a test is not about."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlab.types import Question

OPTIONS = ("(a) x", "(b) y", "(c) z", "(d) w")


def choice_question(text: str = "?", options: Sequence[str] = OPTIONS, *, answer: int = 0, **fields: Any) -> Question:
    """A four-option question; ``fields`` set any other ``Question`` field (id, type, context_id and
    end_index are placeholders otherwise)."""
    placeholders: dict[str, Any] = {"id": "q", "type": "t", "context_id": "c", "end_index": 0}
    return Question(text=text, options=list(options), answer=answer, **{**placeholders, **fields})
