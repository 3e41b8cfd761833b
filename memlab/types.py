"""Typed data shared by every part of memlab: conversations, memories, retrievals and questions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)

Role = Literal["system", "user", "assistant"]

OPTION_LETTERS = ("a", "b", "c", "d")

# Caller metadata of a stored turn: a flat JSON object of scalars and short lists (tags). The bounds
# are the schema, so any metadata the schema allows has a bounded size (under 80 KB as UTF-8).
MAX_METADATA_KEYS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_STRING_CHARS = 256
MAX_METADATA_LIST_ITEMS = 8

# Text every store can hold: PostgreSQL text and JSONB cannot hold U+0000, so no store accepts it
# (also the pattern in the OpenAPI schema, so clients and fuzzers know the rule).
NO_NUL = r"^[^\x00]*$"

# Strict: "007" stays a string and 1 stays a number (lax coercion would blur what filters compare).
MetadataString = Annotated[StrictStr, StringConstraints(max_length=MAX_METADATA_STRING_CHARS, pattern=NO_NUL)]
MetadataScalar = MetadataString | StrictBool | StrictInt | Annotated[StrictFloat, Field(allow_inf_nan=False)] | None
MetadataValue = MetadataScalar | Annotated[list[MetadataScalar], Field(max_length=MAX_METADATA_LIST_ITEMS)]
MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=MAX_METADATA_KEY_CHARS, pattern=NO_NUL)]
FilterKey = Annotated[str, StringConstraints(pattern=NO_NUL)]  # a filter names keys: none holds NUL


def key_rules_in_property_names(schema: dict[str, Any]) -> None:
    """JSON Schema of a dict with ``MetadataKey`` (or ``FilterKey``) keys that says what validation enforces.

    pydantic writes a key pattern as ``patternProperties``, which only selects the keys its value
    schema applies to: a key with NUL would match nothing and be allowed, though validation refuses
    it (422). The pattern belongs in ``propertyNames``, the value schema in ``additionalProperties``."""
    patterns = schema.pop("patternProperties", None)
    if not patterns:
        return
    (pattern, values), *_ = patterns.items()
    schema["propertyNames"] = {**schema.get("propertyNames", {}), "pattern": pattern}
    schema["additionalProperties"] = values


TurnMetadata = Annotated[
    dict[MetadataKey, MetadataValue],
    Field(
        json_schema_extra=key_rules_in_property_names,
        max_length=MAX_METADATA_KEYS,
        description=f"JSON object stored with the turn: at most {MAX_METADATA_KEYS} keys of 1-{MAX_METADATA_KEY_CHARS} "
        f"characters; values are strings (at most {MAX_METADATA_STRING_CHARS} characters), numbers, booleans, "
        f"null, or lists of at most {MAX_METADATA_LIST_ITEMS} of those",
    ),
]


class Message(BaseModel):
    """One chat turn. ``metadata`` is the caller's (tags, channel, ...): stored with the turn, filterable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    content: str
    timestamp: datetime | None = None
    metadata: TurnMetadata = Field(default_factory=dict)

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


class ForgottenItem(BaseModel):
    """One memory a forget request in conversation removed ("please forget my weight").

    ``restorable_until`` is when the removal becomes final (``MemoryClient.restore`` brings the
    item back until then); None when it was deleted at once (``forget_undo_hours`` 0, or no client).
    """

    model_config = ConfigDict(extra="forbid")

    item_id: str
    text: str
    request: str = Field(description="the user's turn that asked for it")
    restorable_until: datetime | None = None


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
