"""The memlab REST service on PostgreSQL with 1 and 2 workers, beside the file store, on loopback.

For each backend (rag, profile; MiniLM embedder by default) it starts ``memlab serve`` with

- the file store (``--data-dir``, one worker: the only way a file store may run), and
- ``--<backend>.store URL`` with ``--workers 1`` and ``--workers 2``,

stores ``--users`` users (``--sessions`` sessions of 4 messages each, through the HTTP API), then
fires ``--requests`` searches for random users with ``--concurrency`` requests in flight, and prints
req/s and p50/p99 latency of both phases. Without ``--store`` a temporary PostgreSQL with pgvector
(the ``pgserver`` package) is started in a temporary directory and deleted after.

    python benchmarks/bench_service_pg.py                              # temporary database
    python benchmarks/bench_service_pg.py --store postgresql://me@127.0.0.1:5432/memlab --json runs/pg.json

Request bodies, latencies and reports are those of ``benchmarks/bench_service.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_service import QUERIES, served, summary, timed_requests, user_sessions  # noqa: E402


def temporary_database(root: Path) -> tuple[str, Any]:
    import pgserver

    root.chmod(0o755)
    server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    socket_dir = server.get_uri().split("host=", 1)[1]
    return f"postgresql://postgres@/postgres?host={quote(socket_dir, safe='/')}", server


async def phases(args: argparse.Namespace, url: str, key: str, prefix: str) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    users = [f"{prefix}-{i:04d}" for i in range(args.users)]
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, limits=limits, timeout=120.0, trust_env=False
    ) as client:
        ingest_jobs = [(f"/v1/users/{u}/messages", body) for u in users for body in user_sessions(rng, args.sessions)]
        ingest = summary("ingest", *await timed_requests(client, ingest_jobs, args.concurrency))
        jobs = [
            (f"/v1/users/{rng.choice(users)}/search", {"query": rng.choice(QUERIES), "k": args.k})
            for _ in range(args.requests + args.warmup)
        ]
        await timed_requests(client, jobs[: args.warmup], args.concurrency)
        search = summary("search", *await timed_requests(client, jobs[args.warmup :], args.concurrency))
    return [ingest, search]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", help="PostgreSQL URL (default: a temporary server)")
    p.add_argument("--backends", default="rag,profile")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--workers", default="1,2", help="worker counts to run on the database store")
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--sessions", type=int, default=2)
    p.add_argument("--requests", type=int, default=800)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-file-store", action="store_true", help="skip the file-store baseline")
    p.add_argument("--json")
    args = p.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="mlbpg-", dir="/tmp"))
    pg = None
    rows: list[dict[str, Any]] = []
    try:
        store = args.store
        if store is None:
            store, pg = temporary_database(root)
        key = secrets.token_urlsafe(24)
        for backend in args.backends.split(","):
            runs = [] if args.no_file_store else [("file", 1)]
            runs += [("postgresql", int(w)) for w in args.workers.split(",")]
            for number, (kind, workers) in enumerate(runs):
                extra = [f"--{backend}.embedder", args.embedder, "--workers", str(workers)]
                if kind == "postgresql":
                    extra += [f"--{backend}.store", store]
                work = Path(tempfile.mkdtemp(prefix="serve-", dir=root))
                print(f"{backend} / {kind} / {workers} worker(s) ...", file=sys.stderr, flush=True)
                with served(backend, key, work, extra) as url:
                    results = asyncio.run(phases(args, url, key, f"{backend}{number}w{workers}"))
                for r in results:
                    rows.append({"backend": backend, "store": kind, "workers": workers, **r})
    finally:
        if pg is not None:
            pg.cleanup()
        shutil.rmtree(root, ignore_errors=True)

    setup = {
        "embedder": args.embedder,
        "users": args.users,
        "messages_per_user": 4 * args.sessions,
        "requests": args.requests,
        "concurrency": args.concurrency,
        "k": args.k,
        "cpus": os.cpu_count(),
    }
    print(f"memlab service on PostgreSQL: {json.dumps(setup)}")
    print(
        f"{'backend':<9}{'store':<12}{'workers':>8}  {'phase':<8}{'requests':>9}{'errors':>7}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
    )
    for r in rows:
        print(
            f"{r['backend']:<9}{r['store']:<12}{r['workers']:>8}  {r['phase']:<8}{r['requests']:>9}{r['errors']:>7}"
            f"{r['rps']:>9}{r['p50_ms']:>9}{r['p99_ms']:>9}"
        )
    pg_search = {(r["backend"], r["workers"]): r for r in rows if r["store"] == "postgresql" and r["phase"] == "search"}
    for backend in args.backends.split(","):
        one, two = pg_search.get((backend, 1)), pg_search.get((backend, 2))
        if one and two:
            print(f"{backend}: search req/s with 2 workers / 1 worker = {two['rps'] / one['rps']:.2f}x")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"setup": setup, "results": rows}, indent=2))
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
