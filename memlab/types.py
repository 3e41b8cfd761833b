"""Typed data shared by every part of memlab: conversations, memories, retrievals and questions."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

Role = Literal["system", "user", "assistant"]

MAX_METADATA_BYTES = 4096  # one message's metadata, as compact JSON
MAX_METADATA_KEY_CHARS = 64


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Caller metadata of a stored turn: a JSON object of at most ``MAX_METADATA_BYTES``."""
    for key in value:
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_METADATA_KEY_CHARS:
            raise ValueError(f"metadata keys must be strings of 1-{MAX_METADATA_KEY_CHARS} characters, got {key!r}")
    try:
        size = len(json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"metadata must be plain JSON (objects, lists, strings, numbers, booleans, null): {exc}"
        ) from None
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is {size} bytes as JSON; at most {MAX_METADATA_BYTES} are stored per message")
    return value


OPTION_LETTERS = ("a", "b", "c", "d")


class Message(BaseModel):
    """One chat turn. ``metadata`` is the caller's (tags, channel, ...): stored with the turn, filterable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    content: str
    timestamp: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_metadata(value)

    @model_serializer(mode="wrap")
    def _omit_empty_metadata(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Turns without metadata dump as they always did (dataset files, caches keyed on dumps).
        data: dict[str, Any] = handler(self)
        if not data.get("metadata"):
            data.pop("metadata", None)
        return data


class Session(BaseModel):
    """A run of messages that belong together (one conversation sitting).

    A session may be delivered in parts: ingesting the same ``id`` twice means the second part
    continues the first. ``metadata`` carries dataset-specific facts (date, persona, ...).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    messages: list[Message]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _id_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("session id must not be empty")
        return value


class MemoryItem(BaseModel):
    """One unit a backend hands back for a query: a turn, a chunk, a fact or a profile entry.

    ``source`` says where it came from so it can be traced back to turns (``session_id``,
    ``turn_index``, ``role`` ...); backends that cannot say leave it empty.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    score: float | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Retrieval(BaseModel):
    """What a memory returns for a query: the items and the context text a reader will see."""

    model_config = ConfigDict(extra="forbid")

    items: list[MemoryItem] = Field(default_factory=list)
    context: str = ""
    tokens: int = 0
    seconds: float = 0.0

    @property
    def is_empty(self) -> bool:
        return not self.context.strip()


class Question(BaseModel):
    """A question about a user's history.

    PersonaMem questions are multiple choice: four ``options`` and the index of the correct one in
    ``answer``. Open questions (LoCoMo) have no options and carry ``answer_text`` instead.
    ``end_index`` is the message index in the shared context at which the question is asked: only
    messages ``[0, end_index)`` may be known to the memory when it is answered. ``evidence`` names
    the turns that hold the answer where the dataset annotates them (LoCoMo ``D<session>:<turn>``).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    type: str
    topic: str = ""
    text: str
    options: list[str] = Field(default_factory=list)
    answer: int | None = Field(default=None, ge=0, le=3, description="correct option (0 = (a))")
    answer_text: str | None = None
    context_id: str
    end_index: int = Field(ge=0)
    distance_blocks: int | None = None
    distance_tokens: int | None = None
    persona_id: str | None = None
    evidence: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _choice_or_open(self) -> Question:
        if self.options:
            if len(self.options) != len(OPTION_LETTERS):
                raise ValueError(f"expected 4 options, got {len(self.options)}")
            if self.answer is None:
                raise ValueError("a multiple-choice question needs the index of its answer")
        elif self.answer_text is None:
            raise ValueError("an open question (no options) needs answer_text")
        return self

    @property
    def is_multiple_choice(self) -> bool:
        return bool(self.options)

    @property
    def answer_letter(self) -> str | None:
        return None if self.answer is None else OPTION_LETTERS[self.answer]


class Answer(BaseModel):
    """A reader's choice for a question, with one score per option (higher is better)."""

    model_config = ConfigDict(extra="forbid")

    choice: int | None = Field(default=None, description="chosen option; None when the reader failed")
    text: str | None = Field(default=None, description="free-form answer for open questions")
    scores: list[float] = Field(default_factory=list)
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
