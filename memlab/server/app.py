"""The FastAPI app factory: one ``MemoryClient`` behind per-user REST endpoints.

Every data endpoint is under ``/v1/users/{user_id}/...``: the user is part of the URL, each call is
scoped to that user, the API key must be allowed to act for them, and ids are looked up only among
that user's memories (another user's id is 404, never found). Endpoints are plain ``def`` functions,
so FastAPI runs them in its thread pool; the client's per-user locks let different users' calls, and
one user's searches, run at the same time, while a user's writes wait only for that user.

A service that opens its own backend holds ``<data-dir>/.serve`` with a ``DirectoryLock``: a second
``memlab serve`` on the same data directory is refused at once, naming the holder's pid.

Operations: ``/healthz`` is liveness (the process answers), ``/readyz`` readiness (the backend's
store answers a real read, within 5 s), ``/metrics`` the Prometheus metrics (``metrics``), ``/docs``
the API reference rendered by a page served from here (no CDN; ``docs_page``). Middleware, outermost
first: request telemetry (request id, access log, metrics), rate limit, key gate, body size.
"""

# No "from __future__ import annotations": FastAPI must see the locally built types, not strings.

import asyncio
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path as Path_  # fastapi's Path (path parameters) is used below
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, TypeVar

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from pydantic import StringConstraints, ValidationError

from memlab.client import MemoryClient
from memlab.errors import DirectoryInUseError
from memlab.idempotency import MAX_KEY_CHARS
from memlab.locks import DirectoryLock
from memlab.memory import Capability, IsoTime, MemoryFilter
from memlab.pagination import ID_CURSOR_PATTERN, MAX_PAGE_SIZE, POSITION_CURSOR_PATTERN
from memlab.server import metrics, protocol
from memlab.server.auth import KeyRing, authenticate, authorize_user
from memlab.server.docs_page import docs_html
from memlab.server.errors import install_error_handlers
from memlab.server.limits import BodySizeLimit, KeyGate, RateLimit
from memlab.server.schemas import (
    ID_PATTERN,
    ErrorResponse,
    ExportResponse,
    Health,
    HistoryResponse,
    InfoResponse,
    IngestResponse,
    MemoryList,
    SearchResponse,
    request_models,
)
from memlab.server.settings import ApiKey, ServerSettings
from memlab.server.telemetry import RequestTelemetry
from memlab.types import MemoryItem

if TYPE_CHECKING:
    from memlab.server.schemas import AddMessagesShape, SearchShape, UpdateShape

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
log = logging.getLogger("memlab.server")

UserId = Annotated[str, Path(pattern=ID_PATTERN, description="the user whose memory this call reads or changes")]
ItemId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=512,
        pattern=r"^[^\x00]+$",  # no store holds U+0000 (PostgreSQL text cannot): 422, not a database error
        description="a memory id from list or search, percent-encoded (e.g. '#' as %23)",
    ),
]

_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (401, 403, 413, 422)}
_WRITE_ERRORS: dict[int | str, dict[str, Any]] = {**_ERRORS, 409: {"model": ErrorResponse}}

Limit = Annotated[
    int | None, Query(ge=1, le=MAX_PAGE_SIZE, description="page size; without it everything comes in one page")
]
Cursor = Annotated[
    str | None, Query(pattern=ID_CURSOR_PATTERN, description="next_cursor of the previous page (opaque)")
]
HistoryCursor = Annotated[
    str | None, Query(pattern=POSITION_CURSOR_PATTERN, description="next_cursor of the previous page (opaque)")
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=MAX_KEY_CHARS,
        pattern=r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$",
        description="a retried request with the same key returns the first result and stores nothing new",
    ),
]


def list_filters(
    session_id: Annotated[list[str] | None, Query(description="only turns of these sessions (repeatable)")] = None,
    since: Annotated[IsoTime | None, Query(description="only turns at or after this time (ISO 8601)")] = None,
    until: Annotated[IsoTime | None, Query(description="only turns before this time (ISO 8601)")] = None,
    metadata: Annotated[
        list[Annotated[str, StringConstraints(pattern=r"^[^:\x00]{1,64}:[^\x00]{0,256}$")]] | None,
        Query(
            description="KEY:VALUE, repeatable: turns whose metadata KEY has VALUE (read as JSON when it "
            'parses: 3, true, null, "007"; else as a string), e.g. topic:work',
        ),
    ] = None,
) -> MemoryFilter | None:
    """The filter of a GET listing, from its query parameters."""
    import json

    wanted: dict[str, Any] = {}
    for entry in metadata or []:
        key, _, raw = entry.partition(":")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        wanted[key] = value if value is None or isinstance(value, str | int | float | bool) else raw
    try:
        selected = MemoryFilter.model_validate(
            {"session_id": session_id, "since": since, "until": until, "metadata": wanted}
        )
    except ValidationError as exc:  # a value the metadata schema does not allow (a string over 256 characters)
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'filter'}: {e['msg']}" for e in exc.errors())
        raise HTTPException(422, f"invalid filter: {problems}") from None
    return None if selected.empty else selected


