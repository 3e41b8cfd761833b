"""Ingest speed and store size of the ``profile`` backend.

Replays the sessions of a dataset (default: the PersonaMem 128k dev history) into a fresh on-disk
profile store until ``--sessions`` sessions have been ingested (histories are repeated under new
user ids when the dataset has fewer), then reports messages per second, operations by type, and
the store size per 100 sessions (SQLite file after a WAL checkpoint).

    python benchmarks/bench_profile.py                       # dev history, MiniLM, 100 sessions
    python benchmarks/bench_profile.py --embedder hashing    # model-free, measures the store itself
    python benchmarks/bench_profile.py --dataset synthetic --sessions 200

``--compare`` instead runs ``profile`` and ``rag`` through the evaluation runner with the
``embedding`` reader on the dataset and prints the per-type accuracy table (the issue's done-when).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

from memlab.datasets import load_dataset
from memlab.registry import create_backend

DEV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "personamem" / "128k-dev"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=f"personamem:{DEV}", help="dataset spec (memlab.datasets.load_dataset)")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--extractor", default="rules", choices=["rules"], help="the LLM extractor needs a model")
    parser.add_argument("--compare", action="store_true", help="profile vs rag accuracy per question type")
    parser.add_argument("--out", default="runs/profile-vs-rag", help="run directory for --compare")
    args = parser.parse_args()
    if args.compare:
        compare(args.dataset, args.out, args.embedder)
        return

    dataset = load_dataset(args.dataset)
    histories = list(dataset.histories.values())
    sessions = []
    while len(sessions) < args.sessions:
        for rep_history in histories:
            user = f"bench{len(sessions)}_{rep_history.id[:8]}"
            for part, _ in rep_history.slices(0, len(rep_history.messages)):
                sessions.append((user, part))
    sessions = sessions[: args.sessions]

    with tempfile.TemporaryDirectory() as tmp:
        mem = create_backend("profile", {"embedder": args.embedder, "extractor": args.extractor}, data_dir=tmp)
        mem.embedder.embed(["warm-up"])  # model load is not ingest time
        messages = 0
        start = time.perf_counter()
        for user, part in sessions:
            mem.ingest(part, user_id=user)
            messages += len(part.messages)
        seconds = time.perf_counter() - start
        ops = Counter(o.op.value for u in {u for u, _ in sessions} for o in mem.operations(u))
        mem.store.purge()
        mem.close()
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())

    print(f"dataset: {dataset.name}  embedder: {args.embedder}  extractor: {args.extractor}")
    print(f"sessions: {len(sessions)}  messages: {messages}  seconds: {seconds:.1f}")
    print(f"ingest speed: {messages / seconds:.1f} messages/s ({len(sessions) / seconds:.2f} sessions/s)")
    print("operations: " + ", ".join(f"{k}={v}" for k, v in sorted(ops.items())))
    print(f"store size: {size / 1024:.0f} KiB total, {size / len(sessions) * 100 / 1024:.0f} KiB per 100 sessions")


def compare(dataset: str, out: str, embedder: str) -> None:
    from memlab.report import markdown_table
    from memlab.run.driver import run
    from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig

    config = RunConfig(
        dataset=dataset,
        backends=[
            BackendSpec(name="profile", config={"embedder": embedder}),
            BackendSpec(name="rag", config={"embedder": embedder}),
        ],
        reader=ReaderSpec(name="embedding"),
        out=Path(out),
    )
    summary = run(config)
    print(markdown_table(summary))


if __name__ == "__main__":
    main()
