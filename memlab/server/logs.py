"""The service's logs: one line per request with a request id, as JSON or text, without user ids.

``--log-format json`` writes every record (memlab's, uvicorn's, the libraries') as one JSON object
a line: ``time``, ``level``, ``logger``, ``message``, ``request_id`` when the record belongs to a
request, and the request fields of the access line (``method``, ``route``, ``status``,
``duration_ms``). ``text`` writes the same as plain lines.

The request id is the client's ``X-Request-ID`` when it is a plain token (letters, digits, ``-_.:``,
at most 64), else a fresh one; it is sent back in the ``X-Request-ID`` response header and reaches
every record logged while the request runs (also in the worker thread that runs the endpoint).

User ids may be e-mail addresses: the access line names the route template
(``/v1/users/{user_id}/search``), not the path, and uvicorn's own access log (which prints paths) is
off. ``--log-user-ids`` adds the user id to the access line when an operator needs it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from typing import Any

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("memlab_request_id", default=None)
_CLIENT_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
ACCESS_LOGGER = "memlab.server.access"
_ACCESS_FIELDS = ("method", "route", "status", "duration_ms", "user_id", "client")


def request_id_from(header: str | None) -> str:
    if header and _CLIENT_ID.match(header):
        return header
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on every record (``record.request_id``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        for field in _ACCESS_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                entry[field] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = getattr(record, "request_id", None)
        return f"{line} [request {request_id}]" if request_id else line


def log_config(log_format: str, level: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn and memlab (uvicorn's access log off: it prints paths)."""
    formatter = {"()": JsonFormatter} if log_format == "json" else {"()": TextFormatter}
    handler = {
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
        "formatter": "memlab",
        "filters": ["request_id"],
        # also for libraries that set their own logger to DEBUG (bm25s does) and propagate to root
        "level": level.upper(),
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {"memlab": formatter},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": "WARNING"},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
            "memlab": {"handlers": ["default"], "level": level.upper(), "propagate": False},
        },
    }