Filters = Annotated[MemoryFilter | None, Depends(list_filters)]
_ITEM_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    404: {"model": ErrorResponse},
    405: {"model": ErrorResponse},
    409: {"model": ErrorResponse, "description": "the item cannot be changed this way (e.g. a raw turn)"},
}

# Which capability each method of each resource needs; unsupported -> 405 with an Allow header.
_RESOURCES = {
    "memories": {"GET": Capability.LIST},
    "memory": {"GET": Capability.LIST, "PATCH": Capability.UPDATE, "DELETE": Capability.DELETE},
    "history": {"GET": Capability.HISTORY},
}


# OpenAPI links: an id from a listing addresses the item endpoints (clients and fuzzers follow them).
_ITEM_LINKS = {
    name: {
        "operationId": op,
        "parameters": {"user_id": "$request.path.user_id", "item_id": "$response.body#/items/0/id"},
    }
    for name, op in (
        ("GetMemory", "get_memory"),
        ("UpdateMemory", "update_memory"),
        ("DeleteMemory", "delete_memory"),
        ("MemoryHistory", "memory_history"),
    )
}


SERVICE_LOCK_DIR = ".serve"  # under the data directory; the backend may hold the directory itself


def hold_data_dir(data_dir: Path_) -> DirectoryLock:
    """One service per data directory (with a database store the N workers skip this)."""
    lock = DirectoryLock(data_dir / SERVICE_LOCK_DIR, purpose="memlab serve")
    try:
        return lock.acquire()
    except DirectoryInUseError:
        holder = lock.holder()
        raise DirectoryInUseError(
            f"{data_dir} is in use: another {holder.get('purpose', 'memlab serve')} (pid {holder.get('pid', '?')}) "
            "serves it; stop that process or use another --data-dir"
        ) from None


def open_service_client(settings: ServerSettings) -> tuple[MemoryClient, DirectoryLock | None]:
    """The backend a service (``memlab serve``, ``memlab mcp``) serves, and its data-directory lock.

    N workers share a database store (it orders their writes); a file store has one writer, so the
    service holds ``<data-dir>/.serve`` (None with a database store). Release the lock after closing.
    """
    from memlab.pg import config_uses_database

    service_lock: DirectoryLock | None = None
    if settings.data_dir is not None and not config_uses_database(settings.backend_config):
        service_lock = hold_data_dir(settings.data_dir)
    try:
        client = MemoryClient(
            settings.backend,
            settings.backend_config,
            data_dir=settings.data_dir,
            require_persistence=not settings.allow_ephemeral,
            max_k=settings.max_k,
            user_cache_size=settings.user_cache_size,
            batch_queries=settings.batch_queries,
            forget_undo_hours=settings.forget_undo_hours,
        )
    except BaseException:
        if service_lock is not None:
            service_lock.release()
        raise
    return client, service_lock


