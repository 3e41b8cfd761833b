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

* **bounded accepting**: asyncio accepts up to the listen backlog's number of connections per
  event-loop turn before any of them is closed, so a flood of connections took every file
  descriptor at once (``accept`` failing with EMFILE: thousands of log lines and a 1 s pause in
  accepting, /healthz included). ``memlab serve`` listens with a backlog of ``ACCEPT_BATCH``, which
  bounds the accepts per turn, and on its first connection widens the kernel's queue of the
  listening socket back to ``LISTEN_QUEUE``, so a burst waits there instead of being dropped (a
  client resends a dropped connection request only after 1 s). The cap itself is lowered to what
  the open-files limit leaves room for (``FD_RESERVE`` descriptors kept for the backend and the
  accept batch). Shedding is reported by one rate-limited
  warning (at most one line per ``WARN_EVERY`` seconds), and so is an accept error that still happens.

The limits live in a module variable set by ``configure`` (``create_app`` calls it), because
uvicorn's worker processes import this class by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import weakref
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from memlab.server import metrics

log = logging.getLogger("memlab.server")


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 512
    request_timeout: float = 30.0


ACCEPT_BATCH = 128  # the listen backlog asyncio is given: it accepts this many per event-loop turn at most
LISTEN_QUEUE = 2048  # what the kernel queues, widened after the start (uvicorn's default backlog)
FD_RESERVE = 128  # descriptors kept free for the backend's files, the database and logs
WARN_EVERY = 10.0  # seconds between two warnings about shed connections or accept errors

_limits = ConnectionLimits()
_cap: int | None = None  # max_connections, lowered to fit the open-files limit (computed on first use)


def configure(limits: ConnectionLimits) -> None:
    global _limits, _cap
    _limits = limits
    _cap = None


def current_limits() -> ConnectionLimits:
    return _limits


def open_files_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def connection_cap() -> int:
    """``max_connections``, or fewer when the open-files limit leaves room for fewer sockets (read
    once, after ``memlab serve`` raised the limit as far as it could)."""
    global _cap
    if _cap is None:
        soft = open_files_limit()
        room = _limits.max_connections if soft is None else max(16, soft - ACCEPT_BATCH - FD_RESERVE)
        _cap = min(_limits.max_connections, room)
        if _cap < _limits.max_connections:
            log.warning(
                "the open-files limit (%s) leaves room for %d connections, not --max-connections %d: "
                "raise it (ulimit -n) to allow more",
                soft,
                _cap,
                _limits.max_connections,
            )
    return _cap


class RateLimitedWarning:
    """Logs the first of a burst of events, then at most one line per ``WARN_EVERY`` seconds with
    how many happened since the last line."""

    def __init__(self, first: str, again: str) -> None:
        self.first, self.again = first, again  # formatted with what report() is given (again: count=, seconds=)
        self.count = 0
        self.last: float | None = None

    def report(self, now: float, **details: Any) -> None:
        self.count += 1
        if self.last is None or now - self.last >= 2 * WARN_EVERY:  # a new burst
            log.warning(self.first.format(**details) + f" (reported at most every {WARN_EVERY:.0f} s)")
        elif now - self.last >= WARN_EVERY:
            log.warning(self.again.format(count=self.count, seconds=now - self.last, **details))
        else:
            return
        self.count, self.last = 0, now


_shed = RateLimitedWarning(
    "over {cap} open connections: closing the longest-waiting connections without a request "
    "(metric memlab_connections_dropped_total)",
    "over {cap} open connections: closed {count} waiting connection(s) in the last {seconds:.0f} s",
)
_accept_errors = RateLimitedWarning(
    "accepting a connection failed: {error}; the open-files limit is {limit}: raise it (ulimit -n) or "
    "lower --max-connections",
    "accepting a connection failed {count} time(s) in the last {seconds:.0f} s: {error}",
)
_widened = False  # this process widened its listening sockets' queue


def widen_listen_queue(port: int) -> None:
    """Let the kernel queue ``LISTEN_QUEUE`` connections on this process's listening sockets of
    ``port`` (``listen`` again only changes the queue length; asyncio keeps accepting
    ``ACCEPT_BATCH`` per turn). Linux: the sockets are found in /proc/self/fd; elsewhere nothing."""
    global _widened
    _widened = True
    with contextlib.suppress(OSError):
        names = os.listdir("/proc/self/fd")
        for name in names:
            try:
                listener = socket.socket(fileno=os.dup(int(name)))
            except (ValueError, OSError):  # not a socket (or already closed)
                continue
            with listener, contextlib.suppress(OSError):
                if listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) and listener.getsockname()[1] == port:
                    listener.listen(LISTEN_QUEUE)


_guarded_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def _guard_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Replace asyncio's traceback per failed ``accept`` (one for each connection of a flood) by the
    rate-limited warning; other loop errors go where they went before."""
    if loop in _guarded_loops:
        return
    _guarded_loops.add(loop)
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == "socket.accept() out of system resource":
            _accept_errors.report(loop.time(), error=context.get("exception"), limit=open_files_limit())
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


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
        _guard_accept_errors(self.loop)

    # ------------------------------------------------------------------ cap
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        metrics.CONNECTIONS_OPENED.inc()
        if not _widened and self.server is not None and self.server[1] is not None:
            widen_listen_queue(self.server[1])
        self._arm()
        cap = connection_cap()
        if len(self.connections) > cap:
            victim = self._longest_waiting()
            if victim is None:  # every other connection is being served: refuse this one
                victim = self
            metrics.CONNECTIONS_DROPPED.inc()
            victim.transport.abort()
            _shed.report(self.loop.time(), cap=cap)

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
