"""Forget requests on the labelled set (``tests/data/forget_requests/``): the dev parts the rules were
tuned on (dev .. dev12, and heldout .. heldout15, each read and tuned on after its first measure;
heldout18, read but not tuned on) and the held-out parts never tuned on (heldout16, heldout17,
heldout19), every part written by someone who had not read the rules. ``benchmarks/bench_forget_requests.py`` prints the same numbers for every part
(docs/personamem-v2.md).

What holds today is asserted as a regression floor: no near-miss deletes anything, collateral stays
at most what was measured, and the share of honoured requests does not fall below the measured one.
Where issue 32's targets (at least 85 % honoured and zero collateral on every backend) are not
reached on a held-out part, that test is a strict xfail, so reaching them turns it into a failure to
update. A request whose fact is not stored must delete nothing: on the dev parts with the asked-for
facts taken away, the share that still deletes something is held at what was measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.testing.forget_requests import Score, absent_referent, load_cases, score_backend

CONFIGS = {"full_context": {}, "rag": {"embedder": "minilm"}, "profile": {"embedder": "minilm"}, "mem0": {}}
OTHER_BACKENDS = ["rag", "profile", "mem0"]
# part: (share of requests honoured at least, collateral at most), the floor under what was measured
FLOORS = {
    # every backend measured after the heldout15 fixes; the floor sits two requests under the lowest
    "dev": (0.96, 1),  # measured 53/53
    "dev2": (0.95, 1),  # measured 79/80 (profile 78, collateral 1)
    "dev3": (0.95, 1),  # measured 89/90 (profile 88)
    "dev4": (0.94, 1),  # measured 68/70
    "dev5": (0.88, 1),  # measured 64/70
    "dev6": (0.86, 1),  # measured 71/80
    "dev7": (0.93, 1),  # measured 77/80
    "dev8": (0.91, 1),  # measured 77/80 (profile 75)
    "dev9": (0.95, 1),  # measured 78/80
    "dev10": (0.91, 1),  # measured 76/80 (profile 75)
    "dev11": (0.85, 1),  # measured 71/80 (profile 70)
    "dev12": (0.83, 1),  # measured 69/80: named by hypernyms, most now in the topics (39/80 before)
    "heldout": (0.90, 1),  # measured 50/53
    "heldout2": (0.90, 1),  # measured 65/70, collateral 1
    "heldout3": (0.97, 1),  # measured 70/70 (61/70 on its first, held-out measure)
    "heldout4": (0.97, 1),  # measured 70/70 (56/70 on its first measure)
    "heldout5": (0.92, 1),  # measured 67/70 (51/70 on its first measure)
    "heldout6": (0.91, 2),  # measured 66/70, collateral 2 (47/70 on its first measure)
    "heldout7": (0.92, 1),  # measured 69/70, profile 67 (54/70 on its first measure)
    "heldout8": (0.97, 1),  # measured 70/70 (54/70 on its first measure)
    "heldout9": (0.88, 1),  # measured 64/70 (48/70 on its first measure)
    "heldout10": (0.94, 1),  # measured 68/70 (51/70 on its first measure)
    "heldout11": (0.90, 1),  # measured 66/70, profile 65, collateral 1 (49/70 on its first measure)
    "heldout12": (0.91, 1),  # measured 67/70, profile 66 (49/70 on its first measure)
    "heldout13": (0.91, 1),  # measured 66/70 (44/70 on its first measure)
    "heldout14": (0.87, 1),  # measured 64/70, profile 63, collateral 1 (37/70 on its first measure)
    "heldout15": (0.87, 1),  # measured 63/70 (46/70 on its first measure)
    # the held-out part: 36/70 and one false deletion on its first measure; that near-miss was looked
    # up and fixed ("Last week I asked you to forget my old address. Did that go through?"), none of
    # its requests was read
    "heldout16": (0.51, 2),  # measured 38/70, collateral 2
    "heldout17": (0.57, 2),  # measured once: 42/70, collateral 2, no false deletion (written after every fix)
    # written after heldout17; heldout18's misses were read for a learned reader (not shipped), no rule
    # changed for them; heldout19's one false deletion ("I was going to ask you to forget ... Leave
    # it.") was looked up and fixed, none of its requests was read
    "heldout18": (0.60, 1),  # measured 45/70, profile 44, collateral 1
    "heldout19": (0.52, 1),  # measured 41/70, profile 39, collateral 1 (1 false deletion before the fix)
}
DEV_PARTS = [part for part in FLOORS if part.startswith("dev")]
HELD_OUT = ("heldout16", "heldout17", "heldout19")
# issue 32's targets met on the part (38/70, 42/70, 41/70)
REACHED = {"heldout16": False, "heldout17": False, "heldout19": False}
ABSENT_OVER_REACH = 0.05  # measured 44/923 (4.8 %) with full_context on the dev parts
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
