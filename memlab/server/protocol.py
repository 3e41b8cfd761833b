"""Connection limits below the app: uvicorn's h11 protocol with a request read deadline and a cap.

uvicorn (0.55) times out only idle keep-alive connections: a client that connects and sends
nothing, or sends a request a byte at a time (slowloris), holds a socket and a file descriptor for
as long as it likes, and enough of them exhaust the process's descriptors. ``GuardedH11Protocol``
adds what a public service needs:

* a **read deadline**: a request's headers and body must arrive within ``request_timeout``
  seconds of its first byte (of the connection, for the first request). A request that has not
  sent its headers by then is answered ``408`` and closed; one stalled in its body is closed (the
  app sees the client disconnect). Keep-alive idling between requests stays uvicorn's
  ``timeout_keep_alive``.
* a **connection cap**: at most ``max_connections`` open connections. When a new one would go
  over, the connection that has waited longest *without a complete request* (idle or half-sent) is
  closed to make room; a connection whose request is being served is never cut. If every
  connection is busy, the new one is refused. So idle sockets cannot lock out a real client.

The limits live in a module variable set by ``configure`` (``create_app`` calls it), because
uvicorn's worker processes import this class by name.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from memlab.server import metrics

log = logging.getLogger("memlab.server")


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 512
    request_timeout: float = 30.0


_limits = ConnectionLimits()


def configure(limits: ConnectionLimits) -> None:
    global _limits
    _limits = limits


def current_limits() -> ConnectionLimits:
    return _limits


_TIMEOUT_BODY = b'{"error":{"status":408,"code":"request_timeout","message":"the request did not arrive in time"}}'
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n" + _TIMEOUT_BODY
)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline per request and a cap on open connections."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_since = 0.0

    # ------------------------------------------------------------------ cap
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        metrics.CONNECTIONS_OPENED.inc()
        self._arm()
        if len(self.connections) > _limits.max_connections:
            victim = self._longest_waiting()
            if victim is None:  # every other connection is being served: refuse this one
                victim = self
            metrics.CONNECTIONS_DROPPED.inc()
            victim.transport.abort()

    def _longest_waiting(self) -> GuardedH11Protocol | None:
        waiting = [
            c for c in self.connections if isinstance(c, GuardedH11Protocol) and c is not self and c._awaiting_request()
        ]
        return min(waiting, key=lambda c: c._waiting_since, default=None)

    def _awaiting_request(self) -> bool:
        """No complete request yet (idle, or headers/body still arriving): safe to close."""
        if self.transport.is_closing():
            return False
        return self._deadline is not None or self.timeout_keep_alive_task is not None

    # ------------------------------------------------------------------ read deadline
    def _arm(self) -> None:
        self._disarm()
        self._waiting_since = self.loop.time()
        self._deadline = self.loop.call_later(_limits.request_timeout, self._on_deadline)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            self._disarm()  # the whole request is here; the app may take its time

    def on_response_complete(self) -> None:
        self._disarm()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _on_deadline(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        metrics.REQUEST_TIMEOUTS.inc()
        if self.cycle is None or self.cycle.response_complete:
            # The headers never arrived (h11 cannot answer a request it has not parsed): say so in
            # plain bytes (the client may be slow, not hostile), then close.
            self.transport.write(_TIMEOUT_RESPONSE)
            self.transport.close()
        else:
            self.transport.abort()  # stalled in its body: the app's receive() sees a disconnect
