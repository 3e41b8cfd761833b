"""``memlab serve --workers N``: N uvicorn worker processes serving one database-backed backend.

uvicorn starts each worker in a fresh process that imports an application factory, so the
settings travel to them in the environment (``MEMLAB_SERVE_SETTINGS``, the validated settings as
JSON, keys included, as they already are in ``MEMLAB_API_KEYS``). Each worker opens its own
backend: with a database store (``store: postgresql://...``) they share nothing but the database,
which orders their writes (see ``memlab_plugins.rag.pg`` and ``memlab_plugins.profile.pg_store``).
A file store allows one writer process per data directory, so N > 1 is refused for it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from memlab.pg import config_uses_database

SETTINGS_ENV = "MEMLAB_SERVE_SETTINGS"


def check_workers(workers: int, backend: str, backend_config: dict[str, Any]) -> None:
    """Refuse N > 1 workers unless the backend's store is a database (a ``ValueError`` naming the fix)."""
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    if workers > 1 and not config_uses_database(backend_config):
        if backend_has_database_store(backend):
            raise ValueError(
                f"--workers {workers} needs a database store: add --{backend}.store postgresql://user@host:5432/db "
                f"(or set MEMLAB_STORE); with its file store backend {backend!r} allows one writer process: "
                "use --workers 1"
            )
        with_database = ", ".join(b for b in ("rag", "profile") if b != backend)
        raise ValueError(
            f"--workers {workers}: backend {backend!r} keeps its state in files that one process at a time may "
            f"write and has no database store: use --workers 1 (backends with a PostgreSQL store: {with_database})"
        )


def backend_has_database_store(backend: str) -> bool:
    """Whether the backend's config has a ``store`` option (a PostgreSQL URL selects the database)."""
    from memlab.registry import backends

    try:
        config = getattr(backends.get(backend), "Config", None)
    except Exception:  # an unknown backend is reported when the service opens it
        return False
    return config is not None and "store" in getattr(config, "model_fields", {})


def export_settings(settings: Any) -> None:
    """Hand the settings to the worker processes uvicorn is about to start."""
    data = settings.model_dump(mode="json")
    data["api_keys"] = [k.key + (":" + "|".join(k.users) if k.users else "") for k in settings.api_keys]
    os.environ[SETTINGS_ENV] = json.dumps(data)


def app() -> Any:
    """The application factory each worker calls (``memlab.server.workers:app``, ``factory=True``)."""
    from memlab.server.app import create_app
    from memlab.server.settings import ServerSettings

    raw = os.environ.get(SETTINGS_ENV)
    if not raw:
        raise RuntimeError(f"{SETTINGS_ENV} is not set: start workers through `memlab serve --workers N`")
    from memlab.server.cli import limit_compute_threads

    settings = ServerSettings.model_validate(json.loads(raw))
    limit_compute_threads(settings.compute_threads)  # as the parent did for itself
    return create_app(settings)
