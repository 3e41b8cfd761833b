"""Data of the profile store: entries (one row per version), evidence, and operations.

An *entry* is one aspect of the user (``pizza``, ``running``, ``living situation``) with a stable
``id``. Each change makes a new *version* (``<id>.v<n>``); the old version is closed (``valid_to``
set) and stays queryable, so the chain of versions with their reasons is the aspect's history.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator


class Stance(str, Enum):
    LIKES = "likes"
    DISLIKES = "dislikes"
    NEUTRAL = "neutral"
    FACT = "fact"


class OpType(str, Enum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NOOP = "NOOP"


# A *statement* entry holds what the user said ("likes jazz", value = the quote); an *attribute*
# entry holds one value of a named attribute ("lives in": "Berlin") that a new value replaces.
Kind = Literal["statement", "attribute"]


class Evidence(BaseModel):
    """Where a statement was made: the turn and the quoted words."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    turn_index: int = Field(ge=0)
    quote: str = ""
    # The turn's date and caller metadata, kept so filters (memlab.memory.MemoryFilter) can select
    # entries by the turns they came from; absent in profiles stored before they were kept.
    timestamp: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("timestamp", "metadata"):
            if not data.get(key):
                data.pop(key, None)
        return data

    def source(self) -> dict[str, object]:
        source: dict[str, object] = {"session_id": self.session_id, "turn_index": self.turn_index}
        if self.timestamp:
            source["timestamp"] = self.timestamp
        if self.metadata:
            source["metadata"] = dict(self.metadata)
        return source


class ProfileEntry(BaseModel):
    """One version of one aspect. ``valid_to is None`` means it is the current version."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="stable id of the aspect, shared by all its versions")
    version: int = Field(ge=1)
    user_id: str
    aspect: str
    value: str = Field(description="the statement, e.g. 'enjoys community music therapy workshops'")
    stance: Stance
    evidence: list[Evidence] = Field(default_factory=list)
    valid_from: int = Field(ge=0, description="session order (0 = first session seen) that opened this version")
    valid_from_time: datetime | None = None
    valid_to: int | None = Field(default=None, description="session order that closed it; None while current")
    valid_to_time: datetime | None = None
    reason: str | None = Field(default=None, description="why this version replaced the previous one")
    closed_reason: str | None = Field(default=None, description="why it was closed (UPDATE or DELETE reason)")
    op: OpType = Field(description="the operation that created this version")
    kind: Kind = Field(
        default="statement", description="statement: a stance or fact; attribute: one value that changes"
    )
    erased_at: datetime | None = Field(
        default=None,
        description="when the entry was deleted through the API: its text is gone, only the chain's shape stays",
    )

    @property
    def version_id(self) -> str:
        return f"{self.id}.v{self.version}"

    @property
    def current(self) -> bool:
        return self.valid_to is None

    @property
    def text(self) -> str:
        """What is embedded for retrieval."""
        return f"{self.aspect}: {self.value}"


class OperationFields(BaseModel):
    """What every proposed change names: the operation, the entry it targets, and the new content."""

    model_config = ConfigDict(extra="forbid")

    op: OpType
    entry_id: str | None = None
    aspect: str | None = None
    value: str | None = None
    stance: Stance | None = None
    reason: str | None = None


class Operation(OperationFields):
    """One change proposed by an extractor (or a user through the API).

    - ADD: a new aspect (``aspect``, ``value``, ``stance``); ``entry_id`` may name the id to give it,
      or a *closed* entry to reopen (the user took something up again).
    - UPDATE: ``entry_id``'s current version is closed and a new one opens with the given fields.
    - DELETE: ``entry_id``'s current version is closed with no successor ("I no longer do X").
    - NOOP: nothing changes (a repeat); logged so the operation log explains every statement.
    """

    evidence: list[Evidence] = Field(default_factory=list)
    kind: Kind | None = Field(default=None, description="ADD: 'statement' unless given; UPDATE keeps the entry's kind")

    @model_validator(mode="after")
    def _fields_for_op(self) -> Operation:
        if self.op is OpType.ADD and not (self.aspect and self.value and self.stance):
            raise ValueError("ADD needs aspect, value and stance")
        if self.op in (OpType.UPDATE, OpType.DELETE) and not self.entry_id:
            raise ValueError(f"{self.op.value} needs entry_id")
        if self.op is OpType.UPDATE and not (self.value or self.stance or self.aspect):
            raise ValueError("UPDATE needs at least one of value, stance, aspect")
        return self


class OperationRecord(BaseModel):
    """A row of the operation log: what was applied, to which version, in which session."""

    model_config = ConfigDict(extra="forbid")

    seq: int
    user_id: str
    session_id: str | None
    session_order: int | None
    op: OpType
    entry_id: str | None
    version: int | None
    reason: str | None
    evidence: list[Evidence] = Field(default_factory=list)
    source: str = Field(description="'rules', 'llm' or 'api'")
    created_at: datetime
