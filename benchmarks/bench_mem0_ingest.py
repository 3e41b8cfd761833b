"""What ingesting, searching and deleting cost through the mem0 backend, per vector store and mode.

Stores (mem0 providers, both through mem0's public ``vector_store`` config):

* ``qdrant``  the default: embedded qdrant (``path=``, ``on_disk``), points in SQLite, one commit per
              write; survives kill -9 (tests/test_mem0_durability.py).
* ``faiss``   the former default: rewrites its whole index and JSON docstore in place after every
              insert (quadratic in the store size) and is torn by a kill mid-write.

Modes (without patching mem0):

* ``before``       mem0's own path: one ``add()`` per message, mem0 embeds each message alone.
* ``batch_embed``  (the default) each session is embedded in one batch first; mem0's per-message
                   ``embed`` calls inside ``add()`` are served from that batch.
* ``bulk_insert``  batch embedding plus one vector-store insert and one history batch per session,
                   storing what ``add()`` stores (tests/test_mem0.py checks the records match).

Every row replays the PersonaMem 128k dev history (698 messages, 20 sessions) session by session
into an empty store with the default embedder (mem0's huggingface provider on the packaged MiniLM),
asks the history's first questions (median search latency, same top-5 turns in every row?), reopens
the store, and deletes a few memories (a delete also scrubs history and VACUUMs the SQLite files).

    python benchmarks/bench_mem0_ingest.py                              # qdrant and faiss, batch_embed
    python benchmarks/bench_mem0_ingest.py --limit 200 --stores qdrant --modes before batch_embed bulk_insert
    python benchmarks/bench_mem0_ingest.py --embedder hashing            # the stores alone, no model
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the MiniLM weights ship in a pip package
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

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
STORES = ("qdrant", "faiss")
DELETES = 5


def sessions_of(data: Path, limit: int | None) -> tuple[list[Session], list[str]]:
    dataset = load_dataset(str(data))
    if not dataset.histories:
        sys.exit(f"no history found in {data}")
    history = next(iter(dataset.histories.values()))
    stop = min(limit or len(history.messages), len(history.messages))
    questions = [q.text for q in dataset.questions_for(history.id)[:5]]
    return [s for s, _ in history.slices(0, stop)], questions


def config_for(store: str, mode: str, data_dir: Path, embedder: str) -> dict[str, Any]:
    config: dict[str, Any] = {**MODES[mode], "embedder": embedder}
    if store == "faiss":
        dims = 256 if embedder == "hashing" else 384
        config["vector_store"] = {
            "provider": "faiss",
            "config": {"collection_name": "memlab", "path": str(data_dir / "faiss"), "embedding_model_dims": dims},
        }
    return config


def run_row(store: str, mode: str, sessions: list[Session], questions: list[str], embedder: str) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix=f"bench-mem0-{store}-{mode}-"))
    config = config_for(store, mode, data_dir, embedder)
    try:
        started = time.perf_counter()
        memory = Mem0Memory(config, data_dir=data_dir)
        build = time.perf_counter() - started
        messages, seconds = 0, 0.0
        for session in sessions:
            seconds += memory.ingest(session, user_id="kanoa").seconds
            messages += len(session.messages)
        searches, retrieved = [], []
        for question in questions:
            result = memory.retrieve(question, user_id="kanoa", k=5)
            searches.append(result.seconds)
            retrieved.append([i.source.get("turn_index") for i in result.items])
        memory.close()
        started = time.perf_counter()
        memory = Mem0Memory(config, data_dir=data_dir)
        reopen = time.perf_counter() - started
        items = memory.list_memories(user_id="kanoa")
        deletes = []
        for item in items[:DELETES]:
            started = time.perf_counter()
            memory.delete(item.id, user_id="kanoa")
            deletes.append(time.perf_counter() - started)
        memory.close()
        disk = sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file())
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "row": f"{store}/{mode}",
        "build": build,
        "messages": messages,
        "stored": len(items),
        "seconds": seconds,
        "per100": seconds / messages * 100,
        "retrieved": retrieved,
        "search_ms": statistics.median(searches) * 1000,
        "reopen": reopen,
        "delete_ms": statistics.median(deletes) * 1000 if deletes else 0.0,
        "disk_mb": disk / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a PersonaMem folder or questions CSV")
    parser.add_argument("--limit", type=int, default=None, help="only the first N messages of the history")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=["batch_embed"])
    parser.add_argument(
        "--embedder",
        default="huggingface",
        choices=["huggingface", "hashing"],
        help="'hashing' (model-free) isolates what the stores cost",
    )
    args = parser.parse_args(argv)
    if not args.data.exists():
        sys.exit(f"data not found: {args.data}")
    sessions, questions = sessions_of(args.data, args.limit)
    total = sum(len(s.messages) for s in sessions)
    print(
        f"history: {total} messages in {len(sessions)} sessions ({args.data}); embedder {args.embedder}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"{'store/mode':22s} {'ingest s':>9s} {'s/100 msg':>9s} {'search ms':>9s} {'reopen s':>8s} "
        f"{'delete ms':>9s} {'disk MB':>8s} memories"
    )
    rows = []
    for store in args.stores:
        for mode in args.modes:
            row = run_row(store, mode, sessions, questions, args.embedder)
            rows.append(row)
            print(
                f"{row['row']:22s} {row['seconds']:9.1f} {row['per100']:9.2f} {row['search_ms']:9.1f} "
                f"{row['reopen']:8.2f} {row['delete_ms']:9.1f} {row['disk_mb']:8.2f} {row['stored']}",
                flush=True,
            )
    base = rows[0]
    for row in rows[1:]:
        print(
            f"{row['row']} vs {base['row']}: ingest {base['seconds'] / row['seconds']:.2f}x as fast; "
            f"same top-5 turns for the first {len(questions)} questions: {row['retrieved'] == base['retrieved']}"
        )
        if row["retrieved"] != base["retrieved"]:
            print(f"  {base['row']}: {base['retrieved']}\n  {row['row']}: {row['retrieved']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
