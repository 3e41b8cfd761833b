"""Question builders: one per question type, each returning a draft whose first option is correct.

Calibration: every builder draws its distractors so that, seen without memory, the correct option
is exchangeable with them - the same template filled from the same pool (fact values, stances,
reasons, ideas, motives), the outdated stance in the same words as the current one. A reader that
ignores memory (question-option similarity, longest option) therefore stays near 25 %;
``tests/test_synthetic_calibration.py`` enforces it on a seed sweep.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from memlab.datasets.base import History
from memlab.datasets.question_types import (
    ACKNOWLEDGE_LATEST,
    CANONICAL_TYPES,
    GENERALIZE,
    RECALL_FACTS,
    RECOMMEND,
    REVISIT_REASONS,
    SUGGEST_NEW,
    TRACK_EVOLUTION,
)
from memlab.datasets.synthetic.persona import AspectPlan, Persona, StanceStep
from memlab.datasets.synthetic.phrases import (
    ACK_FAMILIES,
    ACK_GENERIC_PLAIN,
    ASPECTS,
    CLOSING_REMARKS,
    FACT_POOLS,
    FACT_QUESTIONS,
    GENERALIZE_TAILS,
    LIKE,
    MOTIVE_ADVICE,
    STANCES,
    TRACK_QUESTIONS,
    TRACK_THREE,
    TRACK_TWO,
    WORDINGS,
    Aspect,
    Reason,
    article,
    person,
)
from memlab.tokens import count_tokens
from memlab.types import OPTION_LETTERS, Question


@dataclass
class Draft:
    """A question before shuffling: options as (text, kind), the first one correct."""

    subject: str
    text: str
    options: list[tuple[str, str]]
    evidence: list[int]
    key: str


class State:
    """What the user has said before message ``end``."""

    def __init__(self, persona: Persona, end: int) -> None:
        self.persona = persona
        self.end = end

    def facts(self) -> dict[str, tuple[str, int]]:
        return {k: v for k, v in self.persona.facts.items() if v[1] < self.end}

    def steps(self, plan: AspectPlan) -> list[StanceStep]:
        return [s for s in plan.steps if 0 <= s.index < self.end]

    def ideas(self, plan: AspectPlan) -> list[tuple[str, int]]:
        return [(idea, index) for _session, idea, index in plan.idea_mentions if index < self.end]


def recall(state: State, kind: str, rng: random.Random) -> Draft | None:
    """Four options, one template, four values of the same pool: only memory tells them apart."""
    fact = state.facts().get(kind)
    if fact is None:
        return None
    value, index = fact
    spec = FACT_QUESTIONS[kind]
    template = rng.choice(spec.templates)
    wrong = rng.sample([v for v in FACT_POOLS[kind] if v != value], 3)
    options = [
        (template.format(v=v, art=article(v)), option_kind)
        for v, option_kind in ((value, "correct"), *((w, "wrong_item") for w in wrong))
    ]
    return Draft(kind, spec.question, options, [index], value)


def acknowledge(state: State, plan: AspectPlan, rng: random.Random) -> Draft | None:
    """The current stance, the other two and a stance-free reply, all in one phrasing family."""
    steps = state.steps(plan)
    if not steps:
        return None
    item = plan.aspect.item
    family = rng.choice(ACK_FAMILIES)
    current = steps[-1].stance
    stale = steps[-2].stance if len(steps) > 1 else None
    options = [(family[current].format(item=item), "correct")]
    for stance in STANCES:
        if stance != current:
            options.append((family[stance].format(item=item), "stale" if stance == stale else "other_stance"))
    # A generic reply naming the item draws a blind reader more than a stance does, one that does
    # not name it less: alternating them keeps the generic option at about a quarter of blind picks.
    generic = family["generic"].format(item=item) if rng.random() < 0.5 else rng.choice(ACK_GENERIC_PLAIN)
    options.append((generic, "generic"))
    return Draft(item, rng.choice(plan.aspect.cues), options, [steps[-1].index], item)


def track(state: State, plan: AspectPlan, rng: random.Random) -> Draft | None:
    steps = state.steps(plan)
    if len(steps) < 2:
        return None
    item = plan.aspect.item
    truth = tuple(s.stance for s in steps)
    if len(truth) == 3:
        spec = rng.choice(TRACK_THREE)
        others = [p for p in itertools.permutations(STANCES) if p not in (truth, truth[::-1])]
    else:
        spec = rng.choice(TRACK_TWO)
        others = [p for p in itertools.permutations(STANCES, 2) if p not in (truth, truth[::-1])]

    def say(seq: tuple[str, ...]) -> str:
        slots = {f"p{i}": spec.past[s] for i, s in enumerate(seq[:-1])}
        slots[f"n{len(seq) - 1}"] = spec.now[seq[-1]]
        return spec.template.format(item=item, **slots)

    options = [(say(truth), "correct"), (say(truth[::-1]), "reversed")]
    options += [(say(seq), "wrong_sequence") for seq in rng.sample(others, 2)]
    return Draft(item, rng.choice(TRACK_QUESTIONS).format(item=item), options, [s.index for s in steps], item)


def revisit(state: State, plan: AspectPlan, rng: random.Random) -> Draft | None:
    changes = [s for s in state.steps(plan) if s.reason is not None]
    if not changes:
        return None
    item = plan.aspect.item
    latest = changes[-1].reason
    assert latest is not None
    template = rng.choice(WORDINGS[REVISIT_REASONS].options)
    stale = changes[-2].reason if len(changes) > 1 else None
    pool = [r for stance in STANCES for r in plan.aspect.reasons[stance] if r not in (latest, stale)]
    picks: list[tuple[Reason, str]] = [(latest, "correct")]
    if stale is not None:
        picks.append((stale, "stale"))
    picks += [(r, "other_reason") for r in rng.sample(pool, 4 - len(picks))]
    options = [(template.format(reason=person(r.text, user=False)), kind) for r, kind in picks]
    question = rng.choice(WORDINGS[REVISIT_REASONS].questions).format(item=item)
    return Draft(item, question, options, [changes[-1].index], person(latest.text, user=True))


def generalize(state: State, plan: AspectPlan, rng: random.Random) -> Draft | None:
    changes = [s for s in state.steps(plan) if s.reason is not None]
    if not changes:
        return None
    latest = changes[-1].reason
    assert latest is not None
    stated = {s.reason.motive for s in changes if s.reason is not None}
    # Distractors come first from the motives of this aspect's other reasons: the motive of the
    # correct answer is one of those too, so the scenario's wording cannot favour it.
    own = sorted({r.motive for rs in plan.aspect.reasons.values() for r in rs} - stated)
    others = rng.sample(own, min(3, len(own)))
    others += rng.sample(sorted(m for m in MOTIVE_ADVICE if m not in stated and m not in others), 3 - len(others))
    options = [(rng.choice(MOTIVE_ADVICE[latest.motive]), "correct")]
    options += [(rng.choice(MOTIVE_ADVICE[m]), "other_motive") for m in others]
    question = plan.aspect.scenario + rng.choice(GENERALIZE_TAILS)
    return Draft(plan.aspect.item, question, options, [changes[-1].index], person(latest.text, user=True))


def recommend(state: State, plan: AspectPlan, rng: random.Random) -> Draft | None:
    steps = state.steps(plan)
    if not steps or steps[-1].stance != LIKE:
        return None
    stale: list[Aspect] = []
    disliked: list[Aspect] = []
    unmentioned: list[Aspect] = []
    for other in state.persona.aspects:
        seen = state.steps(other)
        if not seen:
            unmentioned.append(other.aspect)
        elif seen[-1].stance == LIKE:
            continue  # another current favourite is not a wrong answer
        elif any(s.stance == LIKE for s in seen):
            stale.append(other.aspect)
        else:
            disliked.append(other.aspect)
    known = {p.aspect.item for p in state.persona.aspects}
    unmentioned += [a for a in ASPECTS if a.item not in known]
    picks: list[tuple[Aspect, str]] = []
    for group, kind in ((stale, "stale"), (disliked, "disliked"), (unmentioned, "wrong_item")):
        take = min(len(group), 3 - len(picks))
        picks += [(a, kind) for a in rng.sample(group, take)]
    if len(picks) < 3:
        return None
    template = rng.choice(WORDINGS[RECOMMEND].options)
    options = [(template.format(rec=plan.aspect.recommendation), "correct")]
    options += [(template.format(rec=a.recommendation), kind) for a, kind in picks]
    return Draft(
        plan.aspect.item, rng.choice(WORDINGS[RECOMMEND].questions), options, [steps[-1].index], plan.aspect.item
    )


def suggest(state: State, plan: AspectPlan, rng: random.Random) -> Draft | None:
    """An idea the user has not mentioned against three they already did (within a liked aspect)."""
    steps = state.steps(plan)
    done = state.ideas(plan)
    tried = {idea for idea, _ in done}
    untried = [i for i in plan.aspect.ideas if i not in tried]
    if not steps or steps[-1].stance != LIKE or len(done) < 3 or not untried:
        return None
    item = plan.aspect.item
    fresh = rng.choice(untried)
    template = rng.choice(WORDINGS[SUGGEST_NEW].options)
    picks = rng.sample(done, 3)
    options = [(template.format(idea=fresh), "correct")]
    options += [(template.format(idea=idea), "already_done") for idea, _ in picks]
    evidence = sorted({steps[-1].index, *(index for _, index in picks)})
    return Draft(item, rng.choice(WORDINGS[SUGGEST_NEW].questions).format(item=item), options, evidence, item)


ASPECT_BUILDERS: dict[str, Callable[[State, AspectPlan, random.Random], Draft | None]] = {
    ACKNOWLEDGE_LATEST: acknowledge,
    TRACK_EVOLUTION: track,
    REVISIT_REASONS: revisit,
    RECOMMEND: recommend,
    SUGGEST_NEW: suggest,
    GENERALIZE: generalize,
}


def question_points(history: History, rng: random.Random) -> list[int]:
    """Session boundaries (after the first session) plus one mid-session point per session."""
    total = len(history.messages)
    bounds = history.session_starts[1:] + [total]
    points = set(bounds)
    for number, start in enumerate(history.session_starts):
        stop = bounds[number]
        inside = [i for i in range(start + 3, stop - 1) if history.messages[i - 1].role == "assistant"]
        if inside:
            points.add(rng.choice(inside))
    return sorted(points)


def draft(qtype: str, state: State, subject: str, rng: random.Random) -> Draft | None:
    if qtype == RECALL_FACTS:
        return recall(state, subject, rng)
    plan = next(p for p in state.persona.aspects if p.aspect.item == subject)
    return ASPECT_BUILDERS[qtype](state, plan, rng)


def questions(persona: Persona, history: History, count: int, seed: int, rng: random.Random) -> list[Question]:
    """About ``count`` questions over all seven types, spread over subjects and question points."""
    points = question_points(history, rng)
    subjects = {
        t: (list(persona.facts) if t == RECALL_FACTS else [p.aspect.item for p in persona.aspects])
        for t in CANONICAL_TYPES
    }
    order = list(CANONICAL_TYPES)
    rng.shuffle(order)
    used: set[tuple[str, str, int]] = set()
    asked: dict[tuple[str, str], int] = {}
    out: list[Question] = []
    turn = 0
    while len(out) < count and order:
        qtype = order[turn % len(order)]
        # Least-asked subjects first, so one persona's questions spread over its facts and aspects.
        candidates = [(p, s) for p in points for s in subjects[qtype] if (qtype, s, p) not in used]
        rng.shuffle(candidates)
        candidates.sort(key=lambda c: asked.get((qtype, c[1]), 0))
        found = None
        for point, subject in candidates:
            used.add((qtype, subject, point))  # feasibility depends on the state only: never retry
            found = draft(qtype, State(persona, point), subject, rng)
            if found is not None:
                break
        if found is None:
            order.remove(qtype)  # no point in this history can ask this type any more
            continue
        turn += 1
        asked[(qtype, subject)] = asked.get((qtype, subject), 0) + 1
        out.append(finish(found, qtype, point, history, persona, seed, len(out), rng))
        follow = follow_up(persona, points, subject, point) if qtype == ACKNOWLEDGE_LATEST else None
        # Only once every type has had its turn, so small question counts still cover all seven.
        if follow is not None and turn > len(CANONICAL_TYPES) and len(out) < count and rng.random() < 0.6:
            # Ask again after the preference changed: the correct answer moves with it.
            used.add((qtype, subject, follow))
            again = draft(qtype, State(persona, follow), subject, rng)
            if again is not None:
                out.append(finish(again, qtype, follow, history, persona, seed, len(out), rng))
    return out


def follow_up(persona: Persona, points: list[int], subject: str, point: int) -> int | None:
    """The first question point after the next change of ``subject`` following ``point``."""
    plan = next((p for p in persona.aspects if p.aspect.item == subject), None)
    if plan is None:
        return None
    change = next((s.index for s in plan.steps if s.index >= point), None)
    if change is None:
        return None
    return next((p for p in points if p > change), None)


def balance_lengths(options: list[tuple[str, str]], rng: random.Random) -> list[tuple[str, str]]:
    """Make a uniformly drawn option the longest (with a neutral closing remark where needed), so
    the longest option is the correct one in a quarter of the questions, whatever the templates."""
    target = rng.randrange(len(options))
    text, kind = options[target]
    longest_other = max(len(t) for i, (t, _) in enumerate(options) if i != target)
    if len(text) <= longest_other:
        fitting = [r for r in CLOSING_REMARKS if len(text) + len(r) > longest_other]
        remark = min(fitting, key=len) if fitting else CLOSING_REMARKS[-1] + " " + max(CLOSING_REMARKS, key=len)
        while len(text) + len(remark) <= longest_other:  # a very long rival: say more
            remark += " " + rng.choice(CLOSING_REMARKS).strip()
        text = text + remark
    return [(text, kind) if i == target else option for i, option in enumerate(options)]


def finish(
    found: Draft, qtype: str, end: int, history: History, persona: Persona, seed: int, number: int, rng: random.Random
) -> Question:
    found = Draft(found.subject, found.text, balance_lengths(found.options, rng), found.evidence, found.key)
    order = list(range(len(found.options)))
    rng.shuffle(order)
    options = [f"({OPTION_LETTERS[pos]}) {found.options[i][0]}" for pos, i in enumerate(order)]
    first = min(found.evidence)
    return Question(
        id=f"syn{seed}-p{persona.number}-q{number:03d}",
        type=qtype,
        topic=found.subject,
        text=found.text,
        options=options,
        answer=order.index(0),
        context_id=history.id,
        end_index=end,
        distance_blocks=history.session_number_of(end - 1) - history.session_number_of(first) + 1,
        distance_tokens=sum(count_tokens(m.content) for m in history.messages[first:end]),
        persona_id=str(persona.number),
        evidence=[f"m{i}" for i in found.evidence],
        metadata={
            "raw_type": qtype,
            "subject": found.subject,
            "key": found.key,
            "option_kinds": [found.options[i][1] for i in order],
            "evidence_messages": list(found.evidence),
        },
    )
