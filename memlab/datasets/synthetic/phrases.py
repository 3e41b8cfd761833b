"""The generator's text tables, read once from ``phrases.json`` (package data) into typed constants.

Reason texts use ``{my}``/``{me}``/``{I}``: the user says "my doctor", the assistant "your doctor"
(:func:`person` fills them). Keeping the text in a data file keeps the code about structure only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

LIKE, DISLIKE, INDIFFERENT = "like", "dislike", "indifferent"
STANCES = (LIKE, DISLIKE, INDIFFERENT)


@dataclass(frozen=True)
class Reason:
    text: str
    motive: str


@dataclass(frozen=True)
class Aspect:
    item: str
    cues: tuple[str, ...]
    scenario: str
    recommendation: str
    ideas: tuple[str, ...]
    reasons: dict[str, tuple[Reason, ...]]


@dataclass(frozen=True)
class FactQuestion:
    question: str
    templates: tuple[str, ...]  # each with {v} (the value) and optionally {art} (its article)


@dataclass(frozen=True)
class Wording:
    """How a question type is asked: its question phrasings and the option templates (one per question)."""

    questions: tuple[str, ...]
    options: tuple[str, ...]


@dataclass(frozen=True)
class TrackTemplate:
    template: str  # slots {item}, {p0}.. (past stances) and {nK} (the current one)
    past: dict[str, str]
    now: dict[str, str]


def _load() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("phrases.json").read_text(encoding="utf-8")
    return json.loads(text)


_DATA = _load()


def _tuple(key: str) -> tuple[str, ...]:
    return tuple(_DATA[key])


def _tables(key: str) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in _DATA[key].items()}


ASPECTS: tuple[Aspect, ...] = tuple(
    Aspect(
        item=a["item"],
        cues=tuple(a["cues"]),
        scenario=a["scenario"],
        recommendation=a["recommendation"],
        ideas=tuple(a["ideas"]),
        reasons={
            stance: tuple(Reason(text, motive) for text, motive in pairs) for stance, pairs in a["reasons"].items()
        },
    )
    for a in _DATA["aspects"]
)
# How each motive behind a change carries over to a new situation (generalize_to_new_scenarios).
MOTIVE_ADVICE = _tables("motive_advice")
FACT_POOLS = _tables("fact_pools")
FACT_STATEMENTS = _tables("fact_statements")
FACT_QUESTIONS: dict[str, FactQuestion] = {
    kind: FactQuestion(q["question"], tuple(q["templates"])) for kind, q in _DATA["fact_questions"].items()
}
FIRST_STANCE = _tables("first_stance")
CHANGE_STANCE = _tables("change_stance")
IDEA_MENTIONS = _tuple("idea_mentions")
LEADS = _tuple("leads")
TAILS = _tuple("tails")
# The assistant's answer to what the user just told: an "event" (a fact or a first stance), a
# "change" of stance with its reason, or an "idea" the user already tried.
REPLIES = _tables("replies")
# Small talk as (user, assistant) pairs; a filler turn may combine two of them.
FILLER: tuple[tuple[str, str], ...] = tuple((user, assistant) for user, assistant in _DATA["filler"])
# One phrasing family per acknowledge-latest question: every stance, and a stance-free reply, in the same words.
ACK_FAMILIES: tuple[dict[str, str], ...] = tuple(_DATA["ack_families"])
# Stance-free replies that do not name the item: half the generic options use one of these, so a
# blind reader is drawn to the generic option about as often as to each stance (see questions.py).
ACK_GENERIC_PLAIN = _tuple("ack_generic_plain")
TRACK_THREE = tuple(TrackTemplate(**t) for t in _DATA["track_three"])
TRACK_TWO = tuple(TrackTemplate(**t) for t in _DATA["track_two"])
TRACK_QUESTIONS = _tuple("track_questions")
# By question type (memlab.datasets.question_types), for the types whose options share one template.
WORDINGS: dict[str, Wording] = {
    qtype: Wording(tuple(w["questions"]), tuple(w["options"])) for qtype, w in _DATA["wordings"].items()
}
GENERALIZE_TAILS = _tuple("generalize_tails")
# Neutral remarks that lengthen a randomly chosen option (questions.balance_lengths), shortest first.
CLOSING_REMARKS = tuple(sorted(_DATA["closing_remarks"], key=len))
FIRST_NAMES = _tuple("first_names")
LAST_NAMES = _tuple("last_names")


def article(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


def person(text: str, *, user: bool) -> str:
    """Fill a reason text as the user says it (``user=True``) or as the assistant says it back."""
    return text.format(my="my" if user else "your", me="me" if user else "you", I="I" if user else "you")
