"""Throughput and latency of the memlab REST service on loopback, and whether users block each other.

For each backend (default: profile, rag and mem0, with the packaged MiniLM embedder) it starts
``memlab serve`` (the real uvicorn process, with API-key auth) on 127.0.0.1 with a fresh data
directory, gives ``--users`` users a few sessions through the HTTP API, then measures
(client-side latency, request sent to response read):

1. search req/s and p50/p90/p99 with 1 and with 8 concurrent clients (``--clients``);
2. another user's search latency while one user ingests 300 messages per request
   (``--ingest-messages``), one request after another for ``--ingest-window`` seconds (default 10): a
   client searches other users back to back for as long as user A's ingests run.

It ends with the issue-15/25 targets: that search's p99 <= 200 ms, and search req/s with 8 clients
>= 1.5x one client.

    python benchmarks/bench_service.py                                  # profile, rag and mem0, MiniLM
    python benchmarks/bench_service.py --backends full_context --users 1000 --json runs/bench.json
    python benchmarks/bench_service.py --backends rag --rag.embedder hashing
    python benchmarks/bench_service.py --backends rag --store postgresql://me@127.0.0.1/memlab --workers 2
    (benchmarks/bench_service_pg.py runs file store, 1 and 2 workers on PostgreSQL side by side)

Everything stays on this machine; the run is bounded by --requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from result_files import ServicePhase, ServiceResult  # benchmarks/ is on sys.path as a script

from memlab.testing.server_process import ServerStartError, start_memlab_serve

PETS = ["cat", "dog", "parrot", "rabbit", "turtle", "hamster"]
NAMES = ["Pixel", "Miso", "Biscuit", "Juniper", "Clove", "Atlas", "Pepper", "Nimbus"]
CITIES = ["Lisbon", "Osaka", "Denver", "Tallinn", "Cusco", "Nairobi", "Quebec", "Hobart"]
HOBBIES = ["bouldering", "sourdough baking", "birdwatching", "chess", "pottery", "trail running"]
QUERIES = [
    "what is my pet called?",
    "where do I live?",
    "what do I do on weekends?",
    "which city did I move to?",
    "what are my hobbies?",
    "tell me about my animals",
]


def user_sessions(rng: random.Random, sessions: int) -> list[dict[str, Any]]:
    out = []
    for s in range(sessions):
        pet, name, city, hobby = rng.choice(PETS), rng.choice(NAMES), rng.choice(CITIES), rng.choice(HOBBIES)
        out.append(
            {
                "session_id": f"s{s}",
                "messages": [
                    {"role": "user", "content": f"I have a {pet} named {name} and I just moved to {city}."},
                    {
                        "role": "assistant",
                        "content": f"Congratulations on the move to {city}! How is {name} settling in?",
                    },
                    {"role": "user", "content": f"Fine. On weekends I go {hobby} while {name} sleeps."},
                    {
                        "role": "assistant",
                        "content": f"{hobby.capitalize()} sounds like a great way to explore {city}.",
                    },
                ],
            }
        )
    return out


def percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


async def timed_requests(
    client: httpx.AsyncClient, jobs: list[tuple[str, dict[str, Any]]], concurrency: int
) -> tuple[list[float], int, float]:
    """POST every (path, body) with ``concurrency`` requests in flight; latencies in seconds."""
    latencies: list[float] = []
    errors = 0
    queue = iter(jobs)

    async def worker() -> None:
        nonlocal errors
        for path, body in queue:
            start = time.perf_counter()
            response = await client.post(path, json=body)
            latencies.append(time.perf_counter() - start)
            if response.status_code >= 400:
                errors += 1
                if errors <= 3:
                    print(f"  error {response.status_code}: {response.text[:200]}", file=sys.stderr)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors, time.perf_counter() - start


def summary(name: str, latencies: list[float], errors: int, wall: float) -> dict[str, Any]:
    """A phase's row; its latencies are None when it timed no request."""
    ordered = sorted(latencies)
    latency: dict[str, float | None] = dict.fromkeys(("p50_ms", "p90_ms", "p99_ms", "mean_ms"))
    if ordered:
        latency = {f"p{q}_ms": round(percentile(ordered, q) * 1000, 2) for q in (50, 90, 99)}
        latency["mean_ms"] = round(statistics.fmean(ordered) * 1000, 2)
    return {
        "phase": name,
        "requests": len(latencies),
        "errors": errors,
        "seconds": round(wall, 3),
        "rps": round(len(latencies) / wall, 1),
        **latency,
    }


