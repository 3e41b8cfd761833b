"""A persona's plan (facts, changing preferences with reasons, things already tried) and its history.

The plan is drawn first; :func:`render` then lays its events out over sessions between small talk
and records, for every event, the message index of the user turn that states it (the evidence).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from memlab.datasets.synthetic.phrases import (
    CHANGE_STANCE,
    FACT_STATEMENTS,
    FILLER,
    FIRST_STANCE,
    IDEA_MENTIONS,
    LEADS,
    LIKE,
    REPLIES,
    STANCES,
    TAILS,
    Aspect,
    Reason,
    article,
    person,
)
from memlab.types import Message


@dataclass
class StanceStep:
    stance: str
    session: int
    reason: Reason | None = None
    index: int = -1  # message index of the user turn, set when the history is rendered


@dataclass
class AspectPlan:
    aspect: Aspect
    steps: list[StanceStep]
    idea_mentions: list[tuple[int, str, int]] = field(default_factory=list)  # (session, idea, message index)


@dataclass(eq=False)  # compared by identity when ordering a session
class Event:
    session: int
    kind: str  # fact | stance | idea
    user_text: str
    reply: str
    bind: Callable[[int], None]  # records the message index of the user turn
    after: Event | None = None  # an event that must come earlier in the same session


@dataclass
class Persona:
    number: int
    name: str
    age: int
    facts: dict[str, tuple[str, int]]  # kind -> (value, message index)
    aspects: list[AspectPlan]


def plan_aspect(aspect: Aspect, sessions: int, rng: random.Random) -> AspectPlan:
    """A first stance and one or two changes, each to a different stance and with a reason."""
    count = 3 if sessions >= 4 and rng.random() < 0.5 else 2
    order = list(STANCES)
    rng.shuffle(order)
    first = rng.randrange(0, max(1, sessions // 3) + 1)
    later = sorted(rng.sample(range(first + 1, sessions), count - 1))
    steps = [StanceStep(order[0], first)]
    for stance, session in zip(order[1:count], later):
        steps.append(StanceStep(stance, session, rng.choice(aspect.reasons[stance])))
    return AspectPlan(aspect, steps)


def events(
    persona_facts: dict[str, str],
    plans: list[AspectPlan],
    facts_out: dict[str, tuple[str, int]],
    sessions: int,
    rng: random.Random,
) -> list[Event]:
    out: list[Event] = []

    def wrap(text: str) -> str:
        lead = rng.choice(LEADS)
        if lead and not (text.startswith("I ") or text.startswith("I'")):
            text = text[:1].lower() + text[1:]
        return lead + text + rng.choice(TAILS)

    for kind, value in persona_facts.items():
        statement = rng.choice(FACT_STATEMENTS[kind]).format(v=value, art=article(value))
        session = rng.randrange(0, max(1, sessions - 1))

        def bind(index: int, kind: str = kind, value: str = value) -> None:
            facts_out[kind] = (value, index)

        out.append(
            Event(session, "fact", wrap(statement[:1].upper() + statement[1:]), rng.choice(REPLIES["event"]), bind)
        )
    for plan in plans:
        item = plan.aspect.item
        for number, step in enumerate(plan.steps):
            if step.reason is None:
                text = rng.choice(FIRST_STANCE[step.stance]).format(item=item)
                reply = rng.choice(REPLIES["event"])
            else:
                text = rng.choice(CHANGE_STANCE[step.stance]).format(
                    item=item, reason=person(step.reason.text, user=True)
                )
                reply = rng.choice(REPLIES["change"])
            text = text[:1].upper() + text[1:]

            def bind_step(index: int, step: StanceStep = step) -> None:
                step.index = index

            event = Event(step.session, "stance", wrap(text), reply, bind_step)
            out.append(event)
            if step.stance != LIKE:
                continue
            # Things the user already did while liking the aspect: the "not new" ideas.
            end = plan.steps[number + 1].session if number + 1 < len(plan.steps) else sessions
            for idea in rng.sample(plan.aspect.ideas, 3):
                session = rng.randrange(step.session, max(step.session + 1, end))

                def bind_idea(index: int, plan: AspectPlan = plan, session: int = session, idea: str = idea) -> None:
                    plan.idea_mentions.append((session, idea, index))

                mention = rng.choice(IDEA_MENTIONS).format(idea=idea)
                out.append(
                    Event(
                        session,
                        "idea",
                        wrap(mention),
                        rng.choice(REPLIES["idea"]),
                        bind_idea,
                        after=event if session == step.session else None,
                    )
                )
    return out


def render(persona: Persona, planned: list[Event], sessions: int, turns: int, rng: random.Random) -> list[Message]:
    """The history: per session a system message with the persona, then events among small talk."""
    messages: list[Message] = []
    for session in range(sessions):
        messages.append(
            Message(
                role="system",
                content=(
                    f"Current user persona: Name: {persona.name}. Age: {persona.age}. {persona.name} chats with the "
                    f"assistant about everyday life. This is conversation {session + 1} of {sessions}."
                ),
            )
        )
        mine = [e for e in planned if e.session == session]
        rng.shuffle(mine)
        # An idea mention must follow the stance it depends on when both land in one session.
        for event in list(mine):
            if event.after is not None and event.after in mine and mine.index(event.after) > mine.index(event):
                mine.remove(event)
                mine.insert(mine.index(event.after) + 1, event)
        pairs = max(turns // 2, len(mine) + 1)
        slots = sorted(rng.sample(range(pairs), len(mine)))
        queue = iter(mine)
        for pair in range(pairs):
            if slots and pair == slots[0]:
                slots.pop(0)
                event = next(queue)
                event.bind(len(messages))
                messages.append(Message(role="user", content=event.user_text))
                messages.append(Message(role="assistant", content=event.reply))
            else:
                chosen = rng.sample(FILLER, 2 if rng.random() < 0.35 else 1)
                messages.append(Message(role="user", content=" ".join(u for u, _ in chosen)))
                messages.append(Message(role="assistant", content=" ".join(a for _, a in chosen)))
    return messages