def create_app(settings: ServerSettings, client: MemoryClient | None = None) -> FastAPI:
    """Build the service. Opens the backend from ``settings`` unless a ``client`` is given.

    Raises ``DirectoryInUseError`` when another service holds the data directory, and
    ``ConfigurationError`` for unusable API keys.
    """
    keys = KeyRing(settings)
    service_lock: DirectoryLock | None = None
    if client is None:
        client, service_lock = open_service_client(settings)
    models = request_models(settings)
    if TYPE_CHECKING:  # the models are built at runtime (limits from settings); mypy checks their shapes
        AddMessages: TypeAlias = AddMessagesShape
        Search: TypeAlias = SearchShape
        Update: TypeAlias = UpdateShape
    else:
        AddMessages, Search, Update = models.AddMessages, models.Search, models.Update

    stopping = threading.Event()

    def begin_shutdown() -> None:
        """SIGTERM/SIGINT: not ready any more, and long ingests stop between batches (storing nothing)."""
        stopping.set()
        interrupt = getattr(client.memory, "interrupt", None)
        if callable(interrupt):
            interrupt()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        restore = _chain_shutdown_signals(begin_shutdown)
        try:
            yield
        finally:
            restore()
            client.close()  # flush persistent backends on shutdown
            if service_lock is not None:
                service_lock.release()

    protocol.configure(
        protocol.ConnectionLimits(max_connections=settings.max_connections, request_timeout=settings.request_timeout)
    )
    metrics.BACKEND_INFO.set(1, backend=client.backend, persistent=str(client.persistent).lower())
    app = FastAPI(
        title="memlab memory service",
        version="1",
        description=(
            "Long-term user memory over HTTP. Authenticate with 'Authorization: Bearer <key>' or "
            "'X-API-Key: <key>'. Errors are JSON: {\"error\": {status, code, message, details?}}. "
            "An operation the backend does not support answers 405 (code capability_not_supported)."
        ),
        lifespan=lifespan,
        docs_url=None,  # FastAPI's page loads Swagger UI from a CDN: blank offline; /docs is served below
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.client = client
    app.state.keys = keys
    app.state.begin_shutdown = begin_shutdown
    # add_middleware puts each one outside the ones before: the last added runs first.
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(KeyGate, keys=keys)
    if settings.rate_per_second is not None:
        app.add_middleware(RateLimit, rate=settings.rate_per_second, backend=client.backend)
    app.add_middleware(RequestTelemetry, backend=client.backend, log_user_ids=settings.log_user_ids)
    install_error_handlers(app)

    def user_scope(user_id: UserId, key: ApiKey | None = Depends(authenticate)) -> str:
        authorize_user(user_id, key)
        return user_id

    User = Annotated[str, Depends(user_scope)]

    def require(resource: str, method: str) -> None:
        needed = _RESOURCES[resource][method]
        if not client.supports(needed):
            allowed = ", ".join(m for m, cap in _RESOURCES[resource].items() if client.supports(cap))
            raise HTTPException(
                405,
                f"backend {client.backend!r} does not support {needed.value!r}, which {method} on this resource needs "
                f"(its capabilities: {', '.join(sorted(c.value for c in client.capabilities)) or 'none'})",
                headers={"Allow": allowed},
            )

    @app.get("/healthz", response_model=Health, tags=["service"], operation_id="healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers (it touches no store, so a slow store cannot fail it); needs no key."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        response_model=Health,
        tags=["service"],
        operation_id="readyz",
        responses={503: {"model": ErrorResponse}},
    )
    async def readyz() -> Any:
        """Readiness: the backend's store answers a real read within 5 s, and the service is not stopping."""
        if stopping.is_set():
            return JSONResponse(
                {"error": {"status": 503, "code": "shutting_down", "message": "the service is shutting down"}},
                status_code=503,
            )
        try:
            await asyncio.wait_for(run_in_threadpool(client.check_ready), timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - any failure means not ready; the reason is logged
            reason = "the store did not answer within 5 s" if isinstance(exc, TimeoutError) else str(exc)
            log.warning("not ready: %s: %s", type(exc).__name__, reason)
            return JSONResponse(
                {"error": {"status": 503, "code": "not_ready", "message": f"the memory store is not ready: {reason}"}},
                status_code=503,
            )
        return {"status": "ok"}

    @app.get("/metrics", tags=["service"], operation_id="metrics", response_class=PlainTextResponse)
    async def metrics_endpoint() -> PlainTextResponse:
        """Prometheus metrics of this process (text format 0.0.4); needs no key, holds no user data."""
        return PlainTextResponse(metrics.render(), media_type=metrics.CONTENT_TYPE)

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        """The API reference, rendered in the browser from /openapi.json by a page served from here."""
        return HTMLResponse(docs_html(app))

    if settings.ui:  # a static page; all it shows comes from /v1 with the user's key
        from memlab.ui.inspector import mount_inspector

        mount_inspector(app)

    @app.get("/v1/info", response_model=InfoResponse, responses=_ERRORS, tags=["service"], operation_id="info")
    def info(key: ApiKey | None = Depends(authenticate)) -> dict[str, Any]:
        """The backend, its capabilities, whether data survives a restart, and the request limits."""
        return {
            "backend": client.backend,
            "description": client.memory.description,
            "capabilities": sorted(c.value for c in client.capabilities),
            "persistent": client.persistent,
            "auth": settings.auth_enabled,
            "limits": {
                "max_body_bytes": settings.max_body_bytes,
                "max_messages": settings.max_messages,
                "max_message_chars": settings.max_message_chars,
                "max_query_chars": settings.max_query_chars,
                "max_k": settings.max_k,
                "user_cache_size": settings.user_cache_size,
            },
        }

    def user_route(method: str, path: str, **options: Any) -> Callable[[Endpoint], Endpoint]:
        """Register a data endpoint under ``/v1/users/{user_id}``; its OpenAPI operation id is its name."""

        def register(endpoint: Endpoint) -> Endpoint:
            app.add_api_route(
                f"/v1/users/{{user_id}}{path}",
                endpoint,
                methods=[method],
                tags=["memory"],
                operation_id=endpoint.__name__,
                **options,
            )
            return endpoint

        return register

    @user_route("POST", "/messages", response_model=IngestResponse, status_code=201, responses=_WRITE_ERRORS)
    def add_messages(user_id: User, body: AddMessages, idempotency_key: IdempotencyKey = None) -> Any:
        """Store messages as the next turns of a session of this user.

        With an ``Idempotency-Key`` header a retry (same key, same body) returns the first answer
        and stores nothing new, also after a restart; the same key with another body is 409."""
        report = client.remember(
            user_id,
            [m.model_dump() for m in body.messages],
            session_id=body.session_id,
            metadata=body.metadata,
            idempotency_key=idempotency_key,
        )
        metrics.INGEST_MESSAGES.inc(len(body.messages), backend=client.backend)
        return report

    @user_route("POST", "/search", response_model=SearchResponse, responses={**_ERRORS, 405: {"model": ErrorResponse}})
    def search(user_id: User, body: Search) -> Any:
        """What this user's memory holds that is relevant to the query (among the turns ``filters`` selects)."""
        return client.recall(user_id, body.query, k=body.k, filters=body.filters)

    @user_route(
        "GET",
        "/memories",
        response_model=MemoryList,
        responses=_ITEM_ERRORS,
        openapi_extra={"responses": {"200": {"links": _ITEM_LINKS}}},
    )
    def list_memories(user_id: User, filters: Filters, limit: Limit = None, cursor: Cursor = None) -> Any:
        """This user's memories (backends with the 'list' capability), filtered, a page at a time."""
        require("memories", "GET")
        page = client.memories_page(user_id, filters=filters, limit=limit, cursor=cursor)
        return {"items": page.items, "next_cursor": page.next_cursor}

    @user_route("GET", "/export", response_model=ExportResponse, responses={**_ERRORS, 405: {"model": ErrorResponse}})
    def export_user(user_id: User, filters: Filters, limit: Limit = None, cursor: Cursor = None) -> Any:
        """Everything stored about this user, as one JSON document (backend, user_id, items, ...);
        with filters the matching items; with limit/cursor the items a page at a time."""
        return client.export(user_id, filters=filters, limit=limit, cursor=cursor)

    @user_route("DELETE", "", status_code=204, responses=_ERRORS)
    def forget_user(user_id: User) -> Response:
        """Delete everything stored about this user."""
        client.forget(user_id)
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    @user_route("GET", "/memories/{item_id}/history", response_model=HistoryResponse, responses=_ITEM_ERRORS)
    def memory_history(user_id: User, item_id: ItemId, limit: Limit = None, cursor: HistoryCursor = None) -> Any:
        """How one memory changed over time (backends with the 'history' capability; for every backend
        that can delete, what forget requests did to it: ``reason: "forget_request"``), oldest first."""
        if not client.supports(Capability.DELETE):
            require("history", "GET")
        page = client.history_page(user_id, item_id, limit=limit, cursor=cursor)
        return {"item_id": item_id, "events": page.items, "next_cursor": page.next_cursor}

    @user_route("GET", "/memories/{item_id}", response_model=MemoryItem, responses=_ITEM_ERRORS)
    def get_memory(user_id: User, item_id: ItemId) -> Any:
        """One of this user's memories by id."""
        require("memory", "GET")
        return client.get(user_id, item_id)

    @user_route("PATCH", "/memories/{item_id}", response_model=MemoryItem, responses=_ITEM_ERRORS)
    def update_memory(user_id: User, item_id: ItemId, body: Update) -> Any:
        """Replace the text of one of this user's memories."""
        require("memory", "PATCH")
        return client.update(user_id, item_id, body.text)

    @user_route("POST", "/memories/{item_id}/restore", response_model=MemoryItem, responses=_ITEM_ERRORS)
    def restore_memory(user_id: User, item_id: ItemId) -> Any:
        """Bring back a memory a forget request in conversation removed (listed in the add's
        ``forgotten``), within its undo window; 404 for any other id or once the window has ended."""
        require("memory", "DELETE")
        return client.restore(user_id, item_id)

    @user_route("DELETE", "/memories/{item_id}", status_code=204, responses=_ITEM_ERRORS)
    def delete_memory(user_id: User, item_id: ItemId) -> Response:
        """Delete one of this user's memories."""
        require("memory", "DELETE")
        client.delete(user_id, item_id)
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    return app


def _chain_shutdown_signals(callback: Callable[[], None]) -> Callable[[], None]:
    """Run ``callback`` first when SIGTERM or SIGINT arrives, then the handler already installed
    (uvicorn's, which starts its graceful shutdown). Returns what restores the previous handlers.
    Only the main thread may set handlers (a test client runs the app in another)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        before = signal.getsignal(sig)

        def handler(signum: int, frame: Any, before: Any = before) -> None:
            callback()
            if callable(before):
                before(signum, frame)
            else:  # the default action (or ignore): as if this handler had never been installed
                signal.signal(signum, before)
                signal.raise_signal(signum)

        previous[sig] = before
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, before in previous.items():
            signal.signal(sig, before)

    return restore
