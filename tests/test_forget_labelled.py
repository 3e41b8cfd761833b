"""Forget requests on the labelled set (``tests/data/forget_requests/``): the dev parts the rules were
tuned on (dev .. dev12, and heldout .. heldout15, each read and tuned on after its first measure;
heldout18, read but not tuned on) and the held-out parts never tuned on (heldout16, heldout17,
heldout19 .. heldout23), every part written by someone who had not read the rules. The
learned reader (``memlab.forget_reader``) was trained on the dev parts and its threshold chosen on
heldout18. ``benchmarks/bench_forget_requests.py`` prints the same numbers for every part
(docs/personamem-v2.md).

What holds today is asserted as a regression floor: no near-miss deletes anything, collateral stays
at most what was measured, and the share of honoured requests does not fall below the measured one.
Where issue 32's targets (at least 85 % honoured and zero collateral) are not reached on a held-out
part, that test is a strict xfail, so reaching them turns it into a failure to update. A request
whose fact is not stored must delete nothing: on the dev parts with the asked-for facts taken away,
the share that still deletes something is held at what was measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.testing.forget_requests import Score, absent_referent, load_cases, score_backend

CONFIGS = {"full_context": {}, "rag": {"embedder": "minilm"}, "profile": {"embedder": "minilm"}, "mem0": {}}
OTHER_BACKENDS = ["rag", "profile", "mem0"]
# part: (share of requests honoured at least, collateral at most), the floor under what was measured
FLOORS = {
    # every backend measured with the learned reader; the floor sits two requests under the lowest
    "dev": (0.96, 1),  # measured 53/53, collateral 0; absent 8/53
    "dev2": (0.95, 1),  # measured 79/80 (profile 78), collateral 1; absent 16/80
    "dev3": (0.96, 1),  # measured 90/90 (profile 89), collateral 0; absent 4/90
    "dev4": (0.97, 1),  # measured 70/70, collateral 0; absent 6/70
    "dev5": (0.88, 1),  # measured 65/70 (profile 64), collateral 0; absent 0/70
    "dev6": (0.87, 2),  # measured 72/80, collateral 2; absent 9/80
    "dev7": (0.93, 1),  # measured 77/80, collateral 0; absent 0/80
    "dev8": (0.95, 1),  # measured 80/80 (profile 78), collateral 0; absent 1/80
    "dev9": (0.96, 1),  # measured 79/80, collateral 0; absent 2/80
    "dev10": (0.93, 1),  # measured 78/80 (profile 77), collateral 0; absent 0/80
    "dev11": (0.87, 1),  # measured 72/80, collateral 0; absent 4/80
    "dev12": (0.90, 1),  # measured 74/80, collateral 1; absent 6/80
    "heldout": (0.94, 1),  # measured 52/53, collateral 0; absent 16/53
    "heldout2": (0.90, 1),  # measured 66/70 (profile 65), collateral 1; absent 2/70
    "heldout3": (0.97, 1),  # measured 70/70, collateral 0; absent 1/70
    "heldout4": (0.97, 1),  # measured 70/70, collateral 0; absent 13/70
    "heldout5": (0.94, 1),  # measured 69/70 (profile 68), collateral 1; absent 8/70
    "heldout6": (0.91, 2),  # measured 66/70, collateral 2; absent 10/70
    "heldout7": (0.92, 1),  # measured 69/70 (profile 67), collateral 0; absent 5/70
    "heldout8": (0.97, 1),  # measured 70/70, collateral 0; absent 6/70
    "heldout9": (0.91, 1),  # measured 67/70 (profile 66), collateral 1; absent 5/70
    "heldout10": (0.94, 1),  # measured 69/70 (profile 68), collateral 0; absent 7/70
    "heldout11": (0.94, 1),  # measured 68/70, collateral 1; absent 9/70
    "heldout12": (0.94, 1),  # measured 69/70 (profile 68), collateral 0; absent 3/70
    "heldout13": (0.94, 1),  # measured 68/70, collateral 0; absent 2/68
    "heldout14": (0.92, 1),  # measured 67/70, collateral 1; absent 5/70
    "heldout15": (0.90, 1),  # measured 65/70, collateral 0; absent 1/67
    # read, never tuned on: heldout18's misses were read for the learned reader, whose threshold was
    # chosen on it (49/70 with it, 45/70 with the rules alone)
    "heldout18": (0.65, 1),  # measured 49/70 (profile 48), collateral 1; absent 2/67
    # the held-out parts: heldout16's and heldout19's one false deletion on their first measure was
    # looked up and fixed, none of their requests was read (rules alone: 38/70, 42/70, 41/70)
    "heldout16": (0.64, 2),  # measured 47/70, collateral 2; absent 7/68
    "heldout17": (0.65, 2),  # measured 48/70, collateral 2; absent 6/68
    "heldout19": (0.58, 2),  # measured 47/70 (profile 43), collateral 2; absent 2/67
    # written after the learned reader was wired in, measured once (rules alone: 51/70 and 36/70);
    # heldout21's one false deletion (a GDPR letter to a shop) was looked up and fixed
    "heldout20": (0.82, 1),  # measured 60/70, collateral 0; absent 1/69
    "heldout21": (0.58, 1),  # measured 43/70, collateral 0; absent 4/70
    # written after every change of this round, measured once (rules alone: 43/70 and 49/70)
    "heldout22": (0.65, 1),  # measured 48/70, collateral 1; absent 5/70
    "heldout23": (0.74, 1),  # measured 54/70, collateral 1; absent 4/70
}
DEV_PARTS = [part for part in FLOORS if part.startswith("dev")]
HELD_OUT = ("heldout16", "heldout17", "heldout19", "heldout20", "heldout21", "heldout22", "heldout23")
# issue 32's targets met on the part by full_context (47/70, 48/70, 47/70, 60/70 collateral 0, 43/70, 48/70, 54/70)
REACHED = {part: part == "heldout20" for part in HELD_OUT}
# measured 56/923 (6.1 %) with full_context on the dev parts; 44/923 with the rules alone, the rest
# the learned reader's (it resolves a request whose fact is gone to the nearest one it is sure of)
ABSENT_OVER_REACH = 0.065
TARGET_HONOURED = 0.85


def _score(backend: str, tmp_path: Path, part: str) -> Score:
    cases = load_cases(part)
    assert sum(c.kind == "request" for c in cases) >= 50 and sum(c.kind == "near_miss" for c in cases) >= 40
    data_dir = None if backend == "full_context" else tmp_path
    return score_backend(backend, cases, data_dir=data_dir, config=CONFIGS[backend])


def _check_floor(score: Score, part: str) -> None:
    honoured, collateral = FLOORS[part]
    assert score.false_deletions == 0, f"{score.line()}; wrong: {score.misses}"
    assert score.collateral <= collateral, score.line()
    assert score.honoured >= honoured * score.requests, score.line()


@pytest.mark.parametrize("part", list(FLOORS))
def test_full_context_no_near_miss_deletes_and_the_measured_recall_holds(part: str, tmp_path: Path) -> None:
    _check_floor(_score("full_context", tmp_path, part), part)


@pytest.mark.slow
@pytest.mark.parametrize("part", list(FLOORS))
@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_every_deleting_backend_on_every_part(backend: str, part: str, tmp_path: Path) -> None:
    _check_floor(_score(backend, tmp_path, part), part)


@pytest.mark.parametrize(
    "part",
    [
        part
        if REACHED[part]
        else pytest.param(part, marks=pytest.mark.xfail(strict=True, reason="issue 32's targets not reached"))
        for part in HELD_OUT
    ],
)
def test_full_context_reaches_the_issue_targets_on_the_held_out_parts(part: str, tmp_path: Path) -> None:
    score = _score("full_context", tmp_path, part)
    assert score.collateral == 0 and score.honoured >= TARGET_HONOURED * score.requests, score.line()


def test_a_request_for_a_fact_not_stored_mostly_deletes_nothing() -> None:
    over, total = 0, 0
    for part in DEV_PARTS:
        score = score_backend("full_context", absent_referent(load_cases(part)), data_dir=None)
        over, total = over + score.false_deletions, total + score.near_misses
    assert total > 300 and over <= ABSENT_OVER_REACH * total, f"{over}/{total} deleted a fact not asked for"


def _real_user_turns(personamem_dev: Path, locomo_dev: Path) -> list[str]:
    import json

    turns = []
    for line in (personamem_dev / "shared_contexts.jsonl").read_text(encoding="utf-8").splitlines():
        for messages in json.loads(line).values():
            turns += [m["content"] for m in messages if m["role"] == "user"]
    for conversation in json.loads(locomo_dev.read_text(encoding="utf-8")):
        for value in conversation["conversation"].values():
            if isinstance(value, list):
                turns += [turn.get("text", "") for turn in value]
    return turns


def test_real_chat_turns_are_never_forget_requests(personamem_dev: Path, locomo_dev: Path) -> None:
    """2,440 turns of real benchmark chat (PersonaMem dev history, LoCoMo dev conversations) hold no
    forget request: the detector finds none ("Losing my job was hard" once read as "lose my job"), bare
    acts included."""
    from memlab.forget_detector import detect, detect_bare

    turns = _real_user_turns(personamem_dev, locomo_dev)
    assert len(turns) > 2000
    found = [(turn[:120], subject) for turn in turns if (subject := detect(turn) or detect_bare(turn)) is not None]
    assert found == []
