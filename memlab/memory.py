"""The one interface every memory backend implements, and the rules it must keep.

Like langchain-core's ``BaseRetriever``, the abstract surface is tiny: a plugin implements
``_ingest``, ``_retrieve`` and ``_reset``. The public methods in this base class validate
arguments, scope every call to a user, track how sessions arrive in parts, time each call and
check what the plugin returns, so every backend behaves the same to the runner, the client API and
the REST service.

The contract (docs/plugins.md walks through it with a complete example):

- ``_ingest(session, user_id, first_turn)``: store ``session.messages``; message ``i`` is turn
  ``first_turn + i`` of ``session.id``. A session may arrive in several parts. A persistent
  backend overrides ``_next_turn_index`` to ask its store, so numbering continues after a reopen.
- ``_retrieve(query, user_id, k)``: return a ``Retrieval`` with at most ``k`` items and
  ``context``, the text a reader sees (``retrieve`` refuses more than ``k`` with
  ``PluginValidationError``). Rank is the items' ``score`` (higher is better) when every
  item has one, so items may come in conversation order for the reader; without scores, items
  come most relevant first (render turns with ``render_turns`` so dates and
  roles look the same for every backend). ``k`` is the caller's bound for this call;
  ``config.top_k`` is only the default the base class fills in when the caller gives none.
- Items that come from turns carry ``turn_source(...)`` as ``source`` (``session_id``,
  ``turn_index``, ``role``, ``timestamp``): retrieval metrics and date rendering read these keys.
- Item ids are unique per user, not globally: two users (or two users' sessions with one id)
  may hold items with the same id, so any state keyed by item id must be keyed by user too.
  ``delete`` removes exactly the named item of that user, for good (after a reopen too);
  ``_update(item_id, text, *, user_id) -> MemoryItem`` changes that user's item only, visibly to
  list and search at once. An item keeps its id across a reopen, and ``list_memories`` gives a
  user's items in a stable order (the same order on two calls with no write in between).
- Scores are finite numbers or None; ``retrieve`` refuses NaN/inf scores and items that are not
  ``MemoryItem`` with ``PluginValidationError`` naming the plugin.
- ``_reset`` leaves none of the user's text in any file under ``data_dir``.
- Turns carry the caller's ``Message.metadata``; ``turn_source`` puts it in ``source["metadata"]``.
  ``MemoryFilter`` (session id, time range, metadata keys) is the one definition of which items a
  filtered search, list or export may return; the base class applies it to lists and exports. A
  backend declaring ``Capability.FILTER`` takes ``filters`` in ``_retrieve`` and must choose its
  ``k`` items among the matching ones (``filters.matches(item)``), not cut to ``k`` first.
- Unknown or foreign item ids raise ``NotFoundError`` (the service answers 404).
- Speed hooks, optional, never changing what is stored or retrieved: ``prepare(queries)`` computes
  ahead what retrieving for known queries needs (the runner passes every question before the
  replay); ``_ingest_many(parts, user_id)`` stores several sessions (parts) in one go, exactly as
  one ``_ingest`` per part would (the runner ingests everything between two questions with one
  ``ingest_many``).
- Optional abilities are declared in ``capabilities`` and implemented by overriding the matching
  hook (``list`` -> ``_list``, ``update`` -> ``_update``, ``delete`` -> ``_delete``, ``history`` ->
  ``_history``, ``persist`` -> ``_next_turn_index``); registration checks that each declared
  capability has its hook, and the public methods refuse undeclared ones.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from memlab import data_subject
from memlab.errors import ConfigurationError, MemlabError, PluginValidationError, UnsupportedCapabilityError
from memlab.tokens import count_tokens
from memlab.types import (
    FilterKey,
    ForgottenItem,
    MemoryItem,
    Message,
    MetadataScalar,
    Retrieval,
    Session,
    key_rules_in_property_names,
)

_USER_ID = re.compile(r"^[A-Za-z0-9_.:@\-]{1,128}$")

ConfigT = TypeVar("ConfigT", bound=BaseModel)

MAX_K = 100_000  # the most items one retrieve may ask for (full_context asks for "all" turns with it)


class Capability(str, Enum):
    """Abilities beyond ingest/retrieve that a backend may declare."""

    LIST = "list"
    UPDATE = "update"
    DELETE = "delete"
    HISTORY = "history"
    PERSIST = "persist"  # state survives a restart when given a data_dir
    FILTER = "filter"  # retrieve honours a MemoryFilter (lists and exports are filtered by the base class)


# The hook a backend must override for each capability it declares (checked at registration).
CAPABILITY_HOOKS: dict[Capability, str] = {
    Capability.LIST: "_list",
    Capability.UPDATE: "_update",
    Capability.DELETE: "_delete",
    Capability.HISTORY: "_history",
    Capability.PERSIST: "_next_turn_index",
}


_NUMBER = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")


def _time_value(value: Any) -> Any:
    # A date-time string (or a datetime): pydantic would otherwise read a number as a Unix time.
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str) or _NUMBER.match(value):
        raise ValueError("a time must be an ISO 8601 date-time string")
    return value


# A time given as an ISO 8601 string (or a datetime), never a number.
IsoTime = Annotated[datetime, BeforeValidator(_time_value)]


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


class MemoryFilter(BaseModel):
    """Which items a search, list or export returns: every condition given must hold.

    - ``session_id``: the turn belongs to one of these sessions (a string or a list).
    - ``since`` / ``until``: the turn's ``timestamp`` is at or after ``since`` and before ``until``
      (times without a zone are UTC); a turn stored without a timestamp matches no time range, and
      a range with ``since`` at or after ``until`` selects nothing.
    - ``metadata``: for each key, the turn's metadata has that value (when the stored value is a
      list, the filter value must be one of its elements: ``{"tags": "work"}`` matches
      ``{"tags": ["work", "urgent"]}``).

    An item made from several turns (a chunk, an extracted fact: ``source["turns"]``) matches when
    its own source does or when one of its turns does.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str | list[str] | None = Field(default=None, description="one session id or a list of them")
    since: IsoTime | None = Field(default=None, description="turns at or after this time (ISO 8601)")
    until: IsoTime | None = Field(default=None, description="turns before this time (ISO 8601)")
    metadata: dict[FilterKey, MetadataScalar] = Field(
        default_factory=dict,
        description="turn metadata key -> value (no NUL in keys: no stored key holds one)",
        json_schema_extra=key_rules_in_property_names,
    )

    @field_validator("session_id")
    @classmethod
    def _one_or_many(cls, value: str | list[str] | None) -> list[str] | None:
        return [value] if isinstance(value, str) else value  # always a list once validated

    @property
    def empty(self) -> bool:
        return self.session_id is None and self.since is None and self.until is None and not self.metadata

    def matches(self, item: MemoryItem) -> bool:
        """True when ``item`` (or one of the turns it was made from) meets every condition."""
        sources = [item.source, *(t for t in item.source.get("turns", ()) if isinstance(t, Mapping))]
        return any(self._source_matches(item.source, s) for s in sources)

    def _source_matches(self, item_source: Mapping[str, Any], source: Mapping[str, Any]) -> bool:
        session = source.get("session_id", item_source.get("session_id"))
        if self.session_id is not None and session not in list(self.session_id):
            return False
        if self.since is not None or self.until is not None:
            stamp = source.get("timestamp")
            if not stamp:
                return False
            try:
                when = _aware(datetime.fromisoformat(str(stamp)))
            except ValueError:
                return False
            if self.since is not None and when < _aware(self.since):
                return False
            if self.until is not None and when >= _aware(self.until):
                return False
        if self.metadata:
            stored = source.get("metadata") or {}
            for key, wanted in self.metadata.items():
                if key not in stored:
                    return False
                value = stored[key]
                if not (wanted in value if isinstance(value, list) else value == wanted):
                    return False
        return True


