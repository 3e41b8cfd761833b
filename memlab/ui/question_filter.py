"""The question list's filter, sort and page, read from and written to the query string (stable URLs).

``/questions?type=...&field=who:self&row=R2&result=wrong&disagree=1&distance=4k-16k&sort=-distance&page=3``;
``/questions?row=R1&versus=R2&result=right``: right in R1 and wrong in R2 (a "+" cell of the McNemar matrix).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict, Field

from memlab.errors import MemlabError
from memlab.ui.run_index import QuestionEntry, Snapshot

Result = Literal["", "right", "wrong", "error", "missing"]
SORTS = {
    "id": "question id",
    "type": "question type",
    "distance": "distance to the evidence (nearest first)",
    "-distance": "distance to the evidence (farthest first)",
    "right": "rows right (fewest first)",
    "-right": "rows right (most first)",
}
PAGE_SIZES = (25, 50, 100, 200)


class FilterError(MemlabError):
    """A query string the list cannot apply (names the parameter and the value)."""


class QuestionQuery(BaseModel):
    """What the list shows: every field is one query parameter; defaults are left out of URLs."""

    model_config = ConfigDict(extra="forbid")

    type: str = ""
    field: list[str] = Field(default_factory=list, description="NAME:VALUE, all must hold")
    row: str = Field(default="", description="a row's name or short id (R1, R2, ...)")
    result: Result = ""
    versus: str = Field(
        default="",
        description="a second row: only questions one of the two got right and the other wrong (McNemar's "
        "discordant pairs); with result=right, right in `row` and wrong in `versus`",
    )
    disagree: bool = False
    distance: str = ""
    q: str = Field(default="", description="part of the question id")
    sort: str = "id"
    page: int = Field(default=1, ge=1)
    per: int = 50

    @classmethod
    def parse(cls, params: Mapping[str, Sequence[str]]) -> QuestionQuery:
        """From ``urllib.parse.parse_qs`` output; an unknown or bad parameter is one ``FilterError`` line."""
        known = set(cls.model_fields)
        data: dict[str, object] = {}
        for name, values in params.items():
            if name not in known:
                raise FilterError(f"unknown query parameter {name!r} (known: {', '.join(sorted(known))})")
            if name == "field":
                data[name] = [v for v in values if v]
                continue
            value = values[-1]
            if name in ("page", "per"):
                if not value.isdigit():
                    raise FilterError(f"{name}={value!r}: expected a whole number")
                data[name] = int(value)
            elif name == "disagree":
                data[name] = value in ("1", "true", "on", "yes")
            else:
                data[name] = value
        if data.get("sort", "id") not in SORTS:
            raise FilterError(f"sort={data['sort']!r}: expected one of {', '.join(SORTS)}")
        if data.get("result", "") not in ("", "right", "wrong", "error", "missing"):
            raise FilterError(f"result={data['result']!r}: expected right, wrong, error or missing")
        if data.get("per", 50) not in PAGE_SIZES:
            raise FilterError(f"per={data['per']}: expected one of {', '.join(map(str, PAGE_SIZES))}")
        if data.get("page", 1) == 0:
            raise FilterError("page=0: pages count from 1")
        for item in params.get("field", []):
            if item and ":" not in item:
                raise FilterError(f"field={item!r}: expected NAME:VALUE (e.g. who:self)")
        return cls.model_validate(data)

    def query_string(self, **changes: object) -> str:
        """The query string of ``url`` (no ``?``)."""
        return self.url(**changes).partition("?")[2]

    def url(self, **changes: object) -> str:
        """``/questions`` with this query (and ``changes``), defaults left out, in a fixed order."""
        query = self.model_copy(update=changes)
        pairs: list[tuple[str, str]] = []
        defaults = QuestionQuery()
        for name in type(self).model_fields:
            value = getattr(query, name)
            if value == getattr(defaults, name):
                continue
            if name == "field":
                pairs += [("field", v) for v in value]
            elif name == "disagree":
                pairs.append((name, "1"))
            else:
                pairs.append((name, str(value)))
        return "/questions" + ("?" + urlencode(pairs) if pairs else "")


def select(snapshot: Snapshot, query: QuestionQuery) -> tuple[list[QuestionEntry], int]:
    """The entries of the requested page and how many match in all."""
    matched = matching(snapshot, query)
    start = (query.page - 1) * query.per
    return matched[start : start + query.per], len(matched)


def neighbours(snapshot: Snapshot, query: QuestionQuery, question_id: str) -> tuple[str | None, str | None, int, int]:
    """(previous id, next id, 1-based position, count) of a question in the list ``query`` selects;
    position 0 when the question is not in it."""
    ids = [entry.question_id for entry in matching(snapshot, query)]
    if question_id not in ids:
        return None, None, 0, len(ids)
    at = ids.index(question_id)
    return (ids[at - 1] if at else None), (ids[at + 1] if at + 1 < len(ids) else None), at + 1, len(ids)


def matching(snapshot: Snapshot, query: QuestionQuery) -> list[QuestionEntry]:
    """Every entry the filter selects, in the requested order."""
    row = None
    if query.row:
        ref = snapshot.row(query.row)
        if ref is None:
            names = ", ".join(f"{r.short} ({r.name})" for r in snapshot.rows)
            raise FilterError(f"row={query.row!r}: no such row; the rows are {names}")
        row = ref.name
    if query.result and row is None:
        raise FilterError(f"result={query.result} needs a row (row=R1, ...)")
    versus = None
    if query.versus:
        other = snapshot.row(query.versus)
        if other is None or row is None:
            raise FilterError(f"versus={query.versus!r}: needs row=... and a second row that exists")
        versus = other.name
        if query.result not in ("", "right", "wrong"):
            raise FilterError(f"versus with result={query.result}: expected right or wrong")
    wanted_fields = [tuple(item.split(":", 1)) for item in query.field]
    needle = query.q.lower()
    matched = []
    for qid in snapshot.order:
        entry = snapshot.questions[qid]
        if query.type and entry.question_type != query.type:
            continue
        if query.distance and entry.distance_bucket != query.distance:
            continue
        if needle and needle not in qid.lower():
            continue
        if any(entry.fields.get(name) != value for name, value in wanted_fields):
            continue
        if versus is not None and row is not None:
            pair = (entry.results.get(row), entry.results.get(versus))
            if pair not in (("right", "wrong"), ("wrong", "right")):
                continue
        if row is not None and query.result and entry.results.get(row, "missing") != query.result:
            continue
        if query.disagree and not entry.disagree:
            continue
        matched.append(entry)
    key = query.sort.lstrip("-")
    if key == "type":
        rank = {t: i for i, t in enumerate(snapshot.question_types)}
        matched.sort(key=lambda e: (rank.get(e.question_type, len(rank)), e.question_type))
    elif key == "distance":  # questions without a distance last, either way
        with_distance = [e for e in matched if e.distance_tokens is not None]
        without = [e for e in matched if e.distance_tokens is None]
        with_distance.sort(key=lambda e: e.distance_tokens or 0, reverse=query.sort.startswith("-"))
        matched = with_distance + without
    elif key == "right":
        matched.sort(key=lambda e: e.right, reverse=query.sort.startswith("-"))
    # "id": first-seen order, which is the runs' history order (ids like q12 would sort badly as text)
    return matched


__all__ = ["PAGE_SIZES", "SORTS", "FilterError", "QuestionQuery", "matching", "neighbours", "select"]
