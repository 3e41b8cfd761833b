"""Forget requests on the held-out part of the labelled set (tests/data/forget_requests/heldout.jsonl,
written apart from the rules and never tuned on). ``benchmarks/bench_forget_requests.py`` prints the
same numbers for both parts (docs/personamem-v2.md).

What holds today is asserted as a regression floor: no near-miss deletes anything, collateral stays
at most what was measured, and the share of honoured requests does not fall below the measured one.
Issue 32's targets (at least 85 % honoured and zero collateral on every backend) are not reached on
the held-out part: that test is a strict xfail, so reaching them turns it into a failure to update."""

from __future__ import annotations

import pytest

from memlab.testing.forget_requests import Score, load_cases, score_backend

CONFIGS = {"full_context": {}, "rag": {"embedder": "minilm"}, "profile": {"embedder": "minilm"}, "mem0": {}}
FLOOR_HONOURED = 0.60  # measured: 35/53 (66 %) with full_context, rag, profile and mem0
FLOOR_COLLATERAL = 2  # measured: 2 facts on the held-out part
TARGET_HONOURED = 0.85


def _score(backend: str, tmp_path) -> Score:  # type: ignore[no-untyped-def]
    cases = load_cases("heldout")
    assert sum(c.kind == "request" for c in cases) >= 50 and sum(c.kind == "near_miss" for c in cases) >= 50
    data_dir = None if backend == "full_context" else tmp_path
    return score_backend(backend, cases, data_dir=data_dir, config=CONFIGS[backend])


def _check_floor(score: Score) -> None:
    assert score.false_deletions == 0, f"{score.line()}; wrong: {score.misses}"
    assert score.collateral <= FLOOR_COLLATERAL, score.line()
    assert score.honoured >= FLOOR_HONOURED * score.requests, score.line()


def test_full_context_on_the_held_out_set_no_near_miss_deletes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _check_floor(_score("full_context", tmp_path))


@pytest.mark.xfail(strict=True, reason="issue 32's targets are not reached on the held-out part (see the module doc)")
def test_full_context_reaches_the_issue_targets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    score = _score("full_context", tmp_path)
    assert score.collateral == 0 and score.honoured >= TARGET_HONOURED * score.requests, score.line()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rag", "profile", "mem0"])
def test_every_deleting_backend_on_the_held_out_set(backend: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _check_floor(_score(backend, tmp_path))
