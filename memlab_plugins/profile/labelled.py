"""Operation precision and recall of the LLM-free extractor on a labelled set of attribute statements.

A labelled file (JSON lines; tests/data/profile_value_ops.jsonl) holds short conversations, one
per line: ``{"id", "sessions": [[user turn, ...], ...], "ops": [[op, attribute, value], ...]}``.
Each conversation is replayed into a fresh profile (hashing embedder: attribute statements are
resolved by name, so the embedder does not matter), and the operations on *attribute* entries are
compared with the expected ones, in order-free multiset fashion: an operation matches an expected
one with the same op type, the same attribute and the same value (``Resolver._same``: case,
articles and a shared head word do not count). Stance statements ("I love jazz") are outside this
measure, and so are NOOPs that name no entry ("I quit my job" with no job known).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from memlab.registry import create_backend
from memlab.testing import session
from memlab_plugins.profile.resolve import Resolver

Op = tuple[str, str, str]


@dataclass
class Score:
    expected: int = 0
    predicted: int = 0
    matched: int = 0
    misses: list[tuple[str, Op]] = field(default_factory=list)  # expected, not produced
    extras: list[tuple[str, Op]] = field(default_factory=list)  # produced, not expected

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.expected if self.expected else 1.0


def predicted_ops(sessions: list[list[str]]) -> list[Op]:
    """The attribute operations the rules extractor applies for a conversation, in order."""
    mem = create_backend("profile", {"embedder": "hashing", "supporting_turns": 0})
    try:
        for n, turns in enumerate(sessions):
            mem.ingest(session(f"s{n}", *[("user", t) for t in turns]), user_id="u")
        versions = {(v.id, v.version): v for v in mem.get_profile("u", include_closed=True)}
        out: list[Op] = []
        for record in mem.operations("u"):
            entry = versions.get((record.entry_id or "", record.version or 0))
            if entry is not None and entry.kind == "attribute":
                out.append((record.op.value, entry.aspect, entry.value))
        return out
    finally:
        mem.close()


def _matches(a: Op, b: Op) -> bool:
    return a[0] == b[0] and a[1].lower() == b[1].lower() and Resolver._same(a[2], b[2])


def score(path: str | Path) -> Score:
    total = Score()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        expected: list[Op] = [tuple(op) for op in row["ops"]]
        predicted = predicted_ops(row["sessions"])
        total.expected += len(expected)
        total.predicted += len(predicted)
        left = list(expected)
        for op in predicted:
            hit = next((e for e in left if _matches(op, e)), None)
            if hit is None:
                total.extras.append((row["id"], op))
            else:
                left.remove(hit)
                total.matched += 1
        total.misses += [(row["id"], op) for op in left]
    return total
