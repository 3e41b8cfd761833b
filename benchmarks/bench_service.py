"""Throughput and latency of the memlab REST service: search over 1,000 users, on loopback.

Starts ``memlab serve`` (the real uvicorn process, with API-key auth) on 127.0.0.1 with a fresh data
directory, gives each user a few sessions through the HTTP API, then fires search requests for
random users from a fixed number of concurrent clients and reports requests per second and
p50/p90/p99 latency (client-side, request sent to response read). Also times the ingestion.

    python benchmarks/bench_service.py                        # full_context, 1,000 users
    python benchmarks/bench_service.py --backend rag --rag.embedder hashing --json runs/bench.json
    python benchmarks/bench_service.py --backend rag --store postgresql://me@127.0.0.1/memlab --workers 2
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
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

PETS = ["cat", "dog", "parrot", "rabbit", "turtle", "hamster"]
NAMES = ["Pixel", "Miso", "Biscuit", "Juniper", "Clove", "Atlas", "Pepper", "Nimbus"]
CITIES = ["Lisbon", "Osaka", "Denver", "Tallinn", "Cusco", "Nairobi", "Quebec", "Hobart"]
HOBBIES = ["bouldering", "sourdough baking", "birdwatching", "chess", "pottery", "trail running"]
QUERIES = ["what is my pet called?", "where do I live?", "what do I do on weekends?",
           "which city did I move to?", "what are my hobbies?", "tell me about my animals"]


def user_sessions(rng: random.Random, sessions: int) -> list[dict[str, Any]]:
    out = []
    for s in range(sessions):
        pet, name, city, hobby = rng.choice(PETS), rng.choice(NAMES), rng.choice(CITIES), rng.choice(HOBBIES)
        out.append({"session_id": f"s{s}", "messages": [
            {"role": "user", "content": f"I have a {pet} named {name} and I just moved to {city}."},
            {"role": "assistant", "content": f"Congratulations on the move to {city}! How is {name} settling in?"},
            {"role": "user", "content": f"Fine. On weekends I go {hobby} while {name} sleeps."},
            {"role": "assistant", "content": f"{hobby.capitalize()} sounds like a great way to explore {city}."},
        ]})
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


async def timed_requests(client: httpx.AsyncClient, jobs: list[tuple[str, dict[str, Any]]],
                         concurrency: int) -> tuple[list[float], int, float]:
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
    ordered = sorted(latencies)
    return {
        "phase": name, "requests": len(latencies), "errors": errors, "seconds": round(wall, 3),
        "rps": round(len(latencies) / wall, 1),
        "p50_ms": round(percentile(ordered, 50) * 1000, 2), "p90_ms": round(percentile(ordered, 90) * 1000, 2),
        "p99_ms": round(percentile(ordered, 99) * 1000, 2), "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


async def run(args: argparse.Namespace, url: str, key: str) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    users = [f"user-{i:04d}" for i in range(args.users)]
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, limits=limits,
                                 timeout=60.0, trust_env=False) as client:
        ingest_jobs = [(f"/v1/users/{u}/messages", body) for u in users for body in user_sessions(rng, args.sessions)]
        ingest = summary("ingest (POST messages)", *await timed_requests(client, ingest_jobs, args.concurrency))
        search_jobs = [(f"/v1/users/{rng.choice(users)}/search", {"query": rng.choice(QUERIES), "k": args.k})
                       for _ in range(args.requests + args.warmup)]
        await timed_requests(client, search_jobs[: args.warmup], args.concurrency)
        search = summary("search (POST search)", *await timed_requests(client, search_jobs[args.warmup:], args.concurrency))
    return [ingest, search]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="full_context")
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--sessions", type=int, default=2, help="sessions (of 4 messages) per user")
    p.add_argument("--requests", type=int, default=5000, help="timed search requests")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--store", help="the backend's PostgreSQL URL (rag, profile); default: the file store")
    p.add_argument("--workers", type=int, default=1, help="service worker processes (N > 1 needs --store)")
    args, backend_args = p.parse_known_args(argv)
    if args.store:
        backend_args += [f"--{args.backend}.store", args.store]
    backend_args += ["--workers", str(args.workers)]

    key = secrets.token_urlsafe(24)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="memlab-bench-") as data_dir:
        env = {**os.environ, "MEMLAB_API_KEYS": key}
        command = [sys.executable, "-m", "memlab.server.cli", "--backend", args.backend, "--data-dir", data_dir,
                   "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", *backend_args]
        server = subprocess.Popen(command, env=env)
        try:
            deadline = time.monotonic() + 120
            while True:
                if server.poll() is not None:
                    raise SystemExit(f"server exited with {server.returncode}")
                try:
                    if httpx.get(f"{url}/healthz", timeout=1, trust_env=False).status_code == 200:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise SystemExit("server did not become ready in 120 s") from None
                    time.sleep(0.2)
            print(f"server ready at {url}; storing {args.users} users, then {args.requests} searches ...",
                  file=sys.stderr, flush=True)
            results = asyncio.run(run(args, url, key))
            report(args, backend_args, results)
        finally:
            # Graceful stop: persistent backends flush on shutdown, which can take a while.
            start = time.perf_counter()
            server.terminate()
            try:
                server.wait(timeout=300)
                print(f"server shut down in {time.perf_counter() - start:.1f} s", file=sys.stderr)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
                print("server did not shut down within 300 s and was killed", file=sys.stderr)
    return 1 if any(r["errors"] for r in results) else 0


def report(args: argparse.Namespace, backend_args: list[str], results: list[dict[str, Any]]) -> None:
    setup = {"backend": args.backend, "backend_args": backend_args, "users": args.users,
             "messages_per_user": 4 * args.sessions, "concurrency": args.concurrency, "k": args.k,
             "cpus": os.cpu_count(), "python": sys.version.split()[0]}
    print(f"memlab service benchmark: {json.dumps(setup)}")
    print(f"{'phase':<24}{'requests':>9}{'errors':>7}{'req/s':>9}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}")
    for r in results:
        print(f"{r['phase']:<24}{r['requests']:>9}{r['errors']:>7}{r['rps']:>9}{r['p50_ms']:>9}{r['p90_ms']:>9}{r['p99_ms']:>9}",
              flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"setup": setup, "results": results}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
