"""``memlab serve``: run the REST service with uvicorn.

    memlab serve --backend profile --data-dir ./memdata --host 127.0.0.1 --port 8000 --api-key KEY

Backend options follow the CLI convention ``--<backend>.<key> VALUE`` (VALUE parsed as JSON when it
parses, else a string), e.g. ``--full_context.max_tokens 4000``. A ``--config`` file (JSON or YAML)
holds the same settings (see ``ServerSettings``); command-line flags override it. API keys also come
from ``MEMLAB_API_KEYS`` and from a key file (``--api-keys-file`` / ``MEMLAB_API_KEYS_FILE``) that is
re-read when it changes or on SIGHUP. With a file store the service runs one worker process (the
backend's state lives in it) and a second ``memlab serve`` on the same data directory is refused;
``--workers N`` runs N when the backend's store is a database (``--<backend>.store postgresql://...``
or ``MEMLAB_STORE``; see ``memlab.server.workers``). Problems are reported as one
``memlab: error: ...`` line and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import signal
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
    p.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY[:user1|user2]",
        help="accepted API key, optionally bound to users; repeatable (prefer MEMLAB_API_KEYS: "
        "command lines are visible to other local users)",
    )
    p.add_argument(
        "--allow-ephemeral",
        action="store_true",
        default=None,
        help="serve a backend whose memories do not survive a restart",
    )
    p.add_argument(
        "--api-keys-file",
        metavar="PATH",
        help="file of API key entries, one a line; re-read when it changes and on SIGHUP (key rotation)",
    )
    p.add_argument(
        "--user-cache-size",
        type=int,
        metavar="N",
        help="users whose state is kept in RAM, least recently used dropped first (default 1024; "
        "env MEMLAB_USER_CACHE_SIZE)",
    )
    p.add_argument(
        "--compute-threads",
        type=int,
        metavar="N",
        help="threads one request's model work may use (default 1: concurrent requests share the "
        "cores; env MEMLAB_COMPUTE_THREADS)",
    )
    p.add_argument(
        "--no-batch-queries",
        dest="batch_queries",
        action="store_false",
        default=None,
        help="embed each search's query on its own (default: concurrent searches share a model call)",
    )
    p.add_argument("--max-body-bytes", type=int, help="largest accepted request body (default 1 MiB)")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (N > 1 only with a database store: --<backend>.store postgresql://...)",
    )
    return p


def _backend_options(extra: list[str], backend: str) -> dict[str, Any]:
    """``--<backend>.<key> VALUE`` options (parsed as ``memlab run`` parses them) -> the backend's config."""
    from memlab.config_files import OptionError, parse_dotted_options

    sections = parse_dotted_options(extra)
    for name, options in sections.items():
        if name != backend:
            key = next(iter(options))
            raise OptionError(f"--{name}.{key}: options are for the served backend, use --{backend}.{key}")
    return sections.get(backend, {})


def build_settings(argv: list[str]) -> Any:
    from memlab.server.settings import ServerSettings, load_settings_file

    args, extra = _parser().parse_known_args(argv)
    data: dict[str, Any] = load_settings_file(args.config) if args.config else {}
    for field, value in (
        ("backend", args.backend),
        ("data_dir", args.data_dir),
        ("host", args.host),
        ("port", args.port),
        ("allow_ephemeral", args.allow_ephemeral),
        ("max_body_bytes", args.max_body_bytes),
        ("log_level", args.log_level),
        ("api_keys_file", args.api_keys_file),
        ("user_cache_size", args.user_cache_size),
        ("compute_threads", args.compute_threads),
        ("batch_queries", args.batch_queries),
    ):
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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):  # inputs are hidden (keys); say where and what
        return "invalid settings: " + "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}" for err in exc.errors()
        )
    return str(exc)


def limit_compute_threads(threads: int) -> None:
    """One request's tensor work gets ``threads`` threads. The service runs requests in parallel
    threads; letting each one's intra-op pool take every core oversubscribes the CPU (a 2-core
    machine under load answered a one-sentence MiniLM query in ~500 ms with 2 threads, ~60 ms with 1)."""
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(threads)  # read by torch / faiss / numpy when they load
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    if "faiss" in sys.modules:
        sys.modules["faiss"].omp_set_num_threads(threads)


def fail(message: str) -> int:
    print(f"memlab: error: {message}", file=sys.stderr, flush=True)
    return 2


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
            return fail(f"{exc.name or exc} is not installed: pip install 'memlab[serve]'")
        limit_compute_threads(settings.compute_threads)  # before the backend loads its models
        app = create_app(settings)
        limit_compute_threads(settings.compute_threads)  # libraries the backend had loaded already
    except (ValidationError, ValueError, MemlabError) as exc:
        return fail(_describe(exc))

    if not settings.auth_enabled:
        print(
            f"memlab serve: WARNING: no API key configured; serving without authentication on "
            f"{settings.host} (loopback only)",
            file=sys.stderr,
        )
    if hasattr(signal, "SIGHUP"):
        # Key rotation without a restart: the next request re-reads the key file.
        signal.signal(signal.SIGHUP, lambda signum, frame: app.state.keys.request_reload())
    client = app.state.client
    print(
        f"memlab serve: backend {client.backend!r}, data {settings.data_dir or 'in-process'} "
        f"(persistent: {client.persistent}), http://{settings.host}:{settings.port}",
        file=sys.stderr,
        flush=True,
    )
    try:
        if workers > 1:
            from memlab.server.workers import export_settings

            client.close()  # each worker opens its own backend (this one only checked that it opens)
            export_settings(settings)
            uvicorn.run(
                "memlab.server.workers:app",
                factory=True,
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level,
                workers=workers,
            )
        else:
            uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level, workers=1)
    finally:
        client.close()  # also when uvicorn never ran the lifespan (the port was taken); safe twice
    return 0


if __name__ == "__main__":
    sys.exit(main())