async def populate(
    client: httpx.AsyncClient, args: argparse.Namespace, users: list[str], rng: random.Random
) -> dict[str, Any]:
    jobs = [(f"/v1/users/{u}/messages", body) for u in users for body in user_sessions(rng, args.sessions)]
    return summary("ingest (POST messages)", *await timed_requests(client, jobs, 8))


async def searches(
    client: httpx.AsyncClient, args: argparse.Namespace, users: list[str], rng: random.Random, clients: int
) -> dict[str, Any]:
    jobs = [
        (f"/v1/users/{rng.choice(users)}/search", {"query": rng.choice(QUERIES), "k": args.k})
        for _ in range(args.requests + args.warmup)
    ]
    await timed_requests(client, jobs[: args.warmup], clients)
    return summary(
        f"search, {clients} client{'s' if clients > 1 else ''}",
        *await timed_requests(client, jobs[args.warmup :], clients),
    )


async def search_during_ingest(
    client: httpx.AsyncClient, args: argparse.Namespace, users: list[str], rng: random.Random
) -> list[dict[str, Any]]:
    """User A ingests ``--ingest-messages`` messages per request, one request after another (each a new
    session) for at least ``--ingest-window`` seconds; user B searches back to back meanwhile. Only
    searches that start and end while an ingest is in flight count, so the sample does not shrink
    when an ingest gets faster."""
    messages = []
    while len(messages) < args.ingest_messages:
        for session in user_sessions(rng, 1):
            messages.extend(session["messages"])
    messages = messages[: args.ingest_messages]
    ingests: list[float] = []
    latencies: list[float] = []
    errors = 0
    done = asyncio.Event()

    async def ingest() -> None:
        first = time.perf_counter()
        while not ingests or time.perf_counter() - first < args.ingest_window:
            start = time.perf_counter()
            response = await client.post(
                "/v1/users/ingesting-user/messages",
                json={"session_id": f"big-{len(ingests)}", "messages": messages},
            )
            if response.status_code != 201:
                print(f"  ingest error {response.status_code}: {response.text[:200]}", file=sys.stderr)
            ingests.append(time.perf_counter() - start)
        done.set()

    async def searcher() -> None:
        nonlocal errors
        await asyncio.sleep(0.05)  # let the first ingest reach the server
        while not done.is_set():
            start = time.perf_counter()
            response = await client.post(
                f"/v1/users/{rng.choice(users)}/search", json={"query": rng.choice(QUERIES), "k": args.k}
            )
            if not done.is_set():
                latencies.append(time.perf_counter() - start)
            errors += response.status_code >= 400

    start = time.perf_counter()
    await asyncio.gather(ingest(), searcher())
    wall = time.perf_counter() - start
    meanwhile = summary("other user's search meanwhile", latencies, errors, wall)
    big = summary(f"ingest {args.ingest_messages} msgs (1 req)", ingests, 0, wall)
    big["rps"] = round(args.ingest_messages * len(ingests) / wall, 1)  # messages per second, for this row
    return [big, meanwhile]


async def run(args: argparse.Namespace, url: str, key: str) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    users = [f"user-{i:04d}" for i in range(args.users)]
    most = max(args.clients)
    limits = httpx.Limits(max_connections=most + 2, max_keepalive_connections=most + 2)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, limits=limits, timeout=120.0, trust_env=False
    ) as client:
        results = [await populate(client, args, users, rng)]
        for clients in args.clients:
            results.append(await searches(client, args, users, rng, clients))
        results += await search_during_ingest(client, args, users, rng)
    return results


@contextmanager
def served(backend: str, key: str, work: Path, extra: list[str], *, wait_s: float = 300) -> Iterator[str]:
    """A real ``memlab serve`` process on a free 127.0.0.1 port with its data directory under ``work``;
    yields its URL once it is ready (``/healthz``), and stops it gracefully after the block (persistent
    backends flush on shutdown, which can take a while), then shows what it logged."""
    log = work / "server.log"
    args = ["--backend", backend, "--data-dir", str(work / "data"), *extra]
    try:
        server = start_memlab_serve(*args, log=log, api_keys=key, timeout=wait_s, stop_timeout=300)
    except ServerStartError as exc:
        raise SystemExit(str(exc)) from None
    with server:
        yield server.url
    if output := log.read_text(errors="replace").strip():
        print(f"[{backend}] server log:\n{output}", file=sys.stderr)


