"""API-key authentication and per-user authorisation for the REST service.

A key is sent as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``. Both schemes appear in the
OpenAPI document. A wrong or missing key is 401; a valid key used for a user it is not bound to is 403.
Keys are compared in constant time.
"""

from __future__ import annotations

import hmac

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from memlab.server.settings import ApiKey, ServerSettings

bearer_scheme = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
header_scheme = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: <API key>")


def find_key(settings: ServerSettings, presented: str) -> ApiKey | None:
    found = None
    for candidate in settings.api_keys:
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
    settings: ServerSettings = request.app.state.settings
    if not settings.auth_enabled:
        return None
    presented = header or (bearer.credentials if bearer else None)
    if not presented:
        raise HTTPException(
            401, "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    key = find_key(settings, presented)
    if key is None:
        raise HTTPException(401, "invalid API key", headers={"WWW-Authenticate": "Bearer"})
    return key


def authorize_user(user_id: str, key: ApiKey | None) -> None:
    if key is not None and not key.allows(user_id):
        raise HTTPException(403, f"this API key may not act for user {user_id!r}")
