"""``memlab mcp``: any memlab backend as Model Context Protocol tools, for agents.

    memlab mcp --backend rag --data-dir ./memdata --user alice                 # stdio, one user
    memlab mcp --backend rag --data-dir ./memdata --transport http \\
        --host 127.0.0.1 --port 8765 --api-keys-file keys.txt                   # streamable HTTP

Built on the official MCP Python SDK (``mcp`` 2.x, whose high-level server class is ``MCPServer``;
1.x called it ``FastMCP``). One ``MemoryClient`` serves every call, with the data-directory lock,
limits and errors of ``memlab serve``:

- **stdio**: the user is fixed by ``--user``; tools take no user argument.
- **streamable HTTP** (endpoint ``/mcp``): every HTTP request is authenticated with the API keys
  of ``memlab serve`` (``--api-keys-file``, ``MEMLAB_API_KEYS``; ``Authorization: Bearer KEY`` or
  ``X-API-Key: KEY``), a missing or wrong key is HTTP 401 before any MCP message is read. Tools
  take ``user_id``; a key bound to users may act only for them (a key bound to one user may leave
  ``user_id`` out), so an agent holding alice's key never reaches bob's memory.

Tools (``TOOL_NAMES``): ``add_memory``, ``search_memory``, ``forget_user`` always;
``list_memories`` and ``get_memory`` with the backend's 'list' capability, ``update_memory`` with
'update', ``delete_memory`` with 'delete', ``memory_history`` with 'history', ``export_memories``
when the backend can export, ``restore_memory`` (undo what a forget request removed) with 'list'
and 'delete'. A tool the backend cannot serve is not offered at all. Mistakes
(an unknown or foreign id, a bad filter, a key for another user) come back as tool errors with a
one-line message; the server keeps running. An argument a tool does not take is refused by name.

The server answers ``initialize`` and ``tools/list`` at once: the backend (whose model may take tens
of seconds to load) opens in a background thread (``BackgroundClient``, announced on stderr), and a
tool call made before it is open waits for it.
"""

# No "from __future__ import annotations": the SDK reads the tools' annotations, some built locally.

import argparse
import contextvars
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from memlab.client import MemoryClient
from memlab.errors import ConflictError, MemlabError, NotFoundError, ReadOnlyItemError, UnsupportedCapabilityError
from memlab.memory import Capability, IngestReport, Memory, MemoryFilter, validate_user_id
from memlab.pagination import MAX_PAGE_SIZE
from memlab.server.schemas import Text, _json_integer
from memlab.server.settings import ApiKey, ServerSettings
from memlab.types import ForgottenItem, MemoryItem, Role, TurnMetadata

TOOL_NAMES = (
    "add_memory",
    "search_memory",
    "list_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
    "memory_history",
    "export_memories",
    "forget_user",
    "restore_memory",
)
MCP_PATH = "/mcp"

# The API key of the HTTP request being served (set by the auth middleware, read by the tools).
_current_key: contextvars.ContextVar[ApiKey | None] = contextvars.ContextVar("memlab_mcp_key", default=None)


# ---------------------------------------------------------------------- tool arguments and results
class MessageArg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role = Field(description="who said it: user, assistant or system")
    content: str = Field(description="what was said")
    timestamp: str | None = Field(default=None, description="when (ISO 8601), if known")
    metadata: TurnMetadata = Field(default_factory=dict)


class AddResult(BaseModel):
    stored: str = Field(description="what was stored, in words")
    session_id: str
    first_turn: int = Field(description="turn index of the first stored message in its session")
    messages: int = Field(description="messages stored by this call (0 when an idempotency key repeated)")
    repeated: bool = Field(description="true when the idempotency key was used before: nothing new was stored")
    forgotten: list[ForgottenItem] = Field(
        default_factory=list,
        description="memories a forget request in these messages removed (restore_memory brings one back until "
        "restorable_until); empty when there was none or it matched nothing",
    )


class SearchResult(BaseModel):
    context: str = Field(description="the recalled memories as text, ready for a prompt")
    items: list[MemoryItem]


class ListResult(BaseModel):
    items: list[MemoryItem]
    next_cursor: str | None = Field(default=None, description="pass as cursor for the next page; null at the end")


