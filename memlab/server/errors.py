"""Every error leaves the service as ``{"error": {"status", "code", "message", "details"?}}``.

Mapping: validation and malformed JSON -> 422; missing/invalid key -> 401; key not allowed for the
user -> 403; unknown memory id for that user -> 404; an idempotency key reused for another write -> 409; capability the backend lacks -> 405 with an
``Allow`` header naming what the resource does support; body too large -> 413 (see limits.py);
anything unexpected -> 500 without internals (logged server-side).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from memlab.errors import (
    ConflictError,
    MemlabError,
    NotFoundError,
    ReadOnlyItemError,
    ShuttingDownError,
    UnsupportedCapabilityError,
    WriteInProgressError,
)

log = logging.getLogger("memlab.server")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "capability_not_supported",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
    429: "rate_limited",
    503: "unavailable",
}


def _where(request: Request) -> str:
    """A request as logs name it: the route template, never the path (it holds the user id)."""
    route = request.scope.get("route")
    return f"{request.method} {getattr(route, 'path_format', None) or '(unmatched)'}"


def error_response(
    status: int,
    message: str,
    *,
    code: str | None = None,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "status": status,
        "code": code or _CODES.get(status, HTTPStatus(status).phrase.lower().replace(" ", "_")),
        "message": message,
    }
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Keep what a client can act on; pydantic's ctx/input may hold values that are not JSON.
    return [
        {
            "loc": [str(part) for part in err.get("loc", ())],
            "msg": str(err.get("msg", "")),
            "type": str(err.get("type", "")),
        }
        for err in exc.errors()
    ]


def _allowed_methods(request: Request) -> str:
    """Every method some route serves for this path (Starlette names only the first route's)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def _content_type_hint(request: Request, details: list[dict[str, Any]]) -> str:
    """A body sent without ``Content-Type: application/json`` is not read as JSON: say so."""
    if not any(d["loc"][:1] == ["body"] for d in details):
        return ""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() == "application/json":
        return ""
    sent = f"'{content_type}'" if content_type else "no Content-Type"
    return f"; the request sent {sent}: send the header 'Content-Type: application/json' with a JSON body"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        if exc.status_code == 404 and exc.detail == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path}"
        elif exc.status_code == 405 and exc.detail == "Method Not Allowed":
            allowed = _allowed_methods(request)
            return error_response(
                405,
                f"method {request.method} is not allowed on {request.url.path} (allowed: {allowed or 'none'})",
                code="method_not_allowed",
                headers={"Allow": allowed},
            )
        elif exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            return error_response(422, "request body could not be read as JSON (is it UTF-8?)", code="malformed_json")
        return error_response(exc.status_code, message, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = _validation_details(exc)
        if any(d["type"] == "json_invalid" for d in details):
            return error_response(422, "request body is not valid JSON", code="malformed_json", details=details)
        first = details[0] if details else {"loc": [], "msg": "invalid request"}
        where = ".".join(first["loc"])
        more = f" (and {len(details) - 1} more problems)" if len(details) > 1 else ""
        hint = _content_type_hint(request, details)
        return error_response(422, f"invalid request: {where}: {first['msg']}{more}{hint}", details=details)

    @app.exception_handler(NotFoundError)
    async def not_found(request: Request, exc: NotFoundError) -> JSONResponse:
        # The client words these messages itself (user and id only): no stored text reaches here.
        return error_response(404, str(exc))

    @app.exception_handler(ConflictError)
    async def conflict(request: Request, exc: ConflictError) -> JSONResponse:
        in_progress = isinstance(exc, WriteInProgressError)  # a client retries these
        return error_response(409, str(exc), code="write_in_progress" if in_progress else "conflict")

    @app.exception_handler(UnsupportedCapabilityError)
    async def unsupported(request: Request, exc: UnsupportedCapabilityError) -> JSONResponse:
        return error_response(405, str(exc), headers={"Allow": ""})

    @app.exception_handler(ValueError)
    async def bad_value(request: Request, exc: ValueError) -> JSONResponse:
        if isinstance(exc, ValidationError):
            # Requests are validated before any endpoint runs, so this came from stored data that a
            # backend could not read; pydantic would quote that data (a user's text): say nothing of it.
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_input=False))
            log.error("stored data failed validation on %s (%s): %s", _where(request), exc.title, problems)
            return error_response(
                500, "the memory backend could not read its stored data (see the server log)", code="backend_error"
            )
        return error_response(422, str(exc), code="invalid_request")

    @app.exception_handler(ReadOnlyItemError)
    async def read_only(request: Request, exc: ReadOnlyItemError) -> JSONResponse:
        return error_response(409, str(exc), code="not_changeable")

    @app.exception_handler(ShuttingDownError)
    async def shutting_down(request: Request, exc: ShuttingDownError) -> JSONResponse:
        return error_response(503, str(exc), code="shutting_down", headers={"Retry-After": "5"})

    @app.exception_handler(MemlabError)
    async def memlab_error(request: Request, exc: MemlabError) -> JSONResponse:
        log.error("memlab error on %s: %s", _where(request), exc)
        return error_response(500, f"the memory backend failed: {exc}", code="backend_error")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", _where(request))
        return error_response(500, "internal server error (see the server log)", code="internal_error")
