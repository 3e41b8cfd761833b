"""Request-size limit as plain ASGI middleware, so an oversized body is refused before it is parsed.

A declared ``Content-Length`` over the limit is answered 413 at once; a chunked body is buffered up
to the limit and refused as soon as it goes past it.
"""

from __future__ import annotations

import json
from typing import Any

Scope = dict[str, Any]


def _error_body(limit: int) -> bytes:
    message = f"request body too large: the limit is {limit} bytes"
    return json.dumps({"error": {"status": 413, "code": "payload_too_large", "message": message}}).encode()


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
