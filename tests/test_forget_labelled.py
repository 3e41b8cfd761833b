"""Forget requests on the labelled set (``tests/data/forget_requests/``), every part written by someone
who had not read the rules: the parts tuned on (dev .. dev12; heldout .. heldout51, each read after
its first held-out measure) and the held-out parts never tuned on (heldout52 .. heldout55, written
after the last change and measured once; their false deletions were looked up and fixed after that
measure, none of their requests read). The learned reader (``memlab.forget_reader``) was trained on
dev .. heldout35, its thresholds chosen on heldout36 .. heldout39 and checked on heldout40 ..
heldout43; the learned spotter (``memlab.forget_spotter``) was trained on dev .. heldout39, its
threshold chosen on heldout40 .. heldout43 and checked on heldout44 .. heldout47.
``benchmarks/bench_forget_requests.py`` prints the same numbers for every part and backend
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
    # tuned on: every backend measured with last round's rules, reader and spotter (full_context measured
    # again with this round's: the same on every dev part); the floor sits two requests under the lowest
    # backend, collateral at most the highest (at least 1)
    "dev": (0.96, 1),  # measured 53/53, collateral 0; absent 8/53
    "dev2": (0.95, 1),  # measured 79/80 (profile 78), collateral 1; absent 17/80
    "dev3": (0.95, 1),  # measured 89/90 (profile 88), collateral 0; absent 3/90
    "dev4": (0.97, 1),  # measured 70/70, collateral 0; absent 5/70
    "dev5": (0.94, 1),  # measured 69/70 (profile 68), collateral 0; absent 0/70
    "dev6": (0.91, 1),  # measured 75/80, collateral 1; absent 9/80
    "dev7": (0.96, 1),  # measured 79/80, collateral 0; absent 0/80
    "dev8": (0.95, 1),  # measured 80/80 (profile 78), collateral 0; absent 1/80
    "dev9": (0.95, 1),  # measured 79/80 (profile 78), collateral 1; absent 1/80
    "dev10": (0.95, 1),  # measured 79/80 (profile 78), collateral 0; absent 1/80
    "dev11": (0.90, 1),  # measured 74/80, collateral 0; absent 2/80
    "dev12": (0.95, 1),  # measured 78/80, collateral 0; absent 4/80
    # read after their first measure (docs/personamem-v2.md gives each part's), the reader trained on
    # heldout .. heldout35, the spotter on heldout .. heldout39: full_context measured with this round's
    # rules, reader and spotter, the floor two requests under it
    "heldout": (0.96, 1),  # measured 53/53, collateral 0; absent 18/53
    "heldout2": (0.97, 1),  # measured 70/70, collateral 0; absent 0/70
    "heldout3": (0.97, 1),  # measured 70/70, collateral 0; absent 1/70
    "heldout4": (0.95, 1),  # measured 69/70, collateral 0; absent 14/70
    "heldout5": (0.95, 1),  # measured 69/70, collateral 0; absent 8/70
    "heldout6": (0.92, 2),  # measured 67/70, collateral 2; absent 10/70
    "heldout7": (0.95, 1),  # measured 69/70, collateral 0; absent 5/70
    "heldout8": (0.95, 1),  # measured 69/70, collateral 1; absent 8/70
    "heldout9": (0.92, 1),  # measured 67/70, collateral 0; absent 5/70
    "heldout10": (0.97, 1),  # measured 70/70, collateral 0; absent 5/70
    "heldout11": (0.92, 1),  # measured 67/70, collateral 0; absent 9/70
    "heldout12": (0.97, 1),  # measured 70/70, collateral 0; absent 2/70
    "heldout13": (0.94, 1),  # measured 68/70, collateral 0; absent 2/68
    "heldout14": (0.91, 1),  # measured 66/70, collateral 1; absent 5/70
    "heldout15": (0.94, 1),  # measured 68/70, collateral 0; absent 1/67
    "heldout16": (0.84, 1),  # measured 61/70, collateral 1; absent 5/68
    "heldout17": (0.81, 3),  # measured 59/70, collateral 3; absent 4/68
    "heldout18": (0.81, 1),  # measured 59/70, collateral 1; absent 3/67
    "heldout19": (0.82, 2),  # measured 60/70, collateral 2; absent 2/67
    "heldout20": (0.88, 1),  # measured 64/70, collateral 0; absent 0/69
    "heldout21": (0.82, 1),  # measured 60/70, collateral 0; absent 1/70
    "heldout22": (0.82, 1),  # measured 60/70, collateral 1; absent 3/70
    "heldout23": (0.88, 1),  # measured 64/70, collateral 1; absent 1/70
    "heldout24": (0.77, 1),  # measured 56/70, collateral 1; absent 11/70
    "heldout25": (0.75, 4),  # measured 55/70, collateral 4; absent 16/70
    "heldout26": (0.72, 8),  # measured 53/70, collateral 8; absent 18/69
    "heldout27": (0.74, 7),  # measured 54/70, collateral 7; absent 12/68
    "heldout28": (0.75, 1),  # measured 55/70, collateral 1; absent 8/69
    "heldout29": (0.78, 7),  # measured 57/70, collateral 7; absent 16/68
    "heldout30": (0.52, 6),  # measured 39/70, collateral 6; absent 9/70
    "heldout31": (0.77, 2),  # measured 56/70, collateral 2; absent 7/68
    "heldout32": (0.82, 3),  # measured 60/70, collateral 3; absent 13/70
    "heldout33": (0.77, 4),  # measured 56/70, collateral 4; absent 8/68
    "heldout34": (0.67, 4),  # measured 49/70, collateral 4; absent 6/69
    "heldout35": (0.72, 2),  # measured 53/70, collateral 2; absent 10/69
    "heldout36": (0.65, 4),  # measured 48/70, collateral 4; absent 13/68
    "heldout37": (0.77, 3),  # measured 56/70, collateral 3; absent 10/70
    "heldout38": (0.75, 5),  # measured 55/70, collateral 5; absent 18/70
    "heldout39": (0.65, 6),  # measured 48/70, collateral 6; absent 18/69
    "heldout40": (0.71, 2),  # measured 52/70, collateral 2; absent 16/67
    "heldout41": (0.70, 8),  # measured 51/70, collateral 8; absent 19/66
    "heldout42": (0.64, 5),  # measured 47/70, collateral 5; absent 14/68
    "heldout43": (0.81, 5),  # measured 59/70, collateral 5; absent 12/67
    "heldout44": (0.57, 8),  # measured 42/70, collateral 8; absent 13/67
    "heldout45": (0.58, 5),  # measured 43/70, collateral 5; absent 15/67; 1 false deletion
    "heldout46": (0.55, 9),  # measured 41/70, collateral 9; absent 19/66
    "heldout47": (0.64, 9),  # measured 47/70, collateral 9; absent 21/67
    "heldout48": (0.64, 6),  # measured 47/70, collateral 6; absent 9/67
    "heldout49": (0.52, 5),  # measured 39/70, collateral 5; absent 11/67
    "heldout50": (0.38, 5),  # measured 29/70, collateral 5; absent 12/67
    "heldout51": (0.55, 8),  # measured 41/70, collateral 8; absent 14/67
    # the held-out parts: written after the last change, measured once (full_context 160/280, 6 false
    # deletions; main before this round 158/280, the same 6); the six false deletions looked up and fixed,
    # none of their requests read; every backend measured after that
    "heldout52": (0.70, 2),  # measured 51/70, collateral 2; absent 14/66; 1 false deletion first, fixed
    "heldout53": (0.42, 11),  # measured 33/70 (profile 32), collateral 11; absent 16/66; 3 false deletions first, fixed
    "heldout54": (0.55, 7),  # measured 42/70 (profile 41), collateral 7; absent 17/67; 1 false deletion first, fixed
    "heldout55": (0.45, 6),  # measured 34/70, collateral 6; absent 9/67; 1 false deletion first, fixed
}
# False deletions seen on a held-out part's first measure and not fixed: heldout45's "take out the part
# about the girlfriend in the redação" edits an essay named in Portuguese (the rules know "essay"; a
# rule for "the part about X in the Y" would also take "the part about my dad in the hospital").
KNOWN_FALSE_DELETIONS = {"heldout45": 1}
DEV_PARTS = [part for part in FLOORS if part.startswith("dev")]
HELD_OUT = ("heldout52", "heldout53", "heldout54", "heldout55")
# issue 32's targets met on the part by full_context (FLOORS' comments give what was measured)
REACHED = dict.fromkeys(HELD_OUT, False)
# make test checks the floors of the dev and held-out parts with full_context (it stays under 15
# minutes); the slow suite every read part with full_context, the other backends on the dev and
# held-out parts (rag and mem0 have matched full_context on every part each time all four were
# measured, profile within three requests: CI stays well under its limit), the targets and the
# over-reach. The benchmark measures every backend on every part.
READ = [part for part in FLOORS if part.startswith("heldout") and part not in HELD_OUT]
OTHER_BACKEND_PARTS = [*DEV_PARTS, *HELD_OUT]
# measured 51/923 (5.5 %) with full_context on the dev parts; the learned reader resolves a
# request whose fact is gone to the nearest one it is sure of now and then
ABSENT_OVER_REACH = 0.06
TARGET_HONOURED = 0.85


def _score(backend: str, tmp_path: Path, part: str) -> Score:
    cases = load_cases(part)
    assert sum(c.kind == "request" for c in cases) >= 50 and sum(c.kind == "near_miss" for c in cases) >= 40
    data_dir = None if backend == "full_context" else tmp_path
    return score_backend(backend, cases, data_dir=data_dir, config=CONFIGS[backend])


def _check_floor(score: Score, part: str) -> None:
    honoured, collateral = FLOORS[part]
    assert score.false_deletions <= KNOWN_FALSE_DELETIONS.get(part, 0), f"{score.line()}; wrong: {score.misses}"
    assert score.collateral <= collateral, score.line()
    assert score.honoured >= honoured * score.requests, score.line()


@pytest.mark.parametrize(
    "part", [pytest.param(part, marks=pytest.mark.slow) if part in READ else part for part in FLOORS]
)
def test_full_context_no_near_miss_deletes_and_the_measured_recall_holds(part: str, tmp_path: Path) -> None:
    _check_floor(_score("full_context", tmp_path, part), part)


@pytest.mark.slow
@pytest.mark.parametrize("part", OTHER_BACKEND_PARTS)
@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_every_deleting_backend_holds_the_floors(backend: str, part: str, tmp_path: Path) -> None:
    _check_floor(_score(backend, tmp_path, part), part)


@pytest.mark.slow
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


@pytest.mark.slow
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
    acts, request shapes the rules cannot read a subject in and the learned spotter included."""
    from memlab.forget_detector import detect, detect_bare
    from memlab.forget_shape import has_request_shape
    from memlab.forget_spotter import spots_request

    turns = _real_user_turns(personamem_dev, locomo_dev)
    assert len(turns) > 2000
    found = [(turn[:120], subject) for turn in turns if (subject := detect(turn) or detect_bare(turn)) is not None]
    assert found == []
    assert [turn[:120] for turn in turns if has_request_shape(turn)] == []
    assert [turn[:120] for turn in turns if spots_request(turn)] == []  # the spotter trained on some of them