class HistoryResult(BaseModel):
    item_id: str
    events: list[dict[str, Any]]
    next_cursor: str | None = None


class DoneResult(BaseModel):
    done: str = Field(description="what was done, in words")


Filters = Annotated[
    MemoryFilter | None,
    Field(description="only memories of these sessions (session_id), times (since/until) and metadata keys"),
]
Limit = Annotated[int | None, Field(ge=1, le=MAX_PAGE_SIZE, description="page size; omit for everything")]
Cursor = Annotated[str | None, Field(description="next_cursor of the previous page")]
ItemId = Annotated[
    Text, Field(min_length=1, max_length=512, description="a memory id from search or list")
]  # no NUL, as memlab serve


def _exports(memory: Memory | type[Memory]) -> bool:
    kind = memory if isinstance(memory, type) else type(memory)
    return Capability.LIST in memory.capabilities or kind._export is not Memory._export


def offered_tools(memory: Memory | type[Memory]) -> list[str]:
    """The tools this backend (an instance, or its class: capabilities are declared on the class)
    can serve (a tool needing a capability it lacks is left out)."""
    needs: dict[str, bool] = {
        "list_memories": Capability.LIST in memory.capabilities,
        "get_memory": Capability.LIST in memory.capabilities,
        "update_memory": Capability.UPDATE in memory.capabilities,
        "delete_memory": Capability.DELETE in memory.capabilities,
        "memory_history": Capability.HISTORY in memory.capabilities,
        "export_memories": _exports(memory),
        "restore_memory": Capability.DELETE in memory.capabilities and Capability.LIST in memory.capabilities,
    }
    return [name for name in TOOL_NAMES if needs.get(name, True)]


# ---------------------------------------------------------------------- the backend, opened in the background
class BackgroundClient:
    """The ``MemoryClient`` the tools use, opened in a background thread (a model may take tens of
    seconds to load) so the server answers ``initialize`` and ``tools/list`` at once. Attribute
    access waits until it is open (tool calls run in worker threads, so the event loop never
    waits); if it could not be opened, every call answers why."""

    def __init__(self, settings: ServerSettings, memory_type: type[Memory]) -> None:
        self.settings = settings
        self.backend = settings.backend
        self.memory_type = memory_type
        self._ready = threading.Event()
        self._client: MemoryClient | None = None
        self._lock: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, name="memlab-mcp-open", daemon=True)

    def start(self) -> None:
        print(
            f"memlab mcp: opening backend {self.backend!r} in the background (loading its model may take a "
            "while); tool calls wait for it",
            file=sys.stderr,
            flush=True,
        )
        self._thread.start()

    def _open(self) -> None:
        from memlab.server.cli import _describe

        start = time.perf_counter()
        try:
            from memlab.server.app import open_service_client  # FastAPI: imported here, off the start path

            self._client, self._lock = open_service_client(self.settings)  # the data-directory lock of memlab serve
        except BaseException as exc:  # noqa: BLE001 - reported on stderr and by every tool call
            self._error = exc
            print(f"memlab mcp: error: backend {self.backend!r} could not be opened: {_describe(exc)}", file=sys.stderr)
        else:
            print(
                f"memlab mcp: backend {self.backend!r} ready in {time.perf_counter() - start:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        finally:
            self._ready.set()

    def opened(self) -> MemoryClient:
        """The client, once open (waits for it); the reason as a ``MemlabError`` if it could not open."""
        self._ready.wait()
        if self._client is None:
            from memlab.server.cli import _describe

            raise MemlabError(f"the memory backend could not be opened: {_describe(self._error or RuntimeError())}")
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.opened(), name)

    def close(self) -> None:
        """Close the client (after it finished opening) and release the data directory."""
        self._thread.join()
        if self._client is not None:
            self._client.close()
        if self._lock is not None:
            self._lock.release()


