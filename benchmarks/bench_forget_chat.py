"""What ordinary chat deletes: real dev histories replayed through a chatbot's memory, forget requests on.

    python benchmarks/bench_forget_chat.py          # every dev history
    python benchmarks/bench_forget_chat.py --show   # each deletion listed: the turn and what it took

Nobody in these histories asks the assistant to forget anything, so every deletion is a false one.
Each history, as memlab's loaders read it (``load_personamem``, ``load_locomo``), goes through
``MemoryClient("full_context").remember`` session by session, 20 messages at a time, as a chatbot
stores a conversation, with forget requests on (the default): the PersonaMem 128k dev history, then
the messages of its questions (131 distinct) after it, and the four LoCoMo dev conversations.
``tests/test_forget_labelled.py`` checks the detector on the same turns; this replays them end to
end, matching included. The last line: ``ordinary chat: N deletions in T messages (U from the
user), S s``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path

from memlab.client import MemoryClient
from memlab.datasets.base import Dataset
from memlab.datasets.locomo import load_locomo
from memlab.datasets.personamem import load_personamem
from memlab.types import Message, Session

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def replays(dataset: Dataset) -> Iterator[tuple[str, list[Session]]]:
    """Each history's sessions, then the messages of the questions asked of it (one more session)."""
    for history in dataset.histories.values():
        sessions = [session for session, _ in history.slices(0, len(history.messages))]
        asked = dict.fromkeys(q.text for q in dataset.questions if q.context_id == history.id)
        if asked:
            sessions.append(Session(id="questions", messages=[Message(role="user", content=t) for t in asked]))
        yield f"{dataset.name}:{history.id[:16]}", sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--show", action="store_true", help="list each deletion: the turn and what it took")
    args = parser.parse_args()
    sources = (args.data / "personamem" / "128k-dev", args.data / "locomo" / "locomo10-dev.json")
    for source in sources:
        if not source.exists():
            raise SystemExit(f"{source}: not found; pass --data, the folder holding personamem/ and locomo/")
    datasets = [load_personamem(sources[0], require_histories=True), load_locomo(sources[1])]
    deleted = messages = said = 0
    started = time.perf_counter()
    for name, sessions in (replay for dataset in datasets for replay in replays(dataset)):
        gone = []
        with MemoryClient("full_context") as client:
            for session in sessions:
                for start in range(0, len(session.messages), 20):
                    chunk = session.messages[start : start + 20]
                    gone += client.remember("u", chunk, session_id=session.id).forgotten
        turns = [m for session in sessions for m in session.messages]
        users = sum(m.role == "user" for m in turns)
        print(f"{name}: {len(gone)} deletions in {len(turns)} messages ({users} from the user)")
        if args.show:
            for item in gone:
                print(f"    {item.request[:100]!r} took {item.text[:80]!r}")
        deleted, messages, said = deleted + len(gone), messages + len(turns), said + users
    seconds = time.perf_counter() - started
    print(f"ordinary chat: {deleted} deletions in {messages} messages ({said} from the user), {seconds:.0f} s")


if __name__ == "__main__":
    main()
