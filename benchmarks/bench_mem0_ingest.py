"""What ingesting a real history costs through the mem0 backend, before and after batching.

mem0 (``add(infer=False)``) embeds every message on its own and rewrites its FAISS index and JSON
docstore after every insert. The backend reduces that without patching mem0:

* ``before``       mem0's own path: one ``add()`` per message, mem0 embeds each message alone.
* ``batch_embed``  (the default) each session is embedded in one batch first; mem0's per-message
                   ``embed`` calls inside ``add()`` are served from that batch.
* ``bulk_insert``  batch embedding plus one vector-store insert and one history batch per session,
                   storing what ``add()`` stores (tests/test_mem0.py checks the records match).

Every mode replays the PersonaMem 128k dev history (698 messages, 20 sessions) session by session
into an empty store with the default embedder (mem0's huggingface provider on the packaged MiniLM),
then asks the history's first questions and checks all modes retrieve the same turns.

    python benchmarks/bench_mem0_ingest.py                    # all three modes, whole history
    python benchmarks/bench_mem0_ingest.py --limit 200 --modes before batch_embed
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the MiniLM weights ship in a pip package
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from memlab.datasets import load_dataset  # noqa: E402
from memlab.types import Session  # noqa: E402
from memlab_plugins.mem0_backend import Mem0Memory  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "personamem" / "128k-dev"
MODES = {
    "before": {"batch_embed": False, "bulk_insert": False},
    "batch_embed": {"batch_embed": True, "bulk_insert": False},
    "bulk_insert": {"batch_embed": True, "bulk_insert": True},
}


def sessions_of(data: Path, limit: int | None) -> tuple[list[Session], list[str]]:
    dataset = load_dataset(str(data))
    if not dataset.histories:
        sys.exit(f"no history found in {data}")
    history = next(iter(dataset.histories.values()))
    stop = min(limit or len(history.messages), len(history.messages))
    questions = [q.text for q in dataset.questions_for(history.id)[:5]]
    return [s for s, _ in history.slices(0, stop)], questions


def run_mode(name: str, sessions: list[Session], questions: list[str], config: dict) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix=f"bench-mem0-{name}-"))
    try:
        started = time.perf_counter()
        memory = Mem0Memory({**config, "embedder": "huggingface"}, data_dir=data_dir)
        build = time.perf_counter() - started
        messages, seconds = 0, 0.0
        for session in sessions:
            seconds += memory.ingest(session, user_id="kanoa").seconds
            messages += len(session.messages)
        retrieved = [[i.source.get("turn_index") for i in memory.retrieve(q, user_id="kanoa", k=5).items] for q in questions]
        stored = len(memory.list_memories(user_id="kanoa"))
        memory.close()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return {"mode": name, "build": build, "messages": messages, "stored": stored, "seconds": seconds,
            "per100": seconds / messages * 100, "retrieved": retrieved}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a PersonaMem folder or questions CSV")
    parser.add_argument("--limit", type=int, default=None, help="only the first N messages of the history")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args(argv)
    if not args.data.exists():
        sys.exit(f"data not found: {args.data}")
    sessions, questions = sessions_of(args.data, args.limit)
    total = sum(len(s.messages) for s in sessions)
    print(f"history: {total} messages in {len(sessions)} sessions ({args.data})")
    rows = []
    for name in args.modes:
        row = run_mode(name, sessions, questions, MODES[name])
        rows.append(row)
        print(
            f"{name:12s} ingest {row['seconds']:8.1f} s = {row['per100']:6.2f} s per 100 messages "
            f"({row['stored']} memories; backend built in {row['build']:.1f} s)",
            flush=True,
        )
    base = rows[0]
    for row in rows[1:]:
        print(f"{row['mode']} vs {base['mode']}: {base['seconds'] / row['seconds']:.2f}x faster")
        same = row["retrieved"] == base["retrieved"]
        print(f"  same top-5 turns for the first {len(questions)} questions: {same}")
        if not same:
            print(f"  {base['mode']}: {base['retrieved']}\n  {row['mode']}: {row['retrieved']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