FilterLike = MemoryFilter | Mapping[str, Any] | None


def as_filter(filters: FilterLike) -> MemoryFilter | None:
    """A ``MemoryFilter`` from a filter or a plain mapping; None (or an empty filter) for "no filter"."""
    if filters is None:
        return None
    parsed = filters if isinstance(filters, MemoryFilter) else MemoryFilter.model_validate(dict(filters))
    return None if parsed.empty else parsed


class BackendConfig(BaseModel):
    """Base of every plugin's config. Unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(default=10, ge=1, description="items returned by retrieve() when k is not given")


class IngestReport(BaseModel):
    """What one ``ingest`` call did, including what LLM calls made while ingesting cost."""

    session_id: str
    first_turn: int = Field(description="turn index of the first message within its session")
    messages: int
    seconds: float
    prompt_tokens: int = Field(default=0, description="LLM prompt tokens spent while ingesting (mem0, LLM extractors)")
    completion_tokens: int = 0
    cost_usd: float = 0.0
    forgotten: list[ForgottenItem] = Field(
        default_factory=list,
        description="what forget requests in these messages removed (empty: none, or nothing matched)",
    )


def config_problems(model: type[BaseModel], exc: ValidationError) -> str:
    """One line naming each bad key and what is wrong with it; for unknown top-level keys, the valid keys."""
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "(the config)"
        given = error.get("input")
        shown = "" if error["type"] == "extra_forbidden" or isinstance(given, dict) else f" (got {given!r})"
        problems.append(f"{key}: {error['msg']}{shown}")
    message = "; ".join(problems)
    if any(error["type"] == "extra_forbidden" and len(error["loc"]) == 1 for error in exc.errors()):
        message += f"; valid keys: {', '.join(sorted(model.model_fields))}"
    return message


def config_error_message(what: str, model: type[BaseModel], exc: ValidationError) -> str:
    """A one-line config error naming ``what``, the bad keys and, for unknown ones, the valid keys."""
    return f"invalid config for {what}: {config_problems(model, exc)}"


def parse_plugin_config(model: type[ConfigT], config: BaseModel | Mapping[str, Any] | None, what: str) -> ConfigT:
    """A plugin's (backend's, reader's) config as its ``model``: None gives the defaults; a bad key
    or value raises ``ConfigurationError`` naming ``what`` and the key."""
    if config is None:
        return model()
    if isinstance(config, model):
        return config
    if isinstance(config, BaseModel):
        config = config.model_dump()
    try:
        return model.model_validate(dict(config))
    except ValidationError as exc:
        raise ConfigurationError(config_error_message(what, model, exc)) from exc


def validate_user_id(user_id: str) -> str:
    """User ids scope all data; they end up in file names and SQL, so keep them plain."""
    if not isinstance(user_id, str) or not _USER_ID.match(user_id):
        raise ValueError(f"invalid user_id {user_id!r}: use 1-128 characters from letters, digits and _.:@-")
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
    # True when calls for different users may run at the same time (the client and the service then
    # lock per user, not per backend). Declare it only after checking the backend's shared state.
    concurrent_users: ClassVar[bool] = False

    @classmethod
    def display_name(cls, config: BackendConfig) -> str:
        """The label result rows carry when the user gives none (e.g. ``mem0 (no LLM)``)."""
        return cls.name

    @classmethod
    def memory_depends_only_on_turns(cls, config: BackendConfig) -> bool:
        """True when the memory is a function of the set of stored turns alone.

        Then how sessions were split into ``ingest`` calls does not matter, and a per-question
        rebuild of memory equals one replay (``--replay rebuild`` reuses the single replay). The
        safe default is False: a backend that chunks sessions or extracts per ingest call differs.
        """
        return False

    @classmethod
    def llm_problem(cls, config: BackendConfig) -> str | None:
        """Why ``config`` cannot run without an LLM object passed in Python, in one line; None when it can.

        A backend that extracts with an LLM says so here when its config names none: ``memlab run``
        (which passes no LLM objects) refuses the row in preflight instead of failing the job.
        """
        return None

    def __init__(
        self,
        config: BackendConfig | Mapping[str, Any] | None = None,
        *,
        data_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.config = self.parse_config(config)
        # Where embeddings / LLM responses may be cached (the runner passes its cache; never a global).
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        # (user_id, session_id) -> messages of that session seen so far; lets a session arrive in parts.
        self._session_turns: dict[tuple[str, str], int] = {}
        # prompt tokens, completion tokens, cost of the ingest in flight: per thread, since ingests of
        # different users may run at once
        self._usage = threading.local()
        # What removes the items a forget request refers to (``memlab.forget.Remover``): None deletes
        # them at once; ``MemoryClient`` installs its undo ledger (``memlab.forget_ledger``).
        self.forget_remover: Any = None

    # ------------------------------------------------------------------ config
    @classmethod
    def parse_config(cls, config: BackendConfig | Mapping[str, Any] | None) -> BackendConfig:
        return parse_plugin_config(cls.Config, config, f"backend {cls.name or cls.__name__!r}")

    # ------------------------------------------------------------------ public API
    def ingest(self, session: Session | Mapping[str, Any], *, user_id: str) -> IngestReport:
        """Store a session (or the next part of one) in ``user_id``'s memory."""
        validate_user_id(user_id)
        if not isinstance(session, Session):
            session = Session.model_validate(session)
        first_turn = self._next_turn_index(user_id, session.id)
        self._usage.totals = [0, 0, 0.0]
        start = time.perf_counter()
        with data_subject.handling(user_id):  # cache entries written now hold this user's text
            self._ingest(session, user_id=user_id, first_turn=first_turn)
        self._record_turns(user_id, session.id, first_turn + len(session.messages))
        forgotten: list[ForgottenItem] = []
        if getattr(self.config, "forget_requests", False):  # the backend option (memlab.forget)
            from memlab.forget import honour_forget_requests

            forgotten = honour_forget_requests(
                self,
                session,
                user_id=user_id,
                matcher=self.forget_matcher(),
                remove=getattr(self, "forget_remover", None),
            )
        prompt_tokens, completion_tokens, cost = self._usage.totals
        return IngestReport(
            session_id=session.id,
            first_turn=first_turn,
            messages=len(session.messages),
            seconds=time.perf_counter() - start,
            prompt_tokens=int(prompt_tokens),
            completion_tokens=int(completion_tokens),
            cost_usd=float(cost),
            forgotten=forgotten,
        )

    def ingest_many(self, sessions: Sequence[Session | Mapping[str, Any]], *, user_id: str) -> list[IngestReport]:
        """Store several sessions (or parts of sessions) in order, as ``ingest`` one by one would.

        A backend that overrides ``_ingest_many`` stores them in one go (one embedding batch, one
        write); its reports then share the batch's time in proportion to each part's messages.
        Either all parts are stored or, if the batch fails, none of the batch's own writes.
        """
        validate_user_id(user_id)
        parsed = [s if isinstance(s, Session) else Session.model_validate(s) for s in sessions]
        if not _has_bulk_ingest(type(self)) or self._has_forget_requests(parsed):
            # Forget requests are honoured after each part, as ``ingest`` does: part by part.
            return [self.ingest(session, user_id=user_id) for session in parsed]
        parts: list[tuple[Session, int]] = []
        next_turn: dict[str, int] = {}
        for session in parsed:  # a session may come twice in one batch: its parts continue each other
            first = next_turn.get(session.id)
            if first is None:
                first = self._next_turn_index(user_id, session.id)
            parts.append((session, first))
            next_turn[session.id] = first + len(session.messages)
        self._usage.totals = [0, 0, 0.0]
        start = time.perf_counter()
        with data_subject.handling(user_id):  # cache entries written now hold this user's text
            self._ingest_many(parts, user_id=user_id)
        seconds = time.perf_counter() - start
        for session_id, total in next_turn.items():
            self._record_turns(user_id, session_id, total)
        prompt_tokens, completion_tokens, cost = self._usage.totals
        messages = sum(len(s.messages) for s in parsed)
        reports = []
        for number, (session, first) in enumerate(parts):
            share = len(session.messages) / messages if messages else 1 / len(parts)
            reports.append(
                IngestReport(
                    session_id=session.id,
                    first_turn=first,
                    messages=len(session.messages),
                    seconds=seconds * share,
                    # LLM usage of a batch is not split: the first part's report carries it.
                    prompt_tokens=int(prompt_tokens) if number == 0 else 0,
                    completion_tokens=int(completion_tokens) if number == 0 else 0,
                    cost_usd=float(cost) if number == 0 else 0.0,
                )
            )
        return reports

    def _has_forget_requests(self, sessions: Sequence[Session]) -> bool:
        if not getattr(self.config, "forget_requests", False):
            return False
        from memlab.forget import find_forget_requests

        return any(find_forget_requests(session) for session in sessions)

    def prepare(self, queries: Sequence[str]) -> None:
        """Compute ahead what retrieving for ``queries`` will need (e.g. embed them in one batch).

        The runner calls this once per job, before the replay, with the texts of the questions it
        will retrieve for. It must not change any retrieval, only make it cheaper. The default does
        nothing.
        """

    def add_messages(self, messages: list[Message], *, user_id: str, session_id: str) -> IngestReport:
        """Convenience for chatbots: append turns to a session."""
        return self.ingest(Session(id=session_id, messages=messages), user_id=user_id)

    def retrieve(self, query: str, *, user_id: str, k: int | None = None, filters: FilterLike = None) -> Retrieval:
        """Return what ``user_id``'s memory holds that is relevant to ``query`` (among the items
        ``filters`` selects, for backends with the 'filter' capability)."""
        validate_user_id(user_id)
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        if k is None:
            k = self.config.top_k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ValueError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
        selected = as_filter(filters)
        if selected is not None:
            self._require(Capability.FILTER)
        start = time.perf_counter()
        with data_subject.handling(user_id):
            if selected is None:
                result = self._retrieve(query, user_id=user_id, k=k)
            else:
                # Only backends declaring FILTER take the argument (third-party _retrieve may not).
                result = self._retrieve(query, user_id=user_id, k=k, filters=selected)  # type: ignore[call-arg]
        seconds = time.perf_counter() - start
        self._check_retrieval(result, k)
        if selected is not None and not all(selected.matches(item) for item in result.items):
            raise PluginValidationError(
                f"{self._plugin()}: a filtered _retrieve returned items the filter does not select"
            )
        tokens = result.tokens or count_tokens(result.context)
        return result.model_copy(update={"seconds": seconds, "tokens": tokens})

    def _plugin(self) -> str:
        """How a validation error names this plugin: its name and where its class lives."""
        return f"backend {self.name or type(self).__name__!r} ({type(self).__module__}.{type(self).__qualname__})"

    def _check_retrieval(self, result: Any, k: int) -> None:
        """Refuse what ``_retrieve`` must never return, naming the plugin (a ``model_construct`` skips
        pydantic, so the items' types are checked here too, before metrics read them)."""
        if not isinstance(result, Retrieval):
            raise PluginValidationError(
                f"{self._plugin()}: _retrieve returned {type(result).__name__}, expected memlab.Retrieval"
            )
        if not isinstance(result.items, list) or not isinstance(result.context, str):
            raise PluginValidationError(
                f"{self._plugin()}: _retrieve returned a Retrieval whose items are {type(result.items).__name__} "
                f"and context {type(result.context).__name__}, expected a list of memlab.MemoryItem and a str"
            )
        if len(result.items) > k:
            # Refused, not trimmed: the context was rendered from all of them, so dropping items
            # here would leave the reader text the metrics never saw.
            raise PluginValidationError(
                f"{self._plugin()}: _retrieve returned {len(result.items)} items for k={k}; a retrieval holds at "
                "most k items (k is the caller's bound for this call)"
            )
        for position, item in enumerate(result.items):
            if not isinstance(item, MemoryItem):
                raise PluginValidationError(
                    f"{self._plugin()}: _retrieve returned item {position} as {type(item).__name__} "
                    f"({str(item)[:60]!r}), expected memlab.MemoryItem"
                )
            score = item.score
            if score is not None and (
                isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score)
            ):
                # A NaN sorts anywhere: the ranking and every metric computed from it would be noise.
                raise PluginValidationError(
                    f"{self._plugin()}: _retrieve returned item {item.id!r} with score {score!r}; a score is a "
                    "finite number (higher is better) or None"
                )

    def reset(self, user_id: str) -> None:
        """Forget everything about ``user_id``."""
        validate_user_id(user_id)
        self._reset(user_id)
        for key in [key for key in list(self._session_turns) if key[0] == user_id]:
            self._session_turns.pop(key, None)

    def release(self, user_id: str) -> None:
        """Drop ``user_id``'s in-RAM state (the client's LRU of users calls this); the next call reloads it.

        Persistent backends that cache per-user state override this; data on disk is untouched.
        """

    def close(self) -> None:
        """Release files and models. Persistent backends flush here."""

    def check_ready(self) -> None:
        """Raise (any error, saying why) when the store cannot serve a read; the service's ``/readyz``.

        The default checks that the data directory is there and writable; backends with a store of
        their own (a database, an embedded engine) override this with a real read.
        """
        if self.data_dir is not None and not (self.data_dir.is_dir() and os.access(self.data_dir, os.R_OK | os.W_OK)):
            raise MemlabError(f"the data directory {self.data_dir} is missing or not readable and writable")

    def __enter__(self) -> Memory:
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

    def list_memories(self, *, user_id: str, filters: FilterLike = None) -> list[MemoryItem]:
        self._require(Capability.LIST)
        items = self._list(validate_user_id(user_id))
        selected = as_filter(filters)
        return items if selected is None else [item for item in items if selected.matches(item)]

    def update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        self._require(Capability.UPDATE)
        if not text.strip():
            raise ValueError("memory text must not be empty")
        with data_subject.handling(validate_user_id(user_id)):
            return self._update(item_id, text, user_id=user_id)

    def delete(self, item_id: str, *, user_id: str) -> None:
        self._require(Capability.DELETE)
        self._delete(item_id, user_id=validate_user_id(user_id))

    def history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        self._require(Capability.HISTORY)
        return self._history(item_id, user_id=validate_user_id(user_id))

    def export(self, user_id: str, *, filters: FilterLike = None) -> dict[str, Any]:
        """Everything this backend stores about ``user_id``, as one JSON-serialisable document.

        The default lists the user's items (backends with the ``list`` capability); backends that
        keep more (raw turns, versions, operation logs) override ``_export`` to include all of it.
        With ``filters`` the document is the matching items only (``items``, as ``list_memories``
        returns them; backends without 'list' filter their export's ``items``) and the filter used.
        """
        validate_user_id(user_id)
        selected = as_filter(filters)
        if selected is None:
            return {"backend": self.name, "user_id": user_id, **self._export(user_id)}
        if Capability.LIST in self.capabilities:
            items = self._list(user_id)
        else:
            items = [MemoryItem.model_validate(raw) for raw in self._export(user_id).get("items", [])]
        return {
            "backend": self.name,
            "user_id": user_id,
            "filters": selected.model_dump(mode="json", exclude_defaults=True),
            "items": [item.model_dump(mode="json") for item in items if selected.matches(item)],
        }

    # ------------------------------------------------------------------ for subclasses
    @abstractmethod
    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        """Store ``session.messages``; the first one is turn ``first_turn`` of session ``session.id``."""

    def _ingest_many(self, parts: list[tuple[Session, int]], *, user_id: str) -> None:
        """Store several (session, first turn) parts in one go, exactly as ``_ingest`` per part would.

        Not overridden, ``ingest_many`` calls ``ingest`` per part instead (with a report per part).
        """
        for session, first_turn in parts:
            self._ingest(session, user_id=user_id, first_turn=first_turn)

    @abstractmethod
    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        """Return up to ``k`` items for ``query`` and the context text rendered from them."""

    @abstractmethod
    def _reset(self, user_id: str) -> None:
        """Delete all of ``user_id``'s data."""

    def forget_matcher(self) -> Any:
        """How this backend decides what a forget request refers to (``memlab.forget.Matcher``); None:
        the semantic matcher (meaning and words). Backends with an LLM return ``memlab.forget.llm_matcher(llm)``."""
        return None

    def record_llm_usage(self, prompt_tokens: int = 0, completion_tokens: int = 0, cost_usd: float = 0.0) -> None:
        """Backends call this for every LLM call they make inside ``_ingest``; the report carries the sum."""
        totals = getattr(self._usage, "totals", None)
        if totals is None:  # called outside ingest (a backend's own maintenance): nothing to attribute
            return
        totals[0] += prompt_tokens
        totals[1] += completion_tokens
        totals[2] += cost_usd

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

    def _export(self, user_id: str) -> dict[str, Any]:
        if Capability.LIST not in self.capabilities:
            raise UnsupportedCapabilityError(
                f"backend {self.name!r} cannot export a user's data: it declares no 'list' capability "
                "and does not override _export"
            )
        return {"items": [item.model_dump(mode="json") for item in self._list(user_id)]}


