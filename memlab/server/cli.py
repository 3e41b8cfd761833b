"""``memlab serve``: run the REST service with uvicorn.

    memlab serve --backend profile --data-dir ./memdata --host 127.0.0.1 --port 8000 --api-key KEY

Backend options follow the CLI convention ``--<backend>.<key> VALUE`` (VALUE parsed as JSON when it
parses, else a string), e.g. ``--full_context.max_tokens 4000``. A ``--config`` file (JSON or YAML)
holds the same settings (see ``ServerSettings``); command-line flags override it. API keys also come
from ``MEMLAB_API_KEYS`` and from a key file (``--api-keys-file`` / ``MEMLAB_API_KEYS_FILE``) that is
re-read when it changes or on SIGHUP. With a file store the service runs one worker process (the
backend's state lives in it) and a second ``memlab serve`` on the same data directory is refused;
``--workers N`` runs N when the backend's store is a database (``--<backend>.store postgresql://...``
or ``MEMLAB_STORE``; see ``memlab.server.workers``); a database store needs no ``--data-dir``.
Every setting also comes from a ``MEMLAB_SERVE_*`` variable (precedence in ``settings``).

Limits against hostile clients (see ``protocol`` and ``limits``): ``--max-connections``,
``--request-timeout`` (headers and body), ``--keep-alive-timeout``, ``--rate-limit R/s`` (per key
and per address). SIGTERM stops the service within ``--graceful-timeout`` seconds: ingests in
flight stop between batches and store nothing (they were not acknowledged). Problems are reported
as one ``memlab: error: ...`` line and exit code 2.
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
        "--forget-undo-hours",
        type=float,
        metavar="H",
        help="hours a memory removed by a forget request in conversation stays restorable "
        "(POST .../memories/{id}/restore) before it is deleted for good (default 24; 0 = at once)",
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
    p.add_argument(
        "--ui",
        action="store_true",
        default=None,
        help="serve the memory inspector at /ui/ (browse, search, edit, delete, export, forget; env MEMLAB_SERVE_UI=1)",
    )
    p.add_argument("--max-body-bytes", type=int, help="largest accepted request body (default 1 MiB)")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--log-format", choices=["json", "text"], help="log lines as JSON objects or text (default text)")
    p.add_argument(
        "--log-user-ids",
        action="store_true",
        default=None,
        help="name the user in access log lines (default: off, user ids may be e-mail addresses)",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="worker processes (N > 1 only with a database store: --<backend>.store postgresql://...)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="open connections at most (default 512); over it the longest-idle connection without a request is closed",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        metavar="S",
        help="seconds a request's headers and body may take to arrive; later: 408 and closed (default 30)",
    )
    p.add_argument("--keep-alive-timeout", type=float, metavar="S", help="idle keep-alive seconds (default 5)")
    p.add_argument(
        "--graceful-timeout",
        type=float,
        metavar="S",
        help="on SIGTERM, seconds requests in flight get before they are cut (default 10)",
    )
    p.add_argument(
        "--rate-limit",
        metavar="R/s",
        help="requests per second per API key and per client address, e.g. 20/s: over it 429 with Retry-After "
        "(default: off)",
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
    """Settings from (highest first) flags, ``MEMLAB_SERVE_*`` variables, the config file, the older
    variables, the defaults; API keys from every source are merged."""
    from memlab.server.settings import ServerSettings, load_settings_file, settings_from_env

    args, extra = _parser().parse_known_args(argv)
    data: dict[str, Any] = load_settings_file(args.config) if args.config else {}
    env = settings_from_env()
    if "api_keys" in env:
        data["api_keys"] = [*data.get("api_keys", []), *env.pop("api_keys")]
    if "backend_config" in env:
        data["backend_config"] = {**data.get("backend_config", {}), **env.pop("backend_config")}
    data.update(env)
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
        ("forget_undo_hours", args.forget_undo_hours),
        ("compute_threads", args.compute_threads),
        ("batch_queries", args.batch_queries),
        ("log_format", args.log_format),
        ("log_user_ids", args.log_user_ids),
        ("workers", args.workers),
        ("max_connections", args.max_connections),
        ("request_timeout", args.request_timeout),
        ("keep_alive_timeout", args.keep_alive_timeout),
        ("graceful_timeout", args.graceful_timeout),
        ("rate_limit", args.rate_limit),
        ("ui", args.ui),
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
    from memlab.embedders.sentence_transformer import pin_compute_threads

    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(threads)  # read by torch / faiss / numpy when they load (worker processes too)
    pin_compute_threads(threads)  # and no model call changes it: their forward passes may overlap
    if "faiss" in sys.modules:
        sys.modules["faiss"].omp_set_num_threads(threads)


def fail(message: str) -> int:
    print(f"memlab: error: {message}", file=sys.stderr, flush=True)
    return 2


def raise_open_files_limit(max_connections: int) -> None:
    """Room for ``max_connections`` sockets plus the backend's files: raise the soft limit on open
    files towards the hard one (a 1,024 soft limit ran out under 1,100 idle sockets)."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + 512
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft != resource.RLIM_INFINITY and soft < wanted:
        print(
            f"memlab serve: WARNING: the open-files limit ({soft}) is low for --max-connections "
            f"{max_connections}; raise it (ulimit -n) or lower --max-connections",
            file=sys.stderr,
        )