def bench_backend(args: argparse.Namespace, backend: str, backend_args: list[str]) -> list[dict[str, Any]]:
    key = secrets.token_urlsafe(24)
    own_args = [
        a
        for i, a in enumerate(backend_args)
        if a.startswith(f"--{backend}.") or (i and backend_args[i - 1].startswith(f"--{backend}."))
    ]
    if args.store:
        own_args += [f"--{backend}.store", args.store]
    with tempfile.TemporaryDirectory(prefix="memlab-bench-") as work:
        with served(backend, key, Path(work), ["--workers", str(args.workers), *own_args], wait_s=180) as url:
            print(
                f"[{backend}] server ready at {url}; storing {args.users} users, then searches ...",
                file=sys.stderr,
                flush=True,
            )
            results = asyncio.run(run(args, url, key))
    report(args, backend, own_args, results)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--backends", default="profile,rag,mem0", help="comma-separated backends (default: profile,rag,mem0)"
    )
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--sessions", type=int, default=2, help="sessions (of 4 messages) per user")
    p.add_argument("--requests", type=int, default=400, help="timed search requests per client setting")
    p.add_argument("--warmup", type=int, default=40)
    p.add_argument("--clients", default="1,8", help="concurrent search clients to compare (default 1,8)")
    p.add_argument("--ingest-messages", type=int, default=300, help="messages of each big ingest")
    p.add_argument(
        "--ingest-window", type=float, default=10.0, help="seconds of back-to-back big ingests to search during"
    )
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the results here (result_files.ServiceResult, for the docs' table)")
    p.add_argument("--store", help="the backends' PostgreSQL URL (rag, profile); default: the file store")
    p.add_argument("--workers", type=int, default=1, help="service worker processes (N > 1 needs --store)")
    args, backend_args = p.parse_known_args(argv)
    args.clients = [int(c) for c in str(args.clients).split(",")]
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load and ' '.join(f'{x:.2f}' for x in load)}, "
        f"python {sys.version.split()[0]}",
        flush=True,
    )
    everything: dict[str, Any] = {}
    failed = False
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        results = bench_backend(args, backend, backend_args)
        everything[backend] = results
        failed |= any(r["errors"] for r in results)
    if args.json:
        ServiceResult(
            cpu_cores=os.cpu_count(),
            load_average=list(load) if load else None,
            users=args.users,
            clients=args.clients,
            ingest_messages=args.ingest_messages,
            ingest_window=args.ingest_window,
            backends={backend: [ServicePhase(**r) for r in rows] for backend, rows in everything.items()},
        ).save(args.json)
    return 1 if failed else 0


def report(args: argparse.Namespace, backend: str, backend_args: list[str], results: list[dict[str, Any]]) -> None:
    setup = {
        "backend": backend,
        "backend_args": backend_args,
        "users": args.users,
        "messages_per_user": 4 * args.sessions,
        "k": args.k,
        "requests": args.requests,
    }
    print(f"\nmemlab service benchmark: {json.dumps(setup)}")
    print("(the big ingest's req/s column is messages per second; its latency is the whole request)")
    print(f"{'phase':<34}{'requests':>9}{'errors':>7}{'req/s':>9}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}")
    for r in results:
        p50, p90, p99 = (str(r[k]) if r[k] is not None else "-" for k in ("p50_ms", "p90_ms", "p99_ms"))
        print(f"{r['phase']:<34}{r['requests']:>9}{r['errors']:>7}{r['rps']:>9}{p50:>9}{p90:>9}{p99:>9}", flush=True)
    by_phase = {r["phase"]: r for r in results}
    meanwhile = by_phase["other user's search meanwhile"]
    print(
        f"target: other user's search p99 during {args.ingest_messages}-message ingests <= 200 ms: "
        f"{meanwhile['p99_ms']} ms ({meanwhile['requests']} searches during "
        f"{by_phase[f'ingest {args.ingest_messages} msgs (1 req)']['requests']} ingests) -> "
        f"{'PASS' if meanwhile['p99_ms'] is not None and meanwhile['p99_ms'] <= 200 else 'FAIL'}"
    )
    one, most = by_phase.get("search, 1 client"), by_phase.get(f"search, {max(args.clients)} clients")
    if one and most:
        ratio = most["rps"] / one["rps"]
        print(
            f"target: search req/s with {max(args.clients)} clients >= 1.5x 1 client: {most['rps']} / "
            f"{one['rps']} = {ratio:.2f}x -> {'PASS' if ratio >= 1.5 else 'FAIL'}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