# ---------------------------------------------------------------------- the server
class MemoryTools:
    """The tool bodies over one ``MemoryClient``; ``user_for`` decides whose memory a call touches."""

    def __init__(self, client: MemoryClient | BackgroundClient, settings: ServerSettings, *, user: str | None) -> None:
        from memlab.server.schemas import request_models

        self.client = client
        self.settings = settings
        self.fixed_user = validate_user_id(user) if user is not None else None
        self._add_model = request_models(settings).AddMessages  # the REST service's limits and checks

    def user_for(self, requested: str | None) -> str:
        if self.fixed_user is not None:
            if requested not in (None, self.fixed_user):
                raise PermissionError(f"this server acts for user {self.fixed_user!r} only")
            return self.fixed_user
        key = _current_key.get()
        if requested is None:
            if key is not None and len(key.users) == 1:
                return key.users[0]
            raise ValueError("user_id is required (this API key is not bound to exactly one user)")
        validate_user_id(requested)
        if key is not None and not key.allows(requested):
            raise PermissionError(f"this API key may not act for user {requested!r}")
        return requested

    def add_memory(
        self,
        user: str,
        messages: list[MessageArg],
        session_id: str,
        metadata: dict[str, Any] | None,
        idempotency_key: str | None,
    ) -> AddResult:
        body = self._add_model.model_validate(
            {
                "session_id": session_id,
                "messages": [m.model_dump(exclude_none=True) for m in messages],
                "metadata": metadata or {},
            }
        )
        before = self.client.memory._next_turn_index(user, session_id) if idempotency_key else None
        report: IngestReport = self.client.remember(
            user,
            [m.model_dump() for m in body.messages],  # type: ignore[attr-defined]
            session_id=session_id,
            metadata=metadata,
            idempotency_key=idempotency_key,
        )
        repeated = before is not None and before != report.first_turn
        last = report.first_turn + report.messages - 1
        what = (
            f"nothing new: key {idempotency_key!r} already stored {report.messages} message(s)"
            if repeated
            else f"{report.messages} message(s) as turns {report.first_turn}-{last} of session {session_id!r}"
        )
        if report.forgotten:
            what += f"; a forget request removed {len(report.forgotten)} memory(ies)"
        return AddResult(
            stored=what,
            session_id=report.session_id,
            first_turn=report.first_turn,
            messages=0 if repeated else report.messages,
            repeated=repeated,
            forgotten=report.forgotten,
        )


def _problem(error: Any) -> str:
    """One validation error as 'argument.path: rule' (no input echoed, no documentation URL)."""
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    rule = "required" if error["type"] == "missing" else str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {rule}"


def _tool_error(exc: BaseException) -> Exception:
    """A mistake the agent can fix, as the SDK's ToolError (one line, no traceback)."""
    from mcp.server.mcpserver.exceptions import ToolError

    if isinstance(exc, ValidationError):
        problems = list(dict.fromkeys(_problem(e) for e in exc.errors(include_url=False, include_input=False)))
        return ToolError(f"invalid arguments: {'; '.join(problems)}")
    kind = {
        NotFoundError: "not found",
        UnsupportedCapabilityError: "not supported",
        ConflictError: "conflict",
        ReadOnlyItemError: "not changeable",
        PermissionError: "forbidden",
    }
    for cls, label in kind.items():
        if isinstance(exc, cls):
            return ToolError(f"{label}: {exc}")
    return ToolError(str(exc))


