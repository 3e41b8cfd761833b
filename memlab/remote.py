"""Clients for a running ``memlab serve``: ``RemoteMemoryClient`` (blocking) and ``AsyncRemoteMemoryClient``.

They have ``MemoryClient``'s methods (``remember``, ``recall``, ``memories``, ``memories_page``,
``get``, ``update``, ``delete``, ``restore``, ``history``, ``history_page``, ``export``, ``forget``, ``supports``)
over the REST API, so code written against the in-process client runs against a service::

    with RemoteMemoryClient("http://127.0.0.1:8000", api_key="...") as memory:
        memory.remember("alice", [("user", "I adopted a cat named Pixel.")], metadata={"channel": "app"})
        memory.recall("alice", "what is my cat called?", filters={"metadata": {"channel": "app"}})

Retries: a request that failed to connect, timed out, or got 502/503/504 is sent again (``retries``
times, with exponential ``backoff``). Every ``remember`` carries an ``Idempotency-Key`` (a fresh
one per call unless given), so a retried write is stored once even when the first attempt was
stored but its answer was lost; a retried ``delete`` whose first attempt went through reads the
404 as done.

Errors are typed from the API's error body (``{"error": {status, code, message}}``):
401 ``AuthenticationError``, 403 ``PermissionDeniedError``, 404 ``RemoteNotFoundError`` (a
``memlab.errors.NotFoundError``), 405 ``CapabilityNotSupportedError`` (an
``UnsupportedCapabilityError``), 409 ``RemoteConflictError`` (a ``ConflictError``), 413
``PayloadTooLargeError``, 422 ``RemoteValidationError`` (a ``ValueError``), 503
``ServiceUnavailableError``; anything else ``RemoteError``. Each has ``status``, ``code`` and the
server's ``message``.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from memlab.client import DEFAULT_SESSION_ID, MessageLike, to_message
from memlab.errors import ConflictError, MemlabError, NotFoundError, UnsupportedCapabilityError
from memlab.memory import Capability, FilterLike, IngestReport, as_filter, validate_user_id
from memlab.pagination import Page
from memlab.types import MemoryItem, Retrieval

__all__ = [
    "RemoteMemoryClient",
    "AsyncRemoteMemoryClient",
    "RemoteError",
    "AuthenticationError",
    "PermissionDeniedError",
    "RemoteNotFoundError",
    "CapabilityNotSupportedError",
    "RemoteConflictError",
    "PayloadTooLargeError",
    "RemoteValidationError",
    "ServiceUnavailableError",
]

RETRY_STATUSES = frozenset({502, 503, 504})
DEFAULT_TIMEOUT = 30.0


# ---------------------------------------------------------------------- errors
class RemoteError(MemlabError):
    """An error answer of the memory service."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class AuthenticationError(RemoteError):
    """401: the API key is missing or wrong."""


class PermissionDeniedError(RemoteError):
    """403: the API key may not act for this user."""


class RemoteNotFoundError(RemoteError, NotFoundError):
    """404: no such memory for this user (or no such endpoint)."""

    def __str__(self) -> str:
        return RemoteError.__str__(self)


class CapabilityNotSupportedError(RemoteError, UnsupportedCapabilityError):
    """405: the served backend does not support this operation."""


class RemoteConflictError(RemoteError, ConflictError):
    """409: an idempotency key reused for another write, or still in progress."""


class PayloadTooLargeError(RemoteError):
    """413: the request body is over the service's limit."""


class RemoteValidationError(RemoteError, ValueError):
    """422: the request was invalid (the message names the field)."""


class ServiceUnavailableError(RemoteError):
    """503: the service cannot answer now (retried first)."""


