"""What ordinary chat deletes: real dev histories replayed through a chatbot's memory, forget requests on.

    python benchmarks/bench_forget_chat.py          # every dev history
    python benchmarks/bench_forget_chat.py --show   # each deletion listed: the turn and what it took

Nobody in these histories asks the assistant to forget anything, so every deletion is a false one.
Each history goes through ``MemoryClient("full_context").remember`` 20 turns at a time, as a
chatbot stores a conversation, with forget requests on (the default): the PersonaMem 128k dev
history, then the user messages of its questions (131 distinct) after it, and the four LoCoMo dev
conversations (both speakers as the user). ``tests/test_forget_labelled.py`` checks the detector on
the same turns; this replays them end to end, matching included. The last line:
``ordinary chat: N deletions in T turns (R user turns), S s``.
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
import time
from pathlib import Path

from memlab.client import MemoryClient

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _personamem_history(data: Path) -> list[tuple[str, str]]:
    path = data / "personamem" / "128k-dev" / "shared_contexts.jsonl"
    turns = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for messages in json.loads(line).values():
            turns += [
                (m["role"], m["content"])
                for m in messages
                if m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
            ]
    return turns


def histories(data: Path) -> dict[str, list[tuple[str, str]]]:
    """(role, text) turns by history name: LoCoMo's two speakers are both users of the assistant."""
    history = _personamem_history(data)
    with (data / "personamem" / "128k-dev" / "questions.csv").open(encoding="utf-8", newline="") as handle:
        asked = dict.fromkeys(row["question"] for row in csv.DictReader(handle))
    out = {"personamem:128k-dev history, then its questions' messages": history + [("user", t) for t in asked]}
    samples = json.loads((data / "locomo" / "locomo10-dev.json").read_text(encoding="utf-8"))
    for index, sample in enumerate(samples, start=1):
        sessions = sample["conversation"].values()
        out[f"locomo:{index}"] = [
            ("user", t["text"]) for s in sessions if isinstance(s, list) for t in s if t.get("text")
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--show", action="store_true", help="list each deletion: the turn and what it took")
    args = parser.parse_args()
    for needed in ("locomo/locomo10-dev.json", "personamem/128k-dev/shared_contexts.jsonl"):
        if not (args.data / needed).is_file():
            raise SystemExit(
                f"{args.data / needed}: not found; pass --data, the folder holding personamem/ and locomo/"
            )
    deleted = turns = users = 0
    started = time.perf_counter()
    for name, history in histories(args.data).items():
        gone = []
        with tempfile.TemporaryDirectory() as tmp, MemoryClient("full_context", data_dir=tmp) as client:
            for start in range(0, len(history), 20):
                gone += client.remember("u", history[start : start + 20], session_id="chat").forgotten
        said = sum(role == "user" for role, _ in history)
        print(f"{name}: {len(gone)} deletions in {len(history)} turns ({said} user turns)")
        if args.show:
            for item in gone:
                print(f"    {item.request[:100]!r} took {item.text[:80]!r}")
        deleted, turns, users = deleted + len(gone), turns + len(history), users + said
    print(
        f"ordinary chat: {deleted} deletions in {turns} turns ({users} user turns), {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
