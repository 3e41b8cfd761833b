"""Synthetic PersonaMem-format data: procedural personas whose preferences change, with reasons.

``generate(personas=2, seed=0, sessions=8)`` builds one history per persona in PersonaMem's shape
(every session opens with a ``system`` message carrying the persona; user/assistant turns follow)
and multiple-choice questions of all seven canonical types about it. Everything is drawn from a
``random.Random`` seeded by the arguments, so the same arguments always give the same dataset;
nothing is read but the package's own phrase tables (``phrases.json``).

The package: :mod:`.phrases` (the text tables), :mod:`.persona` (plan and history rendering),
:mod:`.questions` (one builder per question type, and where questions are asked).

What a history holds, per persona:

- stable facts (job, city, pet, sibling, instrument), each stated once by the user;
- preferences over several aspects ("pizza", "running", "jazz"): a first stance, then one or two
  changes, each stated with a reason ("I've given up pizza. The reason is going gluten-free ...");
- mentions of things the user already did within a liked aspect (for "suggest new ideas");
- filler small talk around all of it, so a memory has to find the few turns that matter.

Questions are asked at session boundaries and mid-session (``end_index``), and their correct
answers follow the state at that point: the same aspect asked about later can have another answer.
Each question records:

- ``evidence``: the user turns that hold the answer, as ``"m<message index>"`` strings (all
  before ``end_index``); ``distance_blocks``/``distance_tokens`` measure from the earliest one;
- ``metadata["option_kinds"]``: what each option is (``correct``, ``stale``, ``wrong_item``,
  ``generic``, ``reversed`` ...), in option order, so errors can be broken down by distractor;
- ``metadata["key"]``: the text of the evidence turn the answer hinges on (fact value, reason,
  item), and ``metadata["subject"]``: the fact kind or aspect asked about.

Distractors are calibrated (see :mod:`.questions`): without memory the correct option cannot be
told from them, so blind readers stay near 25 %. The correct option's letter is balanced per question
type and over the dataset (:mod:`.positions`), so a reader biased towards a letter gains nothing.
"""

from __future__ import annotations

import random
from typing import Any

from memlab.datasets.base import Dataset, History, split_at_system
from memlab.datasets.synthetic.persona import Persona, events, plan_aspect, render
from memlab.datasets.synthetic.phrases import (
    ACK_FAMILIES,
    ASPECTS,
    FACT_POOLS,
    FIRST_NAMES,
    LAST_NAMES,
    STANCES,
    person,
)
from memlab.datasets.synthetic.positions import balance_answers
from memlab.datasets.synthetic.questions import questions as build_questions

__all__ = ["ACK_FAMILIES", "ASPECTS", "STANCES", "generate"]


def generate(
    personas: int = 2, seed: int = 0, sessions: int = 8, turns: int = 20, aspects: int = 6, questions: int = 24
) -> Dataset:
    """A deterministic synthetic PersonaMem-format dataset.

    ``personas`` histories of ``sessions`` sessions, each about ``turns`` messages after its system
    message (more when a session has many events), with ``aspects`` changing preferences per persona
    and about ``questions`` questions per persona covering all seven types.
    """
    limits = {
        "personas": (personas, 1, len(FIRST_NAMES) * len(LAST_NAMES)),
        "sessions": (sessions, 3, 200),
        "turns": (turns, 4, 1000),
        "aspects": (aspects, 4, len(ASPECTS)),
        "questions": (questions, 1, 10_000),
    }
    for name, (value, low, high) in limits.items():
        if not low <= value <= high:
            raise ValueError(f"synthetic dataset: {name}={value} is out of range [{low}, {high}]")
    rng = random.Random(f"memlab-synthetic:{seed}")
    names = rng.sample([f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES], personas)
    histories: dict[str, History] = {}
    all_questions = []
    for number in range(personas):
        prng = random.Random(f"memlab-synthetic:{seed}:{number}")
        fact_values = {kind: prng.choice(pool) for kind, pool in FACT_POOLS.items()}
        plans = [plan_aspect(a, sessions, prng) for a in prng.sample(ASPECTS, aspects)]
        persona = Persona(number, names[number], prng.randrange(22, 66), {}, plans)
        planned = events(fact_values, plans, persona.facts, sessions, prng)
        messages = render(persona, planned, sessions, turns, prng)
        context_id = f"synthetic-{seed}-p{number}"
        history = History(
            id=context_id,
            messages=messages,
            session_starts=split_at_system(messages),
            metadata={"persona": _describe(persona)},
            session_metadata=[{"session": n + 1} for n in range(sessions)],
        )
        histories[context_id] = history
        all_questions += build_questions(persona, history, questions, seed, prng)
    # The correct option's letter: balanced per question type and overall (no position bias to exploit).
    all_questions = balance_answers(all_questions, random.Random(f"memlab-synthetic-positions:{seed}"))
    spec = (
        f"synthetic:personas={personas},seed={seed},sessions={sessions},turns={turns},"
        f"aspects={aspects},questions={questions}"
    )
    return Dataset(name=f"synthetic-{seed}", histories=histories, questions=all_questions, source=spec)


def _describe(persona: Persona) -> dict[str, Any]:
    """The ground truth behind a history, for debugging and for tests."""
    return {
        "name": persona.name,
        "age": persona.age,
        "facts": {kind: {"value": v, "message": i} for kind, (v, i) in persona.facts.items()},
        "preferences": {
            p.aspect.item: [
                {
                    "stance": s.stance,
                    "message": s.index,
                    "reason": person(s.reason.text, user=True) if s.reason else None,
                    "motive": s.reason.motive if s.reason else None,
                }
                for s in p.steps
            ]
            for p in persona.aspects
        },
    }
