"""Request limits as plain ASGI middleware: each refuses a request before its body is read.

* ``BodySizeLimit``: a declared ``Content-Length`` over the limit is answered 413 at once; a chunked
  body is buffered up to the limit and refused as soon as it goes past it.
* ``KeyGate``: a data request (``/v1/...``) without a valid API key is answered 401 before its body
  is read or parsed, so unauthenticated requests are the cheapest path through the server.
* ``RateLimit``: token buckets per API key and per client address (``--rate-limit R/s``, burst of
  one second's worth); over the limit is 429 with ``Retry-After``. Probes (``/healthz``,
  ``/readyz``, ``/metrics``) are not limited.

Connection-level limits (read deadline, connection cap) are in ``protocol``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from memlab.server import metrics

Scope = dict[str, Any]
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_RATE = re.compile(r"^\s*(?P<rate>\d+(?:\.\d+)?)\s*/\s*s(?:ec(?:ond)?)?\s*$")


def parse_rate(value: str | float | None) -> float | None:
    """``"20/s"`` -> 20.0 requests per second; None, "", "0" and "off" -> no limit."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "0", "off", "none")):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        rate = float(value)
    else:
        match = _RATE.match(str(value))
        if match is None:
            raise ValueError(f"rate limit {value!r}: write requests per second as R/s, e.g. 20/s (or off)")
        rate = float(match["rate"])
    if rate <= 0:
        return None
    return rate


def _json_error(status: int, code: str, message: str) -> bytes:
    return json.dumps({"error": {"status": status, "code": code, "message": message}}).encode()


async def _answer(send: Any, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def presented_key(scope: Scope) -> str | None:
    """The API key a request carries (``X-API-Key`` first, then ``Authorization: Bearer``)."""
    headers = dict(scope.get("headers") or [])
    key = headers.get(b"x-api-key")
    if key:
        return key.decode("latin-1").strip()
    auth = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None


def _error_body(limit: int) -> bytes:
    message = f"request body too large: the limit is {limit} bytes"
    return json.dumps({"error": {"status": 413, "code": "payload_too_large", "message": message}}).encode()


class KeyGate:
    """401 for ``/v1/`` requests without a valid key, before anything reads the body."""

    def __init__(self, app: Any, keys: Any) -> None:
        self.app = app
        self.keys = keys  # auth.KeyRing

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.keys.enabled and scope["path"].startswith("/v1/"):
            key = presented_key(scope)
            if key is None or self.keys.find(key) is None:
                message = (
                    "invalid API key"
                    if key
                    else "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
                )
                await _answer(
                    send,
                    401,
                    _json_error(401, "unauthorized", message),
                    [(b"www-authenticate", b"Bearer"), (b"connection", b"close")],
                )
                return
        await self.app(scope, receive, send)


class TokenBuckets:
    """``rate`` tokens a second per name, at most ``burst`` saved up; thread-safe."""

    def __init__(self, rate: float, burst: float | None = None, max_names: int = 100_000) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)
        self.max_names = max_names
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens, when)
        self._lock = threading.Lock()

    def take(self, name: str, now: float | None = None) -> float:
        """0.0 when a request may pass, else the seconds until it may."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, when = self._buckets.get(name, (self.burst, now))
            tokens = min(self.burst, tokens + (now - when) * self.rate)
            if tokens >= 1.0:
                self._buckets[name] = (tokens - 1.0, now)
                return 0.0
            self._buckets[name] = (tokens, now)
            if len(self._buckets) > self.max_names:  # forget names whose bucket has refilled
                full = [n for n, (t, w) in self._buckets.items() if t + (now - w) * self.rate >= self.burst]
                for stale in full:
                    del self._buckets[stale]
            return (1.0 - tokens) / self.rate


class RateLimit:
    """429 with ``Retry-After`` when a key or an address goes over ``rate`` requests a second."""

    def __init__(self, app: Any, rate: float, backend: str) -> None:
        self.app = app
        self.backend = backend
        self.by_key = TokenBuckets(rate)
        self.by_address = TokenBuckets(rate)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = client[0] if client else "unknown"
        key = presented_key(scope)
        waits = [("address", self.by_address.take(address))]
        if key is not None:  # named by a hash: keys never sit in memory twice, nor in metrics
            waits.append(("key", self.by_key.take(hashlib.sha256(key.encode()).hexdigest()[:32])))
        scope_name, wait = max(waits, key=lambda pair: pair[1])
        if wait > 0:
            metrics.RATE_LIMITED.inc(backend=self.backend, scope=scope_name)
            retry = max(1, math.ceil(wait))
            message = (
                f"too many requests for this {'API key' if scope_name == 'key' else 'address'}: retry in {retry} s"
            )
            await _answer(send, 429, _json_error(429, "rate_limited", message), [(b"retry-after", str(retry).encode())])
            return
        await self.app(scope, receive, send)


class BodySizeLimit:
    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                too_big = False  # the server rejects a malformed Content-Length itself
            if too_big:
                await self._refuse(send)
                return
            await self.app(scope, receive, send)
            return
        # No length declared (chunked): read up to the limit before the app sees anything.
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(body)
            more = message.get("more_body", False)
        await self.app(
            scope, _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}], receive), send
        )

    async def _refuse(self, send: Any) -> None:
        body = _error_body(self.max_bytes)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[dict[str, Any]], then: Any = None) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        if then is not None:
            return await then()  # e.g. http.disconnect after the body
        return {"type": "http.disconnect"}

    return receive
