"""Forget requests on the labelled set: honoured requests, false deletions, collateral, per backend.

    python benchmarks/bench_forget_requests.py                       # every part, all four backends
    python benchmarks/bench_forget_requests.py --parts dev12 --backends full_context --show

Every deleting built-in backend (full_context, rag, profile, mem0), LLM-free, with the packaged
MiniLM embedder; each case for a fresh user through ``MemoryClient.remember`` with forget requests
on: the rules, the request shapes they cannot read a subject in (``memlab.forget_shape``), the
requests the learned spotter finds where the rules find none (``memlab.forget_spotter``) and, for
a request resolved to nothing, the learned reader (``memlab.forget_reader``). Every part was written
by someone who had not read the rules. Each part was first measured held out, then read and tuned on
(dev .. dev12, heldout .. heldout51; the reader was trained on dev .. heldout35, its thresholds chosen
on heldout36 .. heldout39 and checked on heldout40 .. heldout43; the spotter was trained on dev ..
heldout39, its threshold chosen on heldout40 .. heldout43 and checked on heldout44 .. heldout47);
heldout52 .. heldout55 were written after the last change and are the held-out parts, measured
once: ``--show`` prints case ids, never turns. The last line is the held-out parts' together.
"fact not stored" replays each request with the facts it asks to forget taken away: whatever it then
deletes is over-reach.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from memlab.testing.forget_requests import Score, absent_referent, load_cases, score_backend

BACKENDS = {
    "full_context": {},
    "rag": {"embedder": "minilm"},
    "profile": {"embedder": "minilm"},
    "mem0": {},  # no LLM: one message, one memory, MiniLM vectors
}


DEV_PARTS = ("dev", "dev2", "dev3", "dev4", "dev5", "dev6", "dev7", "dev8", "dev9", "dev10", "dev11", "dev12")
# Held out until measured, then read and tuned on: a part's misses or false deletions were looked up
# after its first measure (docs/personamem-v2.md gives each part's first measure).
READ_PARTS = tuple(f"heldout{n}" for n in ("", *range(2, 52)))
HELD_OUT = ("heldout52", "heldout53", "heldout54", "heldout55")


def summary(scores: list[Score]) -> str:
    honoured = sum(s.honoured for s in scores)
    requests = sum(s.requests for s in scores)
    false = sum(s.false_deletions for s in scores)
    near = sum(s.near_misses for s in scores)
    per = ", ".join(
        f"{s.backend} {s.honoured}/{s.requests} {s.false_deletions}/{s.near_misses} collateral {s.collateral}"
        for s in scores
    )
    return f"forget requests: honoured {honoured}/{requests}, false deletions {false}/{near}, per backend {per}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts",
        nargs="+",
        default=[*DEV_PARTS, *READ_PARTS, *HELD_OUT],
        help="dev, dev2, ..., heldout, ..., heldout55 or .jsonl paths",
    )
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    parser.add_argument("--show", action="store_true", help="list the cases each backend got wrong")
    args = parser.parse_args()
    held_out: dict[str, Score] = {}
    last: list[Score] = []
    for part in args.parts:
        cases = load_cases(part)
        print(
            f"== {part}: {sum(c.kind == 'request' for c in cases)} requests, "
            f"{sum(c.kind == 'near_miss' for c in cases)} near-misses"
        )
        last = []
        for backend in args.backends:
            start = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix=f"forget-{backend}-") as tmp:
                score = score_backend(backend, cases, data_dir=Path(tmp), config=BACKENDS[backend])
            with tempfile.TemporaryDirectory(prefix=f"forget-{backend}-") as tmp:
                absent = score_backend(backend, absent_referent(cases), data_dir=Path(tmp), config=BACKENDS[backend])
            print(
                f"  {score.line()}; fact not stored: deleted something {absent.false_deletions}/{absent.near_misses}"
                f"  ({time.perf_counter() - start:.0f} s)"
            )
            if args.show and score.misses:
                print(f"    wrong: {', '.join(score.misses)}")
            last.append(score)
            if part in HELD_OUT:
                total = held_out.setdefault(backend, Score(backend))
                for name in ("requests", "honoured", "near_misses", "false_deletions", "collateral"):
                    setattr(total, name, getattr(total, name) + getattr(score, name))
        print(f"  {summary(last)}")
    if held_out:
        print(f"== held-out parts ({', '.join(p for p in args.parts if p in HELD_OUT)}) together")
    print(summary(list(held_out.values()) or last))


if __name__ == "__main__":
    main()