def _has_bulk_ingest(cls: type[Memory]) -> bool:
    """True when ``cls`` stores a batch with its own ``_ingest_many``. A subclass that overrides
    ``_ingest`` alone (another store) does not inherit its parent's batch path."""
    bulk = next(c for c in cls.__mro__ if "_ingest_many" in c.__dict__)
    single = next(c for c in cls.__mro__ if "_ingest" in c.__dict__)
    return bulk is not Memory and issubclass(bulk, single)


def turn_source(session: Session, turn_index: int, message: Message) -> dict[str, Any]:
    """The standard ``MemoryItem.source`` of one stored turn: what metrics and date rendering read.

    ``timestamp`` (ISO 8601) is present only when the message has one (LoCoMo sessions carry dates),
    ``metadata`` only when the caller gave the message some.
    """
    source: dict[str, Any] = {"session_id": session.id, "turn_index": turn_index, "role": message.role}
    if message.timestamp is not None:
        source["timestamp"] = message.timestamp.isoformat()
    if message.metadata:
        source["metadata"] = dict(message.metadata)
    return source


def format_date(timestamp: str | datetime) -> str:
    """How every built-in backend shows a turn's date: ``8 May 2023, 13:56`` (time omitted at midnight)."""
    when = datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else timestamp
    day = f"{when.day} {when:%B %Y}"
    return day if (when.hour, when.minute) == (0, 0) else f"{day}, {when:%H:%M}"


def render_turns(items: list[MemoryItem]) -> str:
    """Render turn-like items as a transcript, one ``role: text`` line each.

    Items whose ``source`` has a ``timestamp`` get a ``DATE: ...`` header line whenever the date
    differs from the previous item's, so relative dates ("yesterday") can be resolved by a reader.
    """
    lines = []
    last_date: str | None = None
    for item in items:
        stamp = item.source.get("timestamp")
        if stamp:
            date = format_date(stamp)
            if date != last_date:
                lines.append(f"DATE: {date}")
                last_date = date
        role = item.source.get("role")
        lines.append(f"{role}: {item.text}" if role else item.text)
    return "\n".join(lines)


def message_json(role: str, content: str) -> str:
    """A message as PersonaMem's reference data loader hands it on, ``json.dumps`` of ``{"role",
    "content"}`` (ASCII-escaped): the text its RAG baseline embeds and its baseline prompt shows."""
    return json.dumps({"role": role, "content": content})
