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

Attribute statements ("lives in" = "Berlin", from ``extract_values``) are matched by attribute name,
not by embedding (two cities are close in any embedding but are different values of one attribute):

=====================  =====================  ======================================
attribute entry        statement              operation
=====================  =====================  ======================================
current, same value    a value                NOOP (a repeat)
current, other value   a value                UPDATE (old value closed, reason kept)
closed                 a value                ADD reopening that entry (same id)
none                   a value                ADD (and, when the sentence names the
                                              old value, ADD old + UPDATE to new)
current                stop (same or no       DELETE (closed, with the reason)
                       value given)
none / other value     stop with a value      ADD the old value + DELETE it (a former
                                              job or home is still worth knowing)
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
from memlab_plugins.profile.extract_values import normalise
from memlab_plugins.profile.models import Evidence, Operation, OpType, ProfileEntry, Stance


@dataclass
class ViewEntry:
    """The latest version of one entry, as the resolver sees it while a session is processed."""

    id: str
    aspect: str
    stance: Stance
    current: bool
    vector: np.ndarray
    value: str = ""
    kind: str = "statement"


class ProfileView:
    """Latest version per entry plus aspect vectors; updated as a session's operations are chosen."""

    def __init__(self, entries: list[ViewEntry], dim: int) -> None:
        self.entries = entries
        self.dim = dim

    @classmethod
    def from_versions(
        cls, versions: list[ProfileEntry], vectors: dict[tuple[str, int], np.ndarray], dim: int
    ) -> ProfileView:
        latest: dict[str, ProfileEntry] = {}
        for v in versions:
            if v.id not in latest or v.version > latest[v.id].version:
                latest[v.id] = v
        return cls(
            [
                ViewEntry(e.id, e.aspect, e.stance, e.current, vectors[(e.id, e.version)], e.value, e.kind)
                for e in latest.values()
            ],
            dim,
        )

    def best(
        self, vector: np.ndarray, exclude: set[str] | frozenset[str] = frozenset()
    ) -> tuple[ViewEntry | None, float]:
        # Attribute entries are found by name (``attribute``), never by embedding similarity.
        candidates = [e for e in self.entries if e.id not in exclude and e.kind != "attribute"]
        if not candidates:
            return None, 0.0
        sims = np.stack([e.vector for e in candidates]) @ vector
        i = int(np.argmax(sims))
        return candidates[i], float(sims[i])

    def attribute(self, name: str) -> ViewEntry | None:
        """The attribute entry called ``name``: the current one, else the latest closed one."""
        named = [e for e in self.entries if e.kind == "attribute" and e.aspect.lower() == name.lower()]
        return next((e for e in reversed(named) if e.current), named[-1] if named else None)


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
        texts = [f"{s.aspect}: {s.value if s.value is not None else s.quote}" for s in statements]
        texts += [f"{s.aspect}: {s.old_value}" for s in statements if s.old_value]
        embedded = self.embedder.embed([s.aspect for s in statements] + texts)
        vectors = embedded[: len(statements)]
        self.vectors = {t: v for t, v in zip([s.aspect for s in statements] + texts, embedded)}
        ops: list[Operation] = []
        # Sentence by sentence in text order (a session cut in two parts resolves the same way);
        # within a sentence the attribute statements first, which never match by embedding.
        for group in self._sentences(statements, vectors):
            for statement, vector in group:
                if statement.attribute:
                    ops += self._resolve_attribute(statement, vector, view, session_id)
            group = [(s, v) for s, v in group if not s.attribute]
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
                op=OpType.ADD,
                entry_id=entry_id,
                aspect=statement.aspect,
                value=statement.quote,
                stance=statement.stance,
                reason=statement.reason,
                evidence=evidence,
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
    def _same(a: str, b: str) -> bool:
        """ "nurse" and "registered nurse", "Paris" and "paris": one value said two ways."""
        x, y = normalise(a), normalise(b)
        return x == y or x.endswith(" " + y) or y.endswith(" " + x)

    def _resolve_attribute(
        self, statement: Statement, vector: np.ndarray, view: ProfileView, session_id: str
    ) -> list[Operation]:
        evidence = [Evidence(session_id=session_id, turn_index=statement.turn_index, quote=statement.quote)]
        entry = view.attribute(statement.aspect)
        reason = statement.reason

        def add(value: str, *, reopen: ViewEntry | None = None) -> Operation:
            if reopen is not None:
                reopen.current, reopen.value = True, value
                entry_id = reopen.id
            else:
                entry_id = "p_" + uuid.uuid4().hex[:12]
                view.entries.append(
                    ViewEntry(entry_id, statement.aspect, Stance.FACT, True, vector, value, "attribute")
                )
            return Operation(
                op=OpType.ADD,
                entry_id=entry_id,
                aspect=statement.aspect,
                value=value,
                stance=Stance.FACT,
                reason=reason if reopen is not None else None,
                evidence=evidence,
                kind="attribute",
            )

        def update(target: ViewEntry, value: str) -> Operation:
            target.value = value
            return Operation(op=OpType.UPDATE, entry_id=target.id, value=value, reason=reason, evidence=evidence)

        def delete(target: ViewEntry) -> Operation:
            target.current = False
            return Operation(op=OpType.DELETE, entry_id=target.id, reason=reason, evidence=evidence)

        if statement.change == "stop":
            if (
                entry is not None
                and entry.current
                and (statement.value is None or self._same(entry.value, statement.value))
            ):
                return [delete(entry)]
            if statement.value is None:
                return [
                    Operation(
                        op=OpType.NOOP,
                        entry_id=entry.id if entry else None,
                        reason="nothing current to close",
                        evidence=evidence,
                    )
                ]
            added = add(statement.value)
            return [added, delete(view.entries[-1])]
        assert statement.value is not None
        if entry is not None and entry.current:
            if self._same(entry.value, statement.value):
                return [
                    Operation(
                        op=OpType.NOOP, entry_id=entry.id, reason="repeat of the current value", evidence=evidence
                    )
                ]
            return [update(entry, statement.value)]
        if entry is not None:
            return [add(statement.value, reopen=entry)]
        if statement.old_value and not self._same(statement.old_value, statement.value):
            first = add(statement.old_value)
            return [first, update(view.entries[-1], statement.value)]
        return [add(statement.value)]

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