def _guarded(body: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected errors into tool errors (the SDK reports anything else as a crash, hiding its text)."""
    import functools

    @functools.wraps(body)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return body(*args, **kwargs)
        except (ValidationError, ValueError, MemlabError, PermissionError, LookupError) as exc:
            raise _tool_error(exc) from None

    return call


def _checked_server_class() -> Any:
    """``MCPServer`` that refuses unknown arguments by name and reports invalid ones in one line.

    The SDK ignores an argument a tool does not take (over stdio a ``user_id`` would be dropped
    silently, and the call would act for the fixed user) and reports invalid arguments as a
    multi-line pydantic dump; the tool schemas say ``additionalProperties: false``.
    """
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    class CheckedMCPServer(MCPServer):
        def __init__(self, *args: Any, fixed_user: str | None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.fixed_user = fixed_user

        async def list_tools(self) -> list[Any]:
            listed = await super().list_tools()
            for tool in listed:
                tool.input_schema = {**tool.input_schema, "additionalProperties": False}
            return listed

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            schema = next((t.input_schema for t in await super().list_tools() if t.name == name), None)
            if schema is not None:
                takes = list(schema.get("properties", {}))
                unknown = [a for a in arguments if a not in takes]
                if unknown:
                    why = (
                        f" (this server acts for user {self.fixed_user!r} only, set by --user)"
                        if "user_id" in unknown and self.fixed_user is not None
                        else ""
                    )
                    raise ToolError(
                        f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}{why}; "
                        f"{name} takes {', '.join(takes) or 'no arguments'}"
                    )
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):  # the arguments do not fit the tool's schema
                    raise _tool_error(exc.__cause__) from exc.__cause__
                raise

    return CheckedMCPServer


def build_server(client: MemoryClient | BackgroundClient, settings: ServerSettings, *, user: str | None) -> Any:
    """The ``MCPServer`` with the tools ``client``'s backend can serve."""
    tools = MemoryTools(client, settings, user=user)
    kind = client.memory_type if isinstance(client, BackgroundClient) else type(client.memory)
    offered = set(offered_tools(kind))
    server = _checked_server_class()(
        fixed_user=user,
        name="memlab",
        instructions=(
            f"Long-term memory ({client.backend} backend). Store what the user tells you with add_memory and "
            "look it up with search_memory before answering questions about the user's past."
            + (" Pass user_id: the user whose memory each call reads or changes." if user is None else "")
        ),
    )
    multi = user is None  # over HTTP each call names its user (or the key's only user)
    UserArg = Annotated[
        str | None,
        Field(description="the user whose memory this reads or changes (may be left out when the key has one user)"),
    ]

    def add(fn: Callable[..., Any], description: str, *, read_only: bool) -> None:
        from mcp_types import ToolAnnotations

        if fn.__name__ in offered:
            server.add_tool(
                _guarded(fn),
                name=fn.__name__,
                description=description,
                annotations=ToolAnnotations(read_only_hint=read_only, destructive_hint=not read_only),
            )

    # Each tool body once; over stdio the user argument is dropped from the schema (see _fixed_user).
    def add_memory(
        messages: Annotated[list[MessageArg], Field(min_length=1, description="the messages to remember")],
        session_id: Annotated[str, Field(description="conversation the messages continue")] = "default",
        metadata: Annotated[TurnMetadata | None, Field(description="stored with each message")] = None,
        idempotency_key: Annotated[
            str | None, Field(description="repeat it when retrying: the messages are stored once")
        ] = None,
        user_id: UserArg = None,
    ) -> AddResult:
        return tools.add_memory(tools.user_for(user_id), messages, session_id, metadata, idempotency_key)

    def search_memory(
        query: Annotated[Text, Field(min_length=1, max_length=settings.max_query_chars, description="what to recall")],
        k: Annotated[
            int | None,
            Field(ge=1, le=settings.max_k, description="at most this many memories"),
            BeforeValidator(_json_integer),
        ] = None,
        filters: Filters = None,
        user_id: UserArg = None,
    ) -> SearchResult:
        found = client.recall(tools.user_for(user_id), query, k=k, filters=filters)
        return SearchResult(context=found.context, items=found.items)

    def list_memories(
        filters: Filters = None, limit: Limit = None, cursor: Cursor = None, user_id: UserArg = None
    ) -> ListResult:
        page = client.memories_page(tools.user_for(user_id), filters=filters, limit=limit, cursor=cursor)
        return ListResult(items=page.items, next_cursor=page.next_cursor)

    def get_memory(item_id: ItemId, user_id: UserArg = None) -> MemoryItem:
        return client.get(tools.user_for(user_id), item_id)

    def update_memory(
        item_id: ItemId,
        text: Annotated[Text, Field(min_length=1, max_length=settings.max_message_chars, pattern=r"\S")],
        user_id: UserArg = None,
    ) -> MemoryItem:
        return client.update(tools.user_for(user_id), item_id, text)

    def delete_memory(item_id: ItemId, user_id: UserArg = None) -> DoneResult:
        who = tools.user_for(user_id)
        client.delete(who, item_id)
        return DoneResult(done=f"deleted memory {item_id!r} of user {who!r}")

    def memory_history(
        item_id: ItemId, limit: Limit = None, cursor: Cursor = None, user_id: UserArg = None
    ) -> HistoryResult:
        page = client.history_page(tools.user_for(user_id), item_id, limit=limit, cursor=cursor)
        return HistoryResult(item_id=item_id, events=page.items, next_cursor=page.next_cursor)

    def export_memories(
        filters: Filters = None, limit: Limit = None, cursor: Cursor = None, user_id: UserArg = None
    ) -> dict[str, Any]:
        return client.export(tools.user_for(user_id), filters=filters, limit=limit, cursor=cursor)

    def forget_user(user_id: UserArg = None) -> DoneResult:
        who = tools.user_for(user_id)
        client.forget(who)
        return DoneResult(done=f"forgot everything stored about user {who!r}")

    def restore_memory(item_id: ItemId, user_id: UserArg = None) -> MemoryItem:
        return client.restore(tools.user_for(user_id), item_id)

    for fn, description, read_only in (
        (add_memory, "Remember messages (the next turns of a conversation) in the user's long-term memory.", False),
        (search_memory, "Recall what the user's memory holds about a query (optionally filtered).", True),
        (list_memories, "List the user's memories, a page at a time, optionally filtered.", True),
        (get_memory, "One of the user's memories by id.", True),
        (update_memory, "Replace the text of one of the user's memories.", False),
        (delete_memory, "Delete one of the user's memories.", False),
        (memory_history, "How one of the user's memories changed over time.", True),
        (export_memories, "Everything stored about the user, as one JSON document (or pages of it).", True),
        (forget_user, "Delete everything stored about the user. Cannot be undone.", False),
        (
            restore_memory,
            "Bring back a memory that a forget request in conversation removed (add_memory's 'forgotten'), "
            "within its undo window.",
            False,
        ),
    ):
        add(fn if multi else _fixed_user(fn), description, read_only=read_only)
    return server


def _fixed_user(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` without its ``user_id`` parameter (stdio: the user comes from the command line)."""
    import functools
    import inspect

    signature = inspect.signature(fn)
    params = [p for name, p in signature.parameters.items() if name != "user_id"]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    call.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    annotations = dict(getattr(fn, "__annotations__", {}))
    annotations.pop("user_id", None)
    call.__annotations__ = annotations
    return call


# ---------------------------------------------------------------------- HTTP authentication
ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]
]


class ApiKeyAuth:
    """ASGI middleware: every HTTP request needs a key of the ``KeyRing`` (401 otherwise)."""

    def __init__(self, app: Any, keys: Any) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") == "/healthz":  # liveness, needs no key
            from starlette.responses import JSONResponse

            await JSONResponse({"status": "ok"})(scope, receive, send)
            return
        if scope["type"] != "http" or not self.keys.enabled:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        presented = headers.get("x-api-key")
        auth = headers.get("authorization", "")
        if not presented and auth.lower().startswith("bearer "):
            presented = auth[7:].strip()
        key = self.keys.find(presented) if presented else None
        if key is None:
            from starlette.responses import JSONResponse

            message = "invalid API key" if presented else "missing API key: send 'Authorization: Bearer <key>'"
            code = "unauthorized"
            body = {"error": {"status": 401, "code": code, "message": message}}
            await JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        token = _current_key.set(key)
        try:
            await self.app(scope, receive, send)
        finally:
            _current_key.reset(token)


def http_app(server: Any, settings: ServerSettings) -> Any:
    """The streamable-HTTP ASGI app, authenticated. Stateless: each request carries its key."""
    from memlab.server.auth import KeyRing

    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        host=settings.host,
        max_request_body_size=settings.max_body_bytes,  # memlab serve's body limit
    )
    return ApiKeyAuth(app, KeyRing(settings))


# ---------------------------------------------------------------------- command line
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memlab mcp", description="Serve a memlab memory backend as MCP tools.")
    p.add_argument("--backend", default="full_context", help="registered backend name (default: full_context)")
    p.add_argument("--data-dir", help="directory where the backend keeps its state")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or http")
    p.add_argument("--user", help="stdio: the user whose memory the tools use")
    p.add_argument("--host", default="127.0.0.1", help="http: address to bind (non-loopback needs API keys)")
    p.add_argument("--port", type=int, default=8765, help="http: port (default 8765)")
    p.add_argument("--api-keys-file", metavar="PATH", help="http: API key entries, one a line (as memlab serve)")
    p.add_argument(
        "--allow-ephemeral", action="store_true", help="serve a backend whose memories do not survive a restart"
    )
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"], default="warning")
    return p


def build(argv: list[str]) -> tuple[argparse.Namespace, ServerSettings, dict[str, Any]]:
    from memlab.server.cli import _backend_options

    args, extra = _parser().parse_known_args(argv)
    transport: Literal["stdio", "http"] = args.transport
    if transport == "stdio" and not args.user:
        raise ValueError("--user is required with --transport stdio (the user whose memory the tools use)")
    if transport == "http" and args.user:
        raise ValueError("--user is for stdio; over http each call's API key decides the user")
    data: dict[str, Any] = {
        "backend": args.backend,
        "host": args.host,
        "port": args.port,
        "allow_ephemeral": args.allow_ephemeral,
        "log_level": args.log_level,
    }
    if args.data_dir:
        data["data_dir"] = args.data_dir
    if args.api_keys_file:
        data["api_keys_file"] = args.api_keys_file
    options = _backend_options(extra, args.backend)
    if options:
        data["backend_config"] = options
    settings = ServerSettings.model_validate(data).with_env_keys()
    if settings.data_dir is None and not settings.allow_ephemeral:
        raise ValueError("--data-dir is required so memories survive a restart (or pass --allow-ephemeral)")
    if transport == "http":
        settings.check_startable()  # a non-loopback address needs keys
    return args, settings, data


def _backend_class(settings: ServerSettings) -> type[Memory]:
    """The served backend's class, and the mistakes that need no model to find (an unknown backend,
    a bad option, a backend that forgets on restart without --allow-ephemeral), found at once."""
    from memlab.errors import ConfigurationError
    from memlab.registry import backends

    memory_type: type[Memory] = backends.get(settings.backend)
    config = getattr(memory_type, "Config", None)
    if config is not None:
        try:
            config.model_validate(settings.backend_config)
        except ValidationError as exc:
            problems = "; ".join(f"--{settings.backend}.{_problem(e)}" for e in exc.errors(include_url=False))
            raise ConfigurationError(f"invalid backend options: {problems}") from None
    if not settings.allow_ephemeral and Capability.PERSIST not in memory_type.capabilities:
        raise ConfigurationError(
            f"backend {settings.backend!r} does not declare the 'persist' capability: its memories would not "
            "survive a restart (pass --allow-ephemeral to serve it anyway)"
        )
    return memory_type


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``memlab mcp``; returns the exit code (2 with one ``memlab: error:`` line)."""
    from memlab.server.cli import _describe, fail

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        import mcp  # noqa: F401
    except ImportError:
        return fail("the MCP SDK is not installed: pip install 'memlab[mcp]'")
    try:
        args, settings, _ = build(argv)
        memory_type = _backend_class(settings)
    except (ValidationError, ValueError, MemlabError) as exc:
        return fail(_describe(exc))
    client = BackgroundClient(settings, memory_type)  # the model loads while the server already answers
    try:
        server = build_server(client, settings, user=args.user if args.transport == "stdio" else None)
        client.start()  # after the server is built: its imports do not compete with the model's
        print(
            f"memlab mcp: backend {settings.backend!r}, data {settings.data_dir or 'in-process'}, tools "
            f"{', '.join(offered_tools(memory_type))}, transport {args.transport}"
            + (f" http://{settings.host}:{settings.port}{MCP_PATH}" if args.transport == "http" else ""),
            file=sys.stderr,
            flush=True,
        )
        if args.transport == "stdio":
            server.run("stdio")
        else:
            import uvicorn

            if not settings.auth_enabled:
                print("memlab mcp: WARNING: no API key configured (loopback only)", file=sys.stderr)
            uvicorn.run(http_app(server, settings), host=settings.host, port=settings.port, log_level=args.log_level)
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
