"""The one interface every memory backend implements.

Like langchain-core's ``BaseRetriever``, the abstract surface is tiny: a plugin implements
``_ingest`` and ``_retrieve`` (and ``_reset``). The public methods in this base class validate
arguments, scope every call to a user, track how sessions arrive in parts, and time each call, so
every backend behaves the same way to the runner, the client API and the REST service.

Optional abilities (listing, updating, deleting, showing the history of a memory, persisting to a
data directory) are declared in ``capabilities``; the matching public methods refuse clearly when a
backend does not declare them.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memlab.errors import MemlabError, UnsupportedCapabilityError
from memlab.tokens import count_tokens
from memlab.types import MemoryItem, Message, Retrieval, Session

_USER_ID = re.compile(r"^[A-Za-z0-9_.:@\-]{1,128}$")


class Capability(str, Enum):
    """Abilities beyond ingest/retrieve that a backend may declare."""

    LIST = "list"
    UPDATE = "update"
    DELETE = "delete"
    HISTORY = "history"
    PERSIST = "persist"  # state survives a restart when given a data_dir


class BackendConfig(BaseModel):
    """Base of every plugin's config. Unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(default=10, ge=1, description="items returned by retrieve() when k is not given")


class IngestReport(BaseModel):
    """What one ``ingest`` call did."""

    session_id: str
    first_turn: int = Field(description="turn index of the first message within its session")
    messages: int
    seconds: float


def validate_user_id(user_id: str) -> str:
    """User ids scope all data; they end up in file names and SQL, so keep them plain."""
    if not isinstance(user_id, str) or not _USER_ID.match(user_id):
        raise ValueError(
            f"invalid user_id {user_id!r}: use 1-128 characters from letters, digits and _.:@-"
        )
    if not user_id.strip("."):  # "." and ".." would name this or the parent folder in a path
        raise ValueError(f"invalid user_id {user_id!r}: it must not consist of dots only")
    return user_id


class Memory(ABC):
    """Base class of memory backends.

    Subclasses set ``name``, ``description``, ``Config`` (a ``BackendConfig`` subclass) and
    ``capabilities``, and implement ``_ingest``, ``_retrieve`` and ``_reset``.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Config: ClassVar[type[BackendConfig]] = BackendConfig
    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    def __init__(
        self, config: BackendConfig | Mapping[str, Any] | None = None, *, data_dir: str | Path | None = None
    ) -> None:
        self.config = self.parse_config(config)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        # (user_id, session_id) -> messages of that session seen so far; lets a session arrive in parts.
        self._session_turns: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ config
    @classmethod
    def parse_config(cls, config: BackendConfig | Mapping[str, Any] | None) -> BackendConfig:
        if config is None:
            return cls.Config()
        if isinstance(config, cls.Config):
            return config
        if isinstance(config, BaseModel):
            config = config.model_dump()
        try:
            return cls.Config.model_validate(dict(config))
        except ValidationError as exc:
            raise MemlabError(f"invalid config for backend {cls.name or cls.__name__!r}:\n{exc}") from exc

    # ------------------------------------------------------------------ public API
    def ingest(self, session: Session | Mapping[str, Any], *, user_id: str) -> IngestReport:
        """Store a session (or the next part of one) in ``user_id``'s memory."""
        validate_user_id(user_id)
        if not isinstance(session, Session):
            session = Session.model_validate(session)
        first_turn = self._next_turn_index(user_id, session.id)
        start = time.perf_counter()
        self._ingest(session, user_id=user_id, first_turn=first_turn)
        self._record_turns(user_id, session.id, first_turn + len(session.messages))
        return IngestReport(
            session_id=session.id,
            first_turn=first_turn,
            messages=len(session.messages),
            seconds=time.perf_counter() - start,
        )

    def add_messages(self, messages: list[Message], *, user_id: str, session_id: str) -> IngestReport:
        """Convenience for chatbots: append turns to a session."""
        return self.ingest(Session(id=session_id, messages=messages), user_id=user_id)

    def retrieve(self, query: str, *, user_id: str, k: int | None = None) -> Retrieval:
        """Return what ``user_id``'s memory holds that is relevant to ``query``."""
        validate_user_id(user_id)
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        if k is None:
            k = self.config.top_k
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        start = time.perf_counter()
        result = self._retrieve(query, user_id=user_id, k=k)
        seconds = time.perf_counter() - start
        tokens = result.tokens or count_tokens(result.context)
        return result.model_copy(update={"seconds": seconds, "tokens": tokens})

    def reset(self, user_id: str) -> None:
        """Forget everything about ``user_id``."""
        validate_user_id(user_id)
        self._reset(user_id)
        for key in [key for key in self._session_turns if key[0] == user_id]:
            del self._session_turns[key]

    def close(self) -> None:
        """Release files and models. Persistent backends flush here."""

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ capabilities
    def supports(self, capability: Capability | str) -> bool:
        return Capability(capability) in self.capabilities

    def _require(self, capability: Capability) -> None:
        if capability not in self.capabilities:
            have = ", ".join(sorted(c.value for c in self.capabilities)) or "none"
            raise UnsupportedCapabilityError(
                f"backend {self.name!r} does not support {capability.value!r} (its capabilities: {have})"
            )

    def list_memories(self, *, user_id: str) -> list[MemoryItem]:
        self._require(Capability.LIST)
        return self._list(validate_user_id(user_id))

    def update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        self._require(Capability.UPDATE)
        if not text.strip():
            raise ValueError("memory text must not be empty")
        return self._update(item_id, text, user_id=validate_user_id(user_id))

    def delete(self, item_id: str, *, user_id: str) -> None:
        self._require(Capability.DELETE)
        self._delete(item_id, user_id=validate_user_id(user_id))

    def history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        self._require(Capability.HISTORY)
        return self._history(item_id, user_id=validate_user_id(user_id))

    # ------------------------------------------------------------------ for subclasses
    @abstractmethod
    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        """Store ``session.messages``; the first one is turn ``first_turn`` of session ``session.id``."""

    @abstractmethod
    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        """Return up to ``k`` items for ``query`` and the context text rendered from them."""

    @abstractmethod
    def _reset(self, user_id: str) -> None:
        """Delete all of ``user_id``'s data."""

    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        """Turns of ``session_id`` already stored. Persistent backends override this to ask their store."""
        return self._session_turns.get((user_id, session_id), 0)

    def _record_turns(self, user_id: str, session_id: str, total: int) -> None:
        self._session_turns[(user_id, session_id)] = total

    def _list(self, user_id: str) -> list[MemoryItem]:
        raise NotImplementedError

    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        raise NotImplementedError

    def _delete(self, item_id: str, *, user_id: str) -> None:
        raise NotImplementedError

    def _history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        raise NotImplementedError


def render_turns(items: list[MemoryItem]) -> str:
    """Render turn-like items as a transcript, one ``role: text`` line each."""
    lines = []
    for item in items:
        role = item.source.get("role")
        lines.append(f"{role}: {item.text}" if role else item.text)
    return "\n".join(lines)
