"""What a forget request costs a chatbot: the time of ``MemoryClient.remember`` for one request turn.

    python benchmarks/bench_forget_latency.py [--items 2000] [--backend full_context]

A user with ``--items`` stored facts (made-up diary lines, with "My salary is 41,000 pounds" and "I
spent two nights in a police cell last year" among them) sends, one turn each: a request the rules'
matcher resolves, one it is not sure of (the learned reader, ``memlab.forget_reader``, reads its best
three candidates; the first such request in a process also loads the reader), and ordinary talk.
Forget requests on, as in the chatbot layer; LLM-free, the packaged MiniLM. Each line gives the
seconds and what was removed besides the request itself.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

PLACES = ("the gym", "the market", "my aunt's", "the cinema", "the park")
TOPICS = ("work", "football", "recipes", "holidays", "books")
TURNS = (
    ("the rules' matcher resolves it", "Please forget my salary."),
    ("the matcher is not sure: the reader reads", "Could you forget my brush with the law? I'd rather it wasn't kept."),
    ("ordinary talk", "I went to the cinema again today and talked about books."),
)


def main() -> None:
    from memlab.client import MemoryClient

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--backend", default="full_context", choices=["full_context", "rag", "profile", "mem0"])
    args = parser.parse_args()
    facts = [f"On day {n} I went to {PLACES[n % 5]} and talked about {TOPICS[n % 5]}" for n in range(args.items - 2)]
    facts.insert(len(facts) // 3, "My salary is 41,000 pounds")
    facts.insert(len(facts) // 2, "I spent two nights in a police cell last year")
    config = {"embedder": "minilm"} if args.backend in ("rag", "profile") else {}
    with (
        tempfile.TemporaryDirectory(prefix="forget-latency-") as tmp,
        MemoryClient(args.backend, config, data_dir=tmp) as client,
    ):
        for start in range(0, len(facts), 200):
            client.remember("u", [("user", fact) for fact in facts[start : start + 200]], session_id="facts")
        for number, (label, turn) in enumerate(TURNS):
            started = time.perf_counter()
            report = client.remember("u", [("user", turn)], session_id=f"chat-{number}")
            removed = [item.text[:50] for item in report.forgotten if item.text != turn]
            print(
                f"{args.backend}, {args.items} items, {label}: {time.perf_counter() - started:.2f} s, removed {removed}"
            )


if __name__ == "__main__":
    main()
