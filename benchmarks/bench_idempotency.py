"""What an idempotency key costs a write: ``MemoryClient.remember`` with and without a key.

    python benchmarks/bench_idempotency.py [--backend full_context] [--writes 500]

Each write with a key records its intent and then its result in the idempotency log (two SQLite
commits, synchronous=FULL) around the backend's own durable write. Prints the mean time per call
of each, one user, one session, a fresh data directory each.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="full_context")
    parser.add_argument("--writes", type=int, default=500)
    args = parser.parse_args()
    from memlab.client import MemoryClient

    options = {} if args.backend == "full_context" else {"embedder": "hashing"}
    for keyed in (False, True):
        with tempfile.TemporaryDirectory() as data, MemoryClient(args.backend, options, data_dir=data) as client:
            start = time.perf_counter()
            for i in range(args.writes):
                key = f"k{i}" if keyed else None
                client.remember("alice", [("user", f"fact {i}")], session_id="s", idempotency_key=key)
            per_call = (time.perf_counter() - start) / args.writes * 1000
        print(f"{args.backend}, {args.writes} remember calls, idempotency_key={keyed}: {per_call:.2f} ms per call")


if __name__ == "__main__":
    main()
