"""Per-request telemetry as plain ASGI middleware: request id, access log line, metrics.

Outermost of the service's middleware, so a request refused by a limit (413, 429, 401) is counted
and logged like any other. See ``logs`` (what a line holds) and ``metrics`` (what is counted).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from memlab.server import metrics
from memlab.server.logs import ACCESS_LOGGER, REQUEST_ID, request_id_from

access_log = logging.getLogger(ACCESS_LOGGER)

# Paths probes call every few seconds: counted, but not written to the access log at info level.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class RequestTelemetry:
    def __init__(self, app: Any, backend: str, log_user_ids: bool = False) -> None:
        self.app = app
        self.backend = backend
        self.log_user_ids = log_user_ids

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw_id = headers.get(b"x-request-id")
        request_id = request_id_from(raw_id.decode("latin-1") if raw_id else None)
        token = REQUEST_ID.set(request_id)
        method = scope["method"]
        path = scope["path"]
        ingest = method == "POST" and path.startswith("/v1/users/") and path.endswith("/messages")
        status = 500
        start = time.perf_counter()

        async def send_with_id(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        metrics.IN_FLIGHT.inc(backend=self.backend)
        if ingest:
            metrics.INGEST_IN_FLIGHT.inc(backend=self.backend)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - start
            metrics.IN_FLIGHT.dec(backend=self.backend)
            if ingest:
                metrics.INGEST_IN_FLIGHT.dec(backend=self.backend)
            route = _route_template(scope, status)
            labels = {"backend": self.backend, "method": method, "route": route}
            metrics.REQUESTS.inc(**labels, status=str(status))
            metrics.LATENCY.observe(seconds, **labels)
            extra: dict[str, Any] = {
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
            }
            if self.log_user_ids:
                user = (scope.get("path_params") or {}).get("user_id")
                if user:
                    extra["user_id"] = user
            level = logging.DEBUG if path in QUIET_PATHS and status < 400 else logging.INFO
            access_log.log(level, "%s %s %d %.1f ms", method, route, status, seconds * 1000, extra=extra)
            REQUEST_ID.reset(token)


def _route_template(scope: dict[str, Any], status: int) -> str:
    """The matched route's template (never the path: it holds user ids). A request a limit refused
    before routing is "(refused)"; any other path no route serves is "(unmatched)"."""
    route = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    if isinstance(template, str):
        return template
    return "(refused)" if status in (401, 408, 413, 429) else "(unmatched)"