def uvicorn_options(settings: Any) -> dict[str, Any]:
    """What ``memlab serve`` hands uvicorn: address, limits, logging (one definition for 1 and N workers)."""
    from memlab.server.logs import log_config
    from memlab.server.protocol import ACCEPT_BATCH, GuardedH11Protocol

    return {
        "host": settings.host,
        "port": settings.port,
        "http": GuardedH11Protocol,
        "backlog": ACCEPT_BATCH,  # bounds the accepts per loop turn: a flood cannot take every descriptor at once
        "timeout_keep_alive": settings.keep_alive_timeout,
        "timeout_graceful_shutdown": settings.graceful_timeout,
        "log_config": log_config(settings.log_format, settings.log_level),
        "log_level": settings.log_level,
        "access_log": False,  # it prints paths, which hold user ids: RequestTelemetry logs each request
        "server_header": False,
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``memlab serve``; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = build_settings(argv)
        settings.check_startable()
        from memlab.pg import config_uses_database
        from memlab.server.workers import check_workers

        workers = settings.workers
        check_workers(workers, settings.backend, settings.backend_config)
        database = config_uses_database(settings.backend_config)
        if settings.data_dir is None and not settings.allow_ephemeral and not database:
            raise ValueError(
                "--data-dir is required so memories survive a restart (or set MEMLAB_SERVE_DATA_DIR, "
                "pass --allow-ephemeral, or use a database store: --<backend>.store postgresql://...)"
            )
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

    raise_open_files_limit(settings.max_connections)
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
    where = settings.data_dir or ("the database" if database else "in-process")
    print(
        f"memlab serve: backend {client.backend!r}, data {where} "
        f"(persistent: {client.persistent}), http://{settings.host}:{settings.port}"
        + (f"; memory inspector: http://{settings.host}:{settings.port}/ui/" if settings.ui else ""),
        file=sys.stderr,
        flush=True,
    )
    try:
        if workers > 1:
            from memlab.server.workers import export_settings

            client.close()  # each worker opens its own backend (this one only checked that it opens)
            export_settings(settings)
            uvicorn.run("memlab.server.workers:app", factory=True, workers=workers, **uvicorn_options(settings))
        else:
            uvicorn.Server(uvicorn.Config(app, workers=1, **uvicorn_options(settings))).run()
    finally:
        client.close()  # also when uvicorn never ran the lifespan (the port was taken); safe twice
    return 0


if __name__ == "__main__":
    sys.exit(main())
