"""LLM-free retrieval scores: did the memory hand back the turns that hold the answer?

A question's evidence (LoCoMo ``D<session>:<turn>`` ids, or ``m<index>`` from the synthetic
generator) is turned into history message indexes with ``evidence_to_indexes``; a retrieval is
turned into a ranking of message groups with ``retrieval_ranking``; ``retrieval_metrics`` compares
the two.

Ranks count *items*, not messages: a Mem0 memory or a profile entry that cites three turns is one
result at one rank. A ranking entry is therefore either one message index or the group of indexes
behind one item. A retrieval whose items carry no scores is not a ranking at all (full_context
returns the whole history): it is one set, scored as a single rank-1 result, so such a backend gets
the recall of everything it returned at every k - the ceiling the ranked backends are measured
against.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from numbers import Integral
from typing import Any

from memlab.datasets.base import History
from memlab.types import MemoryItem, Question, Retrieval

DEFAULT_KS = (1, 5, 10)

_INDEX_ID = re.compile(r"^m(\d+)$")
_DIA_ID = re.compile(r"^D(\d+):0*(\d+)$")

# dia_id -> message index, per history, built once (the runner asks once per question).
_dia_cache: dict[int, tuple[list[str], dict[str, int]]] = {}
_session_cache: dict[int, tuple[list[int], dict[str, int]]] = {}


def _dia_index(history: History) -> dict[str, int]:
    dia_ids = history.metadata.get("dia_ids") or []
    cached = _dia_cache.get(id(history))
    if cached is None or cached[0] is not dia_ids:
        mapping: dict[str, int] = {}
        for index, dia_id in enumerate(dia_ids):
            mapping.setdefault(str(dia_id), index)
        cached = (dia_ids, mapping)
        _dia_cache[id(history)] = cached
    return cached[1]


def evidence_to_indexes(history: History, question: Question) -> list[int]:
    """Message indexes of ``question.evidence`` in ``history``, sorted, without duplicates.

    Accepts LoCoMo dia_ids (looked up in ``history.metadata["dia_ids"]``, aligned with the
    messages) and ``m<index>`` strings. An id that names no message is an error: loaders report
    bad evidence as data issues and drop it, so reaching one here means the data and the history
    do not belong together.
    """
    found: set[int] = set()
    for raw in question.evidence:
        text = str(raw).strip()
        match = _INDEX_ID.match(text)
        if match:
            index = int(match.group(1))
        else:
            dia = _DIA_ID.match(text)
            key = f"D{int(dia.group(1))}:{int(dia.group(2))}" if dia else text
            index = _dia_index(history).get(key, -1)
        if not 0 <= index < len(history.messages):
            raise ValueError(
                f"question {question.id}: evidence {raw!r} names no message of history {history.id!r} "
                f"({len(history.messages)} messages)"
            )
        found.add(index)
    return sorted(found)


def item_message_indexes(history: History, item: MemoryItem) -> list[int] | None:
    """History message indexes behind one retrieved item; None when its source does not say.

    Reads ``source["session_id"]`` + ``source["turn_index"]``, or ``source["turns"]`` (a list of such
    dicts). Session ids are the runner's ``History.session_id(n)``.
    """
    refs: list[Any] = list(item.source.get("turns") or [])
    if "session_id" in item.source and "turn_index" in item.source:
        refs.append(item.source)
    if not refs:
        return None
    starts = history.session_starts
    bounds = starts + [len(history.messages)]
    indexes: list[int] = []
    for ref in refs:
        if not isinstance(ref, dict) or "session_id" not in ref or "turn_index" not in ref:
            return None
        number = _session_number(history, str(ref["session_id"]))
        if number is None:
            return None
        index = starts[number] + int(ref["turn_index"])
        if not starts[number] <= index < bounds[number + 1]:
            return None
        if index not in indexes:
            indexes.append(index)
    return indexes


def untraceable_items(history: History, retrieval: Retrieval) -> int:
    """How many retrieved items cannot be traced to turns of ``history`` (no ``session_id`` +
    ``turn_index`` source naming one of its messages): one is enough for a question to get no
    retrieval metrics, so rows count and report them ("not traceable") instead of a silent ``{}``."""
    return sum(item_message_indexes(history, item) is None for item in retrieval.items)


def _session_number(history: History, session_id: str) -> int | None:
    # the ids the runner gave the sessions it replayed (History.session_id), not a parsed guess
    numbers = _session_cache.get(id(history))
    if numbers is None or numbers[0] is not history.session_starts:
        numbers = (history.session_starts, {history.session_id(n): n for n in range(len(history.session_starts))})
        _session_cache[id(history)] = numbers
    return numbers[1].get(session_id)


def retrieval_ranking(history: History, retrieval: Retrieval) -> list[list[int]] | None:
    """Message groups in rank order (best first), one per retrieved item; None = cannot say.

    Items are ordered by score when every item has one (RAG hands items back in conversation
    order); with no scores at all, everything returned is one unranked group. None when any item
    cannot be traced to turns, since its recall would be understated, not measured.
    """
    items = retrieval.items
    groups: list[tuple[float | None, list[int]]] = []
    for item in items:
        indexes = item_message_indexes(history, item)
        if indexes is None:
            return None
        groups.append((item.score, indexes))
    if not groups:
        return []
    scored = [(score, indexes) for score, indexes in groups if score is not None]
    if len(scored) == len(groups):
        # stable sort: equal scores keep the backend's order
        return [indexes for _, indexes in sorted(scored, key=lambda g: -float(g[0]))]
    merged: list[int] = []
    for _, indexes in groups:
        merged.extend(i for i in indexes if i not in merged)
    return [merged]


def retrieval_metrics(
    ranked: Sequence[int | Sequence[int]] | None,
    evidence: Iterable[int],
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """recall@k, hit@k and mrr of a ranking against the evidence messages.

    ``ranked``: history message indexes in rank order, or per-item groups of them (see module
    docstring); ``None`` means the backend cannot say where its items came from and gives ``{}``
    ("cannot say"), as does empty evidence (nothing to find). An empty ranking is a real zero.
    recall@k is the share of evidence messages among the first k results, hit@k whether any is,
    mrr the reciprocal rank of the first result holding evidence (0 when none does).
    """
    wanted = set(int(e) for e in evidence)
    if ranked is None or not wanted:
        return {}
    if any(k < 1 for k in ks):
        raise ValueError(f"every k must be >= 1, got {list(ks)}")
    groups = [{int(entry)} if isinstance(entry, (int, Integral)) else {int(i) for i in entry} for entry in ranked]
    first_hit = next((rank for rank, group in enumerate(groups, start=1) if group & wanted), None)
    metrics: dict[str, float] = {}
    for k in ks:
        seen = set().union(*groups[:k]) if groups else set()
        found = len(seen & wanted)
        metrics[f"recall@{k}"] = found / len(wanted)
        metrics[f"hit@{k}"] = 1.0 if found else 0.0
    metrics["mrr"] = 1.0 / first_hit if first_hit else 0.0
    return metrics


def score_retrieval(
    history: History, question: Question, retrieval: Retrieval, ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """All of the above for one answered question: ``{}`` when there is no evidence or the
    backend cannot say where its items came from."""
    if not question.evidence:
        return {}
    return retrieval_metrics(retrieval_ranking(history, retrieval), evidence_to_indexes(history, question), ks)
