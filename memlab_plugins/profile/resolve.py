"""Aspect resolution: which existing entry a new statement is about, and what operation follows.

Aspects are matched by cosine similarity of their embeddings against the *latest version of every
entry* (current or closed), so "I revisited X" can reopen X and "I stopped Y" can close Y even when
worded differently from the first mention. The decision table:

=====================  =====================  ======================================
match                  statement              operation
=====================  =====================  ======================================
none                   any                    ADD
current entry          stop cue               DELETE (closed, with the reason)
current entry          same stance / fact     NOOP (a repeat)
current entry          other stance           UPDATE (old version closed)
closed entry           likes / start cue      ADD reopening that entry (same id)
closed entry           dislikes / neutral     NOOP (already closed)
=====================  =====================  ======================================

Statements of one sentence ("I switched from coffee to tea", "I've gone vegan, so no more meat")
name different things, so an entry matched or created by one of them is not a candidate for the
others, however similar their embeddings are ("tea" and "coffee" are close in MiniLM). Within a
sentence the statement with the closest match resolves first, so in "I switched from coffee to
tea" an existing "tea" entry goes to "tea" even when "coffee" is also above the threshold for it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np

from memlab.embedders import Embedder
from memlab_plugins.profile.extract_rules import Statement
from memlab_plugins.profile.models import Evidence, Operation, OpType, ProfileEntry, Stance


@dataclass
class ViewEntry:
    """The latest version of one entry, as the resolver sees it while a session is processed."""

    id: str
    aspect: str
    stance: Stance
    current: bool
    vector: np.ndarray


class ProfileView:
    """Latest version per entry plus aspect vectors; updated as a session's operations are chosen."""

    def __init__(self, entries: list[ViewEntry], dim: int) -> None:
        self.entries = entries
        self.dim = dim

    @classmethod
    def from_versions(cls, versions: list[ProfileEntry], vectors: dict[tuple[str, int], np.ndarray], dim: int) -> "ProfileView":
        latest: dict[str, ProfileEntry] = {}
        for v in versions:
            if v.id not in latest or v.version > latest[v.id].version:
                latest[v.id] = v
        return cls(
            [ViewEntry(e.id, e.aspect, e.stance, e.current, vectors[(e.id, e.version)]) for e in latest.values()], dim
        )

    def best(self, vector: np.ndarray, exclude: set[str] | frozenset[str] = frozenset()) -> tuple[ViewEntry | None, float]:
        candidates = [e for e in self.entries if e.id not in exclude]
        if not candidates:
            return None, 0.0
        sims = np.stack([e.vector for e in candidates]) @ vector
        i = int(np.argmax(sims))
        return candidates[i], float(sims[i])

    def get(self, entry_id: str) -> ViewEntry | None:
        return next((e for e in self.entries if e.id == entry_id), None)


class Resolver:
    def __init__(self, embedder: Embedder, *, threshold: float) -> None:
        self.embedder = embedder
        self.threshold = threshold
        # text -> vector computed by the last ``resolve``; the store reuses them instead of re-embedding.
        self.vectors: dict[str, np.ndarray] = {}

    def resolve(self, statements: list[Statement], view: ProfileView, session_id: str) -> list[Operation]:
        if not statements:
            return []
        # One model call for the aspects and for the texts ADDed entries will store (see ``vectors``).
        texts = [f"{s.aspect}: {s.quote}" for s in statements]
        embedded = self.embedder.embed([s.aspect for s in statements] + texts)
        vectors = embedded[: len(statements)]
        self.vectors = {t: v for t, v in zip([s.aspect for s in statements] + texts, embedded)}
        ops: list[Operation] = []
        for group in self._sentences(statements, vectors):
            taken: set[str] = set()  # entries this sentence's statements resolved to
            # Closest match first: the statement that most plainly names an entry gets it.
            group.sort(key=lambda sv: -view.best(sv[1])[1])
            for statement, vector in group:
                ops.append(self._resolve_one(statement, vector, view, session_id, taken))
        return ops

    @staticmethod
    def _sentences(statements: list[Statement], vectors: np.ndarray) -> list[list[tuple[Statement, np.ndarray]]]:
        groups: dict[tuple[int, int], list[tuple[Statement, np.ndarray]]] = {}
        for statement, vector in zip(statements, vectors):
            groups.setdefault((statement.turn_index, statement.sentence), []).append((statement, vector))
        return list(groups.values())

    def _resolve_one(
        self, statement: Statement, vector: np.ndarray, view: ProfileView, session_id: str, taken: set[str]
    ) -> Operation:
        evidence = [Evidence(session_id=session_id, turn_index=statement.turn_index, quote=statement.quote)]
        match, sim = view.best(vector, exclude=taken)
        if match is None or sim < self.threshold:
            entry_id = "p_" + uuid.uuid4().hex[:12]
            view.entries.append(ViewEntry(entry_id, statement.aspect, statement.stance, True, vector))
            taken.add(entry_id)
            return Operation(
                op=OpType.ADD, entry_id=entry_id, aspect=statement.aspect, value=statement.quote,
                stance=statement.stance, reason=statement.reason, evidence=evidence,
            )
        taken.add(match.id)
        op = self._decide(statement, match)
        if op is OpType.NOOP:
            return Operation(op=OpType.NOOP, entry_id=match.id, reason="repeat of the current state", evidence=evidence)
        stance = Stance.DISLIKES if op is OpType.DELETE else statement.stance
        result = Operation(
            op=op,
            entry_id=match.id,
            # A reopened or updated entry keeps its aspect name, so the chain reads as one topic.
            aspect=match.aspect if op is not OpType.DELETE else None,
            value=statement.quote if op is not OpType.DELETE else None,
            stance=stance if op is not OpType.DELETE else None,
            reason=statement.reason,
            evidence=evidence,
        )
        match.stance = stance
        match.current = op is not OpType.DELETE
        return result

    @staticmethod
    def _decide(statement: Statement, match: ViewEntry) -> OpType:
        if match.current:
            if statement.change == "stop":
                return OpType.DELETE
            if statement.stance is Stance.FACT or statement.stance is match.stance:
                return OpType.NOOP
            return OpType.UPDATE
        if statement.change == "start" or statement.stance is Stance.LIKES:
            return OpType.ADD
        return OpType.NOOP
