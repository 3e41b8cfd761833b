"""API-key authentication and per-user authorisation for the REST service.

A key is sent as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``. Both schemes appear in the
OpenAPI document. A wrong or missing key is 401; a valid key used for a user it is not bound to is 403.
Keys are compared in constant time.

The keys in force live in a ``KeyRing``: the configured keys plus the key file's. The key file is
re-read when its modification time (or size) changes and after a SIGHUP, so keys rotate without a
restart. A key file that no longer parses, or that repeats a key, is refused: the keys in force stay
as they were and the problem is logged (never the keys themselves).
"""

from __future__ import annotations

import hmac
import logging
import os
import threading

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from memlab.errors import ConfigurationError
from memlab.server.settings import ApiKey, ServerSettings, check_keys, read_key_file

log = logging.getLogger("memlab.server")

bearer_scheme = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
header_scheme = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: <API key>")


class KeyRing:
    """The API keys in force, reloaded from the key file when it changes or ``request_reload`` is called."""

    def __init__(self, settings: ServerSettings) -> None:
        self.enabled = settings.auth_enabled
        self._static = list(settings.api_keys)
        self._file = settings.api_keys_file
        self._mutex = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._reload_requested = False
        self._keys: list[ApiKey] = settings.all_keys()
        self._stamp = self._file_stamp()

    def _file_stamp(self) -> tuple[int, int] | None:
        if self._file is None:
            return None
        try:
            stat = os.stat(self._file)
        except OSError:
            return (-1, -1)
        return (stat.st_mtime_ns, stat.st_size)

    def request_reload(self) -> None:
        """Re-read the key file on the next request (safe to call from a signal handler)."""
        self._reload_requested = True

    def reload(self) -> bool:
        """Re-read the key file now; True when the new keys are in force."""
        with self._mutex:
            self._reload_requested = False
            self._stamp = self._file_stamp()
            try:
                keys = list(self._static)
                if self._file is not None:
                    keys += read_key_file(self._file)
                check_keys(keys)
            except ConfigurationError as exc:
                log.error("API keys not reloaded, the previous keys stay in force: %s", exc)
                return False
            self._keys = keys
            log.warning("API keys reloaded: %d key(s) in force", len(keys))
            return True

    @property
    def keys(self) -> list[ApiKey]:
        if self._file is not None and (self._reload_requested or self._file_stamp() != self._stamp):
            self.reload()
        return self._keys

    def find(self, presented: str) -> ApiKey | None:
        found = None
        for candidate in self.keys:
            # Check every key (no early exit) so timing does not reveal which prefix matched.
            if hmac.compare_digest(candidate.key.encode(), presented.encode()):
                found = candidate
        return found


def authenticate(
    request: Request,
    bearer: HTTPAuthorizationCredentials | None = Depends(bearer_scheme),
    header: str | None = Depends(header_scheme),
) -> ApiKey | None:
    """The caller's key, or None when the service runs without authentication (loopback only)."""
    ring: KeyRing = request.app.state.keys
    if not ring.enabled:
        return None
    presented = header or (bearer.credentials if bearer else None)
    if not presented:
        raise HTTPException(
            401,
            "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    key = ring.find(presented)
    if key is None:
        raise HTTPException(401, "invalid API key", headers={"WWW-Authenticate": "Bearer"})
    return key


def authorize_user(user_id: str, key: ApiKey | None) -> None:
    if key is not None and not key.allows(user_id):
        raise HTTPException(403, f"this API key may not act for user {user_id!r}")
