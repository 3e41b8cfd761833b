"""How one retrieve's cost grows with the history: rag (or another backend) at two history sizes.

    python benchmarks/bench_retrieve_scaling.py [--backend rag] [--sizes 5000,20000] [--embedder hashing]

The history is the PersonaMem 128k dev history's sessions repeated (each copy with its own session
ids) up to each size. It is replayed the way the runner does: ``--checkpoints`` question points
spread evenly over it, everything between two points ingested in one ``ingest_many``, then
``--queries`` of the dev questions retrieved (so the first retrieve after an ingest pays for
bringing derived indexes such as BM25 up to date). Prints, per size, the mean retrieve per query
over the whole replay and the median at the last point (full history), and the ratios of the
largest size to the smallest, with the load average. The embedder defaults to the model-free
hashing embedder so that the numbers are about the backend's own work.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

from result_files import RetrieveScalingResult, ScalingPoint  # noqa: E402 - benchmarks/ is on sys.path as a script

from memlab.datasets import load_dataset  # noqa: E402
from memlab.registry import create_backend  # noqa: E402
from memlab.types import Session  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "personamem" / "128k-dev"


def long_history(dataset: str, size: int) -> tuple[list[Session], list[str]]:
    """Sessions of the dataset's first history, repeated with fresh ids until ``size`` messages; its questions."""
    data = load_dataset(dataset)
    history = next(iter(data.histories.values()))
    base = [s for s, _ in history.slices(0, len(history.messages))]
    sessions: list[Session] = []
    held = copy = 0
    while held < size:
        for part in base:
            if held >= size:
                break
            messages = part.messages[: size - held]
            sessions.append(Session(id=f"c{copy}-{part.id}", messages=messages, metadata=part.metadata))
            held += len(messages)
        copy += 1
    return sessions, [q.text for q in data.questions_for(history.id)]


def replay(backend: str, config: dict, sessions: list[Session], queries: list[str], checkpoints: int, per: int):  # type: ignore[no-untyped-def,type-arg]
    memory = create_backend(backend, config)
    bounds = [round(len(sessions) * (i + 1) / checkpoints) for i in range(checkpoints)]
    times: list[list[float]] = []
    done = 0
    for number, bound in enumerate(bounds):
        if bound > done:
            memory.ingest_many(sessions[done:bound], user_id="u")
            done = bound
        point = []
        for i in range(per):
            query = queries[(number * per + i) % len(queries)]
            started = time.perf_counter()
            memory.retrieve(query, user_id="u")
            point.append(time.perf_counter() - started)
        times.append(point)
    memory.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(DEFAULT_DATA))
    parser.add_argument("--backend", default="rag")
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--sizes", default="5000,20000", help="history sizes in messages")
    parser.add_argument("--checkpoints", type=int, default=21, help="question points over the history")
    parser.add_argument("--queries", type=int, default=7, help="retrieves at each point")
    parser.add_argument("--json", type=Path, default=None, help="also write the table's result file here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    from memlab.registry import backends

    fields = backends.get(args.backend).Config.model_fields
    config = {"embedder": args.embedder} if "embedder" in fields else {}  # full_context and none embed nothing
    results = {}
    points: list[ScalingPoint] = []
    for size in sizes:
        sessions, queries = long_history(args.dataset, size)
        before = os.getloadavg()
        times = replay(args.backend, config, sessions, queries, args.checkpoints, args.queries)
        flat = [t for point in times for t in point]
        mean, last = statistics.mean(flat), statistics.median(times[-1])
        results[size] = (mean, last)
        points.append(
            ScalingPoint(
                messages=size,
                queries=len(flat),
                mean_ms=1000 * mean,
                full_history_ms=1000 * last,
                load_before=before[0],
                load_after=os.getloadavg()[0],
            )
        )
        print(
            f"{args.backend} ({args.embedder}) at {size:,} messages: mean retrieve {1000 * mean:.1f} ms over "
            f"{len(flat)} queries, median at the full history {1000 * last:.1f} ms "
            f"(load average before {before[0]:.2f}, after {os.getloadavg()[0]:.2f})",
            flush=True,
        )
    small, large = min(sizes), max(sizes)
    print(
        f"ratio {large:,} / {small:,} messages: mean {results[large][0] / results[small][0]:.2f}x, "
        f"at the full history {results[large][1] / results[small][1]:.2f}x"
    )
    if args.json:
        RetrieveScalingResult(backend=args.backend, embedder=args.embedder, points=points).save(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
