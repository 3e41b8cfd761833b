"""Request and response bodies of the REST service.

Request models are built per app from its ``ServerSettings`` so the configured limits (messages per
request, characters per message and query, largest k) are part of the OpenAPI schema and enforced
by validation (422), not only documented.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from memlab.memory import IngestReport, MemoryFilter
from memlab.server.settings import ServerSettings
from memlab.types import NO_NUL, MemoryItem, Role, TurnMetadata

ID_PATTERN = r"^[A-Za-z0-9_.:@\-]{1,128}$"


class ErrorBody(BaseModel):
    status: int
    code: str = Field(description="stable machine-readable reason, e.g. not_found, capability_not_supported")
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class SearchResponse(BaseModel):
    items: list[MemoryItem]
    context: str = Field(description="the items rendered as the text an LLM would see")
    tokens: int
    seconds: float


NEXT_CURSOR_DOC = "pass as ?cursor= to get the next page; null after the last page"


class MemoryList(BaseModel):
    items: list[MemoryItem]
    next_cursor: str | None = Field(default=None, description=NEXT_CURSOR_DOC)


class HistoryResponse(BaseModel):
    item_id: str
    events: list[dict[str, Any]]
    next_cursor: str | None = Field(default=None, description=NEXT_CURSOR_DOC)


class InfoResponse(BaseModel):
    backend: str
    description: str
    capabilities: list[str]
    persistent: bool
    auth: bool
    limits: dict[str, int]


class ExportResponse(BaseModel):
    """Everything stored about one user; what else a backend keeps (turns, versions) follows these fields."""

    model_config = ConfigDict(extra="allow")

    backend: str
    user_id: str


class Health(BaseModel):
    status: str


IngestResponse = IngestReport


# What the endpoints read from the request models, for the type checker: request_models() builds the
# models themselves at runtime, with this service's limits, so mypy cannot see their fields.
class MessageInShape(Protocol):
    def model_dump(self) -> dict[str, Any]: ...


class AddMessagesShape(Protocol):
    session_id: str
    messages: list[MessageInShape]
    metadata: dict[str, Any]


class SearchShape(Protocol):
    query: str
    k: int | None
    filters: MemoryFilter | None


class UpdateShape(Protocol):
    text: str


@dataclass(frozen=True)
class RequestModels:
    AddMessages: type[BaseModel]
    Search: type[BaseModel]
    Update: type[BaseModel]


def _iso_string(value: Any) -> Any:
    # The schema says an ISO 8601 string; pydantic would otherwise read numbers as Unix times.
    if value is not None and not isinstance(value, str):
        raise ValueError("timestamp must be an ISO 8601 date-time string")
    return value


def _json_integer(value: Any) -> Any:
    # What JSON Schema calls an integer (5, 5.0); pydantic would also read true as 1 and "5" as 5.
    if isinstance(value, (bool, str)):
        raise ValueError("must be a JSON integer (not true/false or a string)")
    return value


def _no_nul(value: str) -> str:
    # Every store answers alike: PostgreSQL text cannot hold U+0000, so no store accepts it.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters (U+0000)")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]


def request_models(settings: ServerSettings) -> RequestModels:
    class MessageIn(BaseModel):
        model_config = ConfigDict(extra="forbid")

        role: Role
        content: Text = Field(max_length=settings.max_message_chars, json_schema_extra={"pattern": NO_NUL})
        timestamp: Annotated[datetime | None, BeforeValidator(_iso_string)] = None
        metadata: TurnMetadata = Field(default_factory=dict)

    class AddMessagesRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")

        session_id: str = Field(
            default="default",
            pattern=ID_PATTERN,
            description="conversation these messages continue; sent again, it continues that session",
        )
        messages: list[MessageIn] = Field(min_length=1, max_length=settings.max_messages)
        metadata: TurnMetadata = Field(default_factory=dict)  # stored with every message (a message's own keys win)

    class SearchRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")

        query: Text = Field(min_length=1, max_length=settings.max_query_chars, json_schema_extra={"pattern": NO_NUL})
        k: Annotated[int, Field(ge=1, le=settings.max_k), BeforeValidator(_json_integer)] | None = Field(
            default=None, description="items (default: backend top_k)"
        )
        filters: MemoryFilter | None = Field(
            default=None, description="search only among turns of these sessions, times and metadata"
        )

    class UpdateRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")

        text: Text = Field(
            min_length=1,
            max_length=settings.max_message_chars,
            pattern=r"\S",
            json_schema_extra={"pattern": r"^[^\x00]*\S[^\x00]*$"},
        )

    return RequestModels(AddMessagesRequest, SearchRequest, UpdateRequest)
