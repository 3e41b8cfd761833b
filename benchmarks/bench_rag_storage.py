"""rag storage under many small ingests: files and bytes on disk, ingest latency, reopen time.

A chatbot stores every message as it arrives, so a user accumulates thousands of one-message
ingests. The old layout wrote three fsynced files per ingest plus a growing manifest (1,418 files
and a 60 KB manifest after 708 single-message ingests); the snapshot + append-only log layout
(``memlab_plugins.rag.file_store``) keeps two files per user. The hashing embedder is used so that the
numbers are the storage's own cost, not the model's.

    python benchmarks/bench_rag_storage.py                 # 708 ingests, as in the issue
    python benchmarks/bench_rag_storage.py --ingests 5000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from memlab.registry import create_backend
from memlab.types import Message, Session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingests", type=int, default=708, help="single-message ingests (default: %(default)s)")
    parser.add_argument("--embedder", default="hashing", help="rag embedder (default: %(default)s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-rag-storage-") as tmp:
        data = Path(tmp)
        memory = create_backend("rag", {"embedder": args.embedder}, data_dir=data)
        seconds = []
        for i in range(args.ingests):
            message = Message(role="user", content=f"Message {i}: today I watered plant number {i} on the balcony.")
            start = time.perf_counter()
            memory.ingest(Session(id="chat", messages=[message]), user_id="u")
            seconds.append(time.perf_counter() - start)
        files = [p for p in data.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        generation = memory._stores["u"].storage.generation  # type: ignore[union-attr]
        memory.close()
        start = time.perf_counter()
        reopened = create_backend("rag", {"embedder": args.embedder}, data_dir=data)
        count = len(reopened.list_memories(user_id="u"))
        reopen = time.perf_counter() - start
        reopened.close()
    ms = sorted(s * 1000 for s in seconds)
    print(f"{args.ingests} single-message ingests ({args.embedder} embedder)")
    print(f"  files under the data dir: {len(files)} ({', '.join(sorted(p.name for p in files))})")
    print(f"  bytes on disk:            {size:,}  (compactions: {generation})")
    print(
        f"  ingest latency:           p50 {statistics.median(ms):.2f} ms, p99 {ms[int(0.99 * (len(ms) - 1))]:.2f} ms, max {ms[-1]:.2f} ms"
    )
    print(f"  reopen + list:            {reopen * 1000:.0f} ms for {count} chunks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
