"""Refuse every network connection except to this machine (loopback and Unix sockets).

Unit tests must never reach the internet; local servers started by a test on 127.0.0.1 are fine.
"""

from __future__ import annotations

import _socket  # socket.socket's connect methods are inherited from the C class _socket.socket
import ipaddress
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class NetworkBlockedError(RuntimeError):
    pass


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextmanager
def block_network() -> Iterator[list[Any]]:
    """Patch sockets so non-local connects raise; yields the list of refused addresses."""
    refused: list[Any] = []
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def guard(address: Any) -> None:
        if not _is_local(address):
            refused.append(address)
            raise NetworkBlockedError(f"network access blocked in tests: {address!r}")

    def connect(self: _socket.socket, address: Any) -> None:
        guard(address)
        original_connect(self, address)

    def connect_ex(self: _socket.socket, address: Any) -> int:
        guard(address)
        return original_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and not _is_local((name, 0)):
            refused.append(name)
            raise NetworkBlockedError(f"DNS lookup blocked in tests: {name!r}")
        return original_getaddrinfo(host, *args, **kwargs)

    # Deliberate monkeypatching of the stdlib class: mypy flags any assignment to a method.
    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo
    try:
        yield refused
    finally:
        socket.socket.connect = original_connect  # type: ignore[method-assign]  # restoring the patch above
        socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]  # restoring the patch above
        socket.getaddrinfo = original_getaddrinfo