_ERRORS: dict[int, type[RemoteError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: RemoteNotFoundError,
    405: CapabilityNotSupportedError,
    409: RemoteConflictError,
    413: PayloadTooLargeError,
    422: RemoteValidationError,
    503: ServiceUnavailableError,
}


def error_from(response: httpx.Response) -> RemoteError:
    """The typed error for an error answer (its JSON body when it has one)."""
    code, message = "error", response.reason_phrase or "error"
    try:
        body = response.json().get("error", {})
        code, message = str(body.get("code", code)), str(body.get("message", message))
    except (ValueError, AttributeError):
        if response.text:
            message = response.text[:500]
    return _ERRORS.get(response.status_code, RemoteError)(response.status_code, code, message)


# ---------------------------------------------------------------------- requests, built once for both clients
@dataclass
class _Call:
    """One API request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], Any]
    json: Any = None
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    gone_is_done: bool = False  # a retried DELETE may find its first attempt went through


def _user_path(user_id: str, rest: str = "") -> str:
    return f"/v1/users/{quote(validate_user_id(user_id), safe='')}{rest}"


def _item_path(user_id: str, item_id: str, rest: str = "") -> str:
    return _user_path(user_id, f"/memories/{quote(item_id, safe='')}{rest}")


def _filter_params(filters: FilterLike) -> list[tuple[str, str]]:
    import json

    selected = as_filter(filters)
    if selected is None:
        return []
    params = [("session_id", s) for s in selected.session_id or []]
    params += [
        (name, when.isoformat()) for name, when in (("since", selected.since), ("until", selected.until)) if when
    ]
    params += [("metadata", f"{key}:{json.dumps(value)}") for key, value in selected.metadata.items()]
    return params


def _page_params(limit: int | None, cursor: str | None) -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in (("limit", limit), ("cursor", cursor)) if v is not None]


def _nothing(response: httpx.Response) -> None:
    return None


class _Api:
    """The requests behind each client method (what both clients send and read)."""

    @staticmethod
    def info() -> _Call:
        return _Call("GET", "/v1/info", lambda r: r.json())

    @staticmethod
    def ready() -> _Call:
        return _Call("GET", "/readyz", _nothing)

    @staticmethod
    def remember(
        user_id: str,
        messages: Iterable[MessageLike],
        session_id: str,
        metadata: Mapping[str, Any] | None,
        idempotency_key: str | None,
    ) -> _Call:
        body: dict[str, Any] = {
            "session_id": session_id,
            "messages": [to_message(m).model_dump(mode="json", exclude_none=True) for m in messages],
        }
        if metadata:
            body["metadata"] = dict(metadata)
        key = idempotency_key or f"memlab-{uuid.uuid4()}"
        return _Call(
            "POST",
            _user_path(user_id, "/messages"),
            lambda r: IngestReport.model_validate(r.json()),
            json=body,
            headers={"Idempotency-Key": key},
        )

    @staticmethod
    def recall(user_id: str, query: str, k: int | None, filters: FilterLike) -> _Call:
        body: dict[str, Any] = {"query": query}
        if k is not None:
            body["k"] = k
        selected = as_filter(filters)
        if selected is not None:
            body["filters"] = selected.model_dump(mode="json", exclude_defaults=True)
        return _Call("POST", _user_path(user_id, "/search"), lambda r: Retrieval.model_validate(r.json()), json=body)

    @staticmethod
    def forget(user_id: str) -> _Call:
        return _Call("DELETE", _user_path(user_id), _nothing)

    @staticmethod
    def export(user_id: str, filters: FilterLike, limit: int | None, cursor: str | None) -> _Call:
        params = _filter_params(filters) + _page_params(limit, cursor)
        return _Call("GET", _user_path(user_id, "/export"), lambda r: r.json(), params=params)

    @staticmethod
    def memories_page(user_id: str, filters: FilterLike, limit: int | None, cursor: str | None) -> _Call:
        def parse(response: httpx.Response) -> Page[MemoryItem]:
            data = response.json()
            return Page([MemoryItem.model_validate(i) for i in data["items"]], data.get("next_cursor"))

        params = _filter_params(filters) + _page_params(limit, cursor)
        return _Call("GET", _user_path(user_id, "/memories"), parse, params=params)

    @staticmethod
    def get(user_id: str, item_id: str) -> _Call:
        return _Call("GET", _item_path(user_id, item_id), lambda r: MemoryItem.model_validate(r.json()))

    @staticmethod
    def update(user_id: str, item_id: str, text: str) -> _Call:
        parse = lambda r: MemoryItem.model_validate(r.json())  # noqa: E731
        return _Call("PATCH", _item_path(user_id, item_id), parse, json={"text": text})

    @staticmethod
    def delete(user_id: str, item_id: str) -> _Call:
        return _Call("DELETE", _item_path(user_id, item_id), _nothing, gone_is_done=True)

    @staticmethod
    def restore(user_id: str, item_id: str) -> _Call:
        parse = lambda r: MemoryItem.model_validate(r.json())  # noqa: E731
        return _Call("POST", _item_path(user_id, item_id, "/restore"), parse)

    @staticmethod
    def history_page(user_id: str, item_id: str, limit: int | None, cursor: str | None) -> _Call:
        def parse(response: httpx.Response) -> Page[dict[str, Any]]:
            data = response.json()
            return Page(list(data["events"]), data.get("next_cursor"))

        return _Call("GET", _item_path(user_id, item_id, "/history"), parse, params=_page_params(limit, cursor))


class _Base:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.5,
        page_size: int = 500,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.base_url = base_url.rstrip("/")
        self.retries, self.backoff, self.page_size = retries, backoff, page_size
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._info: dict[str, Any] | None = None
        self._local_lock = threading.Lock()
        self._user_dirs: set[Path] = set()
        self._forgotten: dict[str, int] = {}

    # ------------------------------------------------------------------ files kept beside the memory (local)
    USER_FILE_DIRS = "user_file_dirs.json"  # MemoryClient's listing; a remote client keeps its own in memory

    def register_user_files(self, directory: str | Path) -> None:
        """``directory/<user_id>/`` (on this machine) holds files about a user that ``forget`` through
        this client deletes too (the LangChain history's transcripts register themselves)."""
        with self._local_lock:
            self._user_dirs.add(Path(directory).resolve())

    def user_file_dirs(self) -> list[Path]:
        """The directories registered with ``register_user_files`` on this client."""
        with self._local_lock:
            return sorted(self._user_dirs)

    def forget_count(self, user_id: str) -> int:
        """How often ``user_id`` was forgotten through this client (a history compares it to drop its copy)."""
        with self._local_lock:
            return self._forgotten.get(user_id, 0)

    def _forgot(self, user_id: str) -> None:
        """After the service forgot ``user_id``: its registered local files go too."""
        for directory in self.user_file_dirs():
            target = directory / user_id
            if target.exists():
                shutil.rmtree(target)
        with self._local_lock:
            self._forgotten[user_id] = self._forgotten.get(user_id, 0) + 1

    def _delay(self, attempt: int) -> float:
        return float(self.backoff * (2**attempt))

    @staticmethod
    def _finish(call: _Call, response: httpx.Response, retried: bool) -> Any:
        if response.status_code == 404 and call.gone_is_done and retried:
            return None
        if response.status_code >= 400:
            raise error_from(response)
        return call.parse(response)

    def _remember_call(self, user_id: str, messages: Iterable[MessageLike], **options: Any) -> _Call:
        return _Api.remember(
            user_id,
            list(messages),
            options.get("session_id", DEFAULT_SESSION_ID),
            options.get("metadata"),
            options.get("idempotency_key"),
        )

    def _capabilities(self) -> frozenset[Capability]:
        assert self._info is not None
        return frozenset(Capability(c) for c in self._info["capabilities"] if c in Capability._value2member_map_)


_RETRYABLE = (httpx.TransportError,)  # connect errors, timeouts, a connection dropped mid-answer


def _retryable(response: httpx.Response) -> bool:
    if response.status_code in RETRY_STATUSES:
        return True
    # 409 write_in_progress: our own earlier attempt is still running on the server
    return response.status_code == 409 and b"write_in_progress" in response.content


class RemoteMemoryClient(_Base):
    """``MemoryClient``'s methods over a ``memlab serve`` (blocking; see the module doc)."""

    def __init__(self, base_url: str, api_key: str | None = None, **options: Any) -> None:
        transport = options.pop("transport", None)
        super().__init__(base_url, api_key, **options)
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=self._timeout, transport=transport, trust_env=False
        )

    def _run(self, call: _Call) -> Any:
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method, call.path, json=call.json, params=tuple(call.params), headers=call.headers
                )
            except _RETRYABLE:
                if attempt >= self.retries:
                    raise
            else:
                if not _retryable(response) or attempt >= self.retries:
                    return self._finish(call, response, retried=attempt > 0)
            time.sleep(self._delay(attempt))
            attempt += 1

    # ------------------------------------------------------------------ identity
    def info(self) -> dict[str, Any]:
        """The service's backend, capabilities, persistence and limits (``GET /v1/info``)."""
        if self._info is None:
            self._info = self._run(_Api.info())
        return self._info

    @property
    def backend(self) -> str:
        return str(self.info()["backend"])

    @property
    def capabilities(self) -> frozenset[Capability]:
        self.info()
        return self._capabilities()

    @property
    def persistent(self) -> bool:
        return bool(self.info()["persistent"])

    def supports(self, capability: Capability | str) -> bool:
        return Capability(capability) in self.capabilities

    # ------------------------------------------------------------------ operations
    def remember(self, user_id: str, messages: Iterable[MessageLike], **options: Any) -> IngestReport:
        """Options: ``session_id``, ``metadata``, ``idempotency_key`` (as ``MemoryClient.remember``)."""
        result: IngestReport = self._run(self._remember_call(user_id, messages, **options))
        return result

    def recall(self, user_id: str, query: str, k: int | None = None, *, filters: FilterLike = None) -> Retrieval:
        result: Retrieval = self._run(_Api.recall(user_id, query, k, filters))
        return result

    def forget(self, user_id: str) -> None:
        self._run(_Api.forget(user_id))
        self._forgot(user_id)

    def export(
        self, user_id: str, *, filters: FilterLike = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._run(_Api.export(user_id, filters, limit, cursor))
        return result

    def memories_page(
        self, user_id: str, *, filters: FilterLike = None, limit: int | None = None, cursor: str | None = None
    ) -> Page[MemoryItem]:
        result: Page[MemoryItem] = self._run(_Api.memories_page(user_id, filters, limit, cursor))
        return result

    def memories(self, user_id: str, *, filters: FilterLike = None) -> list[MemoryItem]:
        """All matching memories (fetched ``page_size`` at a time)."""
        items: list[MemoryItem] = []
        page = self.memories_page(user_id, filters=filters, limit=self.page_size)
        items += page.items
        while page.next_cursor:
            page = self.memories_page(user_id, filters=filters, limit=self.page_size, cursor=page.next_cursor)
            items += page.items
        return items

    def get(self, user_id: str, item_id: str) -> MemoryItem:
        result: MemoryItem = self._run(_Api.get(user_id, item_id))
        return result

    def update(self, user_id: str, item_id: str, text: str) -> MemoryItem:
        result: MemoryItem = self._run(_Api.update(user_id, item_id, text))
        return result

    def delete(self, user_id: str, item_id: str) -> None:
        self._run(_Api.delete(user_id, item_id))

    def restore(self, user_id: str, item_id: str) -> MemoryItem:
        result: MemoryItem = self._run(_Api.restore(user_id, item_id))
        return result

    def history_page(
        self, user_id: str, item_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[dict[str, Any]]:
        result: Page[dict[str, Any]] = self._run(_Api.history_page(user_id, item_id, limit, cursor))
        return result

    def history(self, user_id: str, item_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = self.history_page(user_id, item_id, limit=self.page_size, cursor=cursor)
            events += page.items
            if not page.next_cursor:
                return events
            cursor = page.next_cursor

    # ------------------------------------------------------------------ lifecycle
    def check_ready(self) -> None:
        """Raise when the service is not ready (``GET /readyz``: its store cannot serve a read)."""
        self._run(_Api.ready())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteMemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteMemoryClient({self.base_url!r})"


class AsyncRemoteMemoryClient(_Base):
    """``RemoteMemoryClient`` for asyncio: the same methods, awaited."""

    def __init__(self, base_url: str, api_key: str | None = None, **options: Any) -> None:
        transport = options.pop("transport", None)
        super().__init__(base_url, api_key, **options)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, timeout=self._timeout, transport=transport, trust_env=False
        )

    async def _run(self, call: _Call) -> Any:
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    call.method, call.path, json=call.json, params=tuple(call.params), headers=call.headers
                )
            except _RETRYABLE:
                if attempt >= self.retries:
                    raise
            else:
                if not _retryable(response) or attempt >= self.retries:
                    return self._finish(call, response, retried=attempt > 0)
            await asyncio.sleep(self._delay(attempt))
            attempt += 1

    async def info(self) -> dict[str, Any]:
        if self._info is None:
            self._info = await self._run(_Api.info())
        return self._info

    async def backend(self) -> str:
        return str((await self.info())["backend"])

    async def capabilities(self) -> frozenset[Capability]:
        await self.info()
        return self._capabilities()

    async def persistent(self) -> bool:
        return bool((await self.info())["persistent"])

    async def supports(self, capability: Capability | str) -> bool:
        return Capability(capability) in await self.capabilities()

    async def remember(self, user_id: str, messages: Iterable[MessageLike], **options: Any) -> IngestReport:
        result: IngestReport = await self._run(self._remember_call(user_id, messages, **options))
        return result

    async def recall(self, user_id: str, query: str, k: int | None = None, *, filters: FilterLike = None) -> Retrieval:
        result: Retrieval = await self._run(_Api.recall(user_id, query, k, filters))
        return result

    async def forget(self, user_id: str) -> None:
        await self._run(_Api.forget(user_id))
        self._forgot(user_id)

    async def export(
        self, user_id: str, *, filters: FilterLike = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._run(_Api.export(user_id, filters, limit, cursor))
        return result

    async def memories_page(
        self, user_id: str, *, filters: FilterLike = None, limit: int | None = None, cursor: str | None = None
    ) -> Page[MemoryItem]:
        result: Page[MemoryItem] = await self._run(_Api.memories_page(user_id, filters, limit, cursor))
        return result

    async def memories(self, user_id: str, *, filters: FilterLike = None) -> list[MemoryItem]:
        items: list[MemoryItem] = []
        cursor: str | None = None
        while True:
            page = await self.memories_page(user_id, filters=filters, limit=self.page_size, cursor=cursor)
            items += page.items
            if not page.next_cursor:
                return items
            cursor = page.next_cursor

    async def get(self, user_id: str, item_id: str) -> MemoryItem:
        result: MemoryItem = await self._run(_Api.get(user_id, item_id))
        return result

    async def update(self, user_id: str, item_id: str, text: str) -> MemoryItem:
        result: MemoryItem = await self._run(_Api.update(user_id, item_id, text))
        return result

    async def delete(self, user_id: str, item_id: str) -> None:
        await self._run(_Api.delete(user_id, item_id))

    async def restore(self, user_id: str, item_id: str) -> MemoryItem:
        result: MemoryItem = await self._run(_Api.restore(user_id, item_id))
        return result

    async def history_page(
        self, user_id: str, item_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[dict[str, Any]]:
        result: Page[dict[str, Any]] = await self._run(_Api.history_page(user_id, item_id, limit, cursor))
        return result

    async def history(self, user_id: str, item_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await self.history_page(user_id, item_id, limit=self.page_size, cursor=cursor)
            events += page.items
            if not page.next_cursor:
                return events
            cursor = page.next_cursor

    async def check_ready(self) -> None:
        """Raise when the service is not ready (``GET /readyz``: its store cannot serve a read)."""
        await self._run(_Api.ready())

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRemoteMemoryClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncRemoteMemoryClient({self.base_url!r})"
