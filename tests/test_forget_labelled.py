"""Forget requests on the labelled set: the held-out part (tests/data/forget_requests/heldout.jsonl,
written apart from the rules and never tuned on) and dev2 (dev2.jsonl, a second dev part written by
someone who had not read the rules, tuned on together with dev.jsonl).
``benchmarks/bench_forget_requests.py`` prints the same numbers for every part (docs/personamem-v2.md).

What holds today is asserted as a regression floor: no near-miss deletes anything, collateral stays
at most what was measured, and the share of honoured requests does not fall below the measured one.
Issue 32's targets (at least 85 % honoured and zero collateral on every backend) are not reached on
the held-out part: that test is a strict xfail, so reaching them turns it into a failure to update."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.testing.forget_requests import Score, load_cases, score_backend

CONFIGS = {"full_context": {}, "rag": {"embedder": "minilm"}, "profile": {"embedder": "minilm"}, "mem0": {}}
FLOOR_HONOURED = 0.65  # measured: 36/53 (68 %) with full_context, rag, profile and mem0
FLOOR_COLLATERAL = 2  # measured: 2 facts (full_context, rag, mem0), 1 (profile) on the held-out part
DEV2_FLOOR_HONOURED = 0.90  # measured: 75/80 (94 %) full_context, rag, mem0; 73/80 (91 %) profile
DEV2_FLOOR_COLLATERAL = {"full_context": 0, "rag": 0, "profile": 1, "mem0": 0}  # measured
TARGET_HONOURED = 0.85


def _score(backend: str, tmp_path: Path, part: str = "heldout") -> Score:
    cases = load_cases(part)
    assert sum(c.kind == "request" for c in cases) >= 50 and sum(c.kind == "near_miss" for c in cases) >= 40
    data_dir = None if backend == "full_context" else tmp_path
    return score_backend(backend, cases, data_dir=data_dir, config=CONFIGS[backend])


def _check_floor(score: Score, honoured: float = FLOOR_HONOURED, collateral: int = FLOOR_COLLATERAL) -> None:
    assert score.false_deletions == 0, f"{score.line()}; wrong: {score.misses}"
    assert score.collateral <= collateral, score.line()
    assert score.honoured >= honoured * score.requests, score.line()


def test_full_context_on_dev2_no_near_miss_deletes_and_no_collateral(tmp_path: Path) -> None:
    _check_floor(_score("full_context", tmp_path, "dev2"), DEV2_FLOOR_HONOURED, DEV2_FLOOR_COLLATERAL["full_context"])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rag", "profile", "mem0"])
def test_every_deleting_backend_on_dev2(backend: str, tmp_path: Path) -> None:
    _check_floor(_score(backend, tmp_path, "dev2"), DEV2_FLOOR_HONOURED, DEV2_FLOOR_COLLATERAL[backend])


def test_full_context_on_the_held_out_set_no_near_miss_deletes(tmp_path: Path) -> None:
    _check_floor(_score("full_context", tmp_path))


@pytest.mark.xfail(strict=True, reason="issue 32's targets are not reached on the held-out part (see the module doc)")
def test_full_context_reaches_the_issue_targets(tmp_path: Path) -> None:
    score = _score("full_context", tmp_path)
    assert score.collateral == 0 and score.honoured >= TARGET_HONOURED * score.requests, score.line()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rag", "profile", "mem0"])
def test_every_deleting_backend_on_the_held_out_set(backend: str, tmp_path: Path) -> None:
    _check_floor(_score(backend, tmp_path))


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
    forget request: the detector finds none ("Losing my job was hard" once read as "lose my job")."""
    from memlab.forget_detector import detect

    turns = _real_user_turns(personamem_dev, locomo_dev)
    assert len(turns) > 2000
    found = [(turn[:120], subject) for turn in turns if (subject := detect(turn)) is not None]
    assert found == []
