"""``memlab serve``: run the REST service with uvicorn.

    memlab serve --backend profile --data-dir ./memdata --host 127.0.0.1 --port 8000 --api-key KEY

Backend options follow the CLI convention ``--<backend>.<key> VALUE`` (VALUE parsed as JSON when it
parses, else a string), e.g. ``--full_context.max_tokens 4000``. A ``--config`` file (JSON or YAML)
holds the same settings (see ``ServerSettings``); command-line flags override it. API keys also come
from ``MEMLAB_API_KEYS``. The service runs one worker process: the backend's state lives in it;
``--workers N`` runs N when the backend's store is a database (``--<backend>.store postgresql://...``
or ``MEMLAB_STORE``; see ``memlab.server.workers``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pydantic import ValidationError

from memlab.errors import MemlabError

STORE_ENV = "MEMLAB_STORE"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memlab serve", description="Serve a memlab memory backend over HTTP.")
    p.add_argument("--config", help="settings file (JSON or YAML) with the ServerSettings fields")
    p.add_argument("--backend", help="registered backend name (default: full_context)")
    p.add_argument("--data-dir", help="directory where the backend keeps its state")
    p.add_argument("--host", help="address to bind (default 127.0.0.1); non-loopback needs an API key")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--api-key", action="append", default=[], metavar="KEY[:user1|user2]",
                   help="accepted API key, optionally bound to users; repeatable (prefer MEMLAB_API_KEYS: "
                        "command lines are visible to other local users)")
    p.add_argument("--allow-ephemeral", action="store_true", default=None,
                   help="serve a backend whose memories do not survive a restart")
    p.add_argument("--max-body-bytes", type=int, help="largest accepted request body (default 1 MiB)")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes (N > 1 only with a database store: --<backend>.store postgresql://...)")
    return p


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _backend_options(extra: list[str], backend: str) -> dict[str, Any]:
    """Turn ``--<backend>.<key> VALUE`` / ``--<backend>.<key>=VALUE`` pairs into a config dict."""
    options: dict[str, Any] = {}
    i = 0
    while i < len(extra):
        arg = extra[i]
        if not arg.startswith("--") or "." not in arg:
            raise ValueError(f"unrecognised argument {arg!r}")
        name, _, rest = arg[2:].partition(".")
        key, eq, value = rest.partition("=")
        if not eq:
            if i + 1 >= len(extra):
                raise ValueError(f"{arg} needs a value")
            value = extra[i + 1]
            i += 1
        i += 1
        if name != backend:
            raise ValueError(f"{arg}: options are for the served backend, use --{backend}.{key}")
        options[key.replace("-", "_")] = _parse_value(value)
    return options


def build_settings(argv: list[str]) -> "Any":
    from memlab.server.settings import ServerSettings, load_settings_file

    args, extra = _parser().parse_known_args(argv)
    data: dict[str, Any] = load_settings_file(args.config) if args.config else {}
    for field, value in (("backend", args.backend), ("data_dir", args.data_dir), ("host", args.host),
                         ("port", args.port), ("allow_ephemeral", args.allow_ephemeral),
                         ("max_body_bytes", args.max_body_bytes), ("log_level", args.log_level)):
        if value is not None:
            data[field] = value
    if args.api_key:
        data["api_keys"] = [*data.get("api_keys", []), *args.api_key]
    backend = data.get("backend", "full_context")
    options = _backend_options(extra, backend)
    if options:
        data["backend_config"] = {**data.get("backend_config", {}), **options}
    # MEMLAB_STORE: the backend's database URL from the environment (config file and flags win).
    if os.environ.get(STORE_ENV) and "store" not in data.get("backend_config", {}):
        data["backend_config"] = {**data.get("backend_config", {}), "store": os.environ[STORE_ENV]}
    return ServerSettings.model_validate(data).with_env_keys()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``memlab serve``; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = build_settings(argv)
        settings.check_startable()
        from memlab.server.workers import check_workers

        workers = _parser().parse_known_args(argv)[0].workers
        check_workers(workers, settings.backend, settings.backend_config)
        if settings.data_dir is None and not settings.allow_ephemeral:
            raise ValueError("--data-dir is required so memories survive a restart (or pass --allow-ephemeral)")
        try:
            import uvicorn

            from memlab.server.app import create_app
        except ImportError as exc:
            print(f"memlab serve: {exc.name or exc} is not installed: pip install 'memlab[serve]'", file=sys.stderr)
            return 2
        app = create_app(settings)
    except (ValidationError, ValueError, MemlabError) as exc:
        print(f"memlab serve: {exc}", file=sys.stderr)
        return 2

    if not settings.auth_enabled:
        print(f"memlab serve: WARNING: no API key configured; serving without authentication on "
              f"{settings.host} (loopback only)", file=sys.stderr)
    client = app.state.client
    print(f"memlab serve: backend {client.backend!r}, data {settings.data_dir or 'in-process'} "
          f"(persistent: {client.persistent}), http://{settings.host}:{settings.port}", file=sys.stderr, flush=True)
    if workers > 1:
        from memlab.server.workers import export_settings

        client.close()  # each worker opens its own backend (this one only checked that it opens)
        export_settings(settings)
        uvicorn.run("memlab.server.workers:app", factory=True, host=settings.host, port=settings.port,
                    log_level=settings.log_level, workers=workers)
        return 0
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level, workers=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
