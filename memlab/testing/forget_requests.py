"""Scoring forget requests end to end on a labelled set (``tests/data/forget_requests/*.jsonl``).

Each case (one JSON object a line) is ``{"id", "kind": "request" | "near_miss", "pattern",
"memories": [facts], "turn": the user's turn, "forget": [indices of the facts it asks to forget]}``.
For a backend, every case runs for a fresh user through the path a chatbot uses: the facts are
stored as user turns (``MemoryClient.remember``), then the turn is sent the same way, with forget
requests on. A fact is *gone* when no memory the client still lists (pending deletions are not
listed) comes from its turn. A request is *honoured* when exactly its facts are gone; a near-miss
is a *false deletion* when it removed anything; *collateral* counts facts a request removed that it
did not ask for. ``benchmarks/bench_forget_requests.py`` prints the numbers; a test asserts them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memlab.types import MemoryItem

LABELLED = Path(__file__).resolve().parents[2] / "tests" / "data" / "forget_requests"


class ForgetCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: str = Field(pattern="^(request|near_miss)$")
    pattern: str
    memories: list[str] = Field(min_length=1)
    turn: str
    forget: list[int] = Field(default_factory=list)


def load_cases(part: str | Path) -> list[ForgetCase]:
    """The cases of ``part`` ("dev", "heldout" or a path); a bad line is one error naming it."""
    path = Path(part) if str(part).endswith(".jsonl") else LABELLED / f"{part}.jsonl"
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(ForgetCase.model_validate(json.loads(line)))
        except ValueError as exc:
            raise ValueError(f"{path}: line {number} is not a forget-request case: {exc}") from None
    return cases


def absent_referent(cases: Iterable[ForgetCase]) -> list[ForgetCase]:
    """The requests of ``cases`` with the facts they ask to forget taken away, as near-misses: a
    request for a fact that is not stored must delete nothing (anything it deletes is over-reach)."""
    return [
        ForgetCase(
            id=f"{case.id}-absent",
            kind="near_miss",
            pattern=case.pattern,
            memories=[fact for index, fact in enumerate(case.memories) if index not in case.forget],
            turn=case.turn,
        )
        for case in cases
        if case.kind == "request" and len(case.forget) < len(case.memories)
    ]


@dataclass
class Score:
    """One backend's result on one part of the set."""

    backend: str
    requests: int = 0
    honoured: int = 0
    near_misses: int = 0
    false_deletions: int = 0
    collateral: int = 0
    misses: list[str] = field(default_factory=list)  # ids of requests not honoured / near-misses that deleted

    def line(self) -> str:
        return (
            f"{self.backend}: honoured {self.honoured}/{self.requests}, false deletions "
            f"{self.false_deletions}/{self.near_misses}, collateral {self.collateral}"
        )


def _fact_turns(item: MemoryItem) -> set[int]:
    turns = {item.source["turn_index"]} if "turn_index" in item.source else set()
    return turns | {t["turn_index"] for t in item.source.get("turns", []) if isinstance(t, Mapping)}


def score_backend(
    backend: str,
    cases: Iterable[ForgetCase],
    *,
    data_dir: Path | None,
    config: Mapping[str, Any] | None = None,
    **client_options: Any,
) -> Score:
    """Run ``cases`` through a ``MemoryClient`` of ``backend`` (forget requests on) and score them."""
    from memlab.client import MemoryClient

    score = Score(backend)
    with MemoryClient(backend, dict(config or {}), data_dir=data_dir, **client_options) as client:
        for number, case in enumerate(cases):
            user = f"case-{number}"
            client.remember(user, [("user", fact) for fact in case.memories], session_id="facts")
            before = _present(client.memories(user), len(case.memories))
            client.remember(user, [("user", case.turn)], session_id="chat")
            after = _present(client.memories(user), len(case.memories))
            gone = before - after
            wanted = set(case.forget)
            if case.kind == "request":
                score.requests += 1
                score.collateral += len(gone - wanted)
                if gone == wanted:
                    score.honoured += 1
                else:
                    score.misses.append(case.id)
            else:
                score.near_misses += 1
                if gone:
                    score.false_deletions += 1
                    score.misses.append(case.id)
    return score


def _present(items: list[MemoryItem], facts: int) -> set[int]:
    """Indices of the facts (turns 0..facts-1 of session "facts") some listed memory comes from."""
    present: set[int] = set()
    for item in items:
        if item.source.get("session_id", "facts") != "facts" and not item.source.get("turns"):
            continue
        present |= {t for t in _fact_turns(item) if 0 <= t < facts and _from_facts(item, t)}
    return present


def _from_facts(item: MemoryItem, turn: int) -> bool:
    if item.source.get("session_id") == "facts" and item.source.get("turn_index") == turn:
        return True
    return any(
        isinstance(t, Mapping) and t.get("session_id") == "facts" and t.get("turn_index") == turn
        for t in item.source.get("turns", [])
    )
