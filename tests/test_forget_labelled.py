"""Forget requests on the held-out part of the labelled set (tests/data/forget_requests/heldout.jsonl,
written apart from the rules and never tuned on): no false deletion, no collateral, at least 85 %
of the requests honoured. full_context always (it runs in seconds); every deleting backend in the
slow suite. ``benchmarks/bench_forget_requests.py`` prints the same numbers for both parts."""

from __future__ import annotations

import pytest

from memlab.testing.forget_requests import load_cases, score_backend

MIN_HONOURED = 0.85
CONFIGS = {"full_context": {}, "rag": {"embedder": "minilm"}, "profile": {"embedder": "minilm"}, "mem0": {}}


def _check(backend: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cases = load_cases("heldout")
    assert sum(c.kind == "request" for c in cases) >= 50 and sum(c.kind == "near_miss" for c in cases) >= 50
    data_dir = None if backend == "full_context" else tmp_path
    score = score_backend(backend, cases, data_dir=data_dir, config=CONFIGS[backend])
    assert score.false_deletions == 0, f"{score.line()}; wrong: {score.misses}"
    assert score.collateral == 0, score.line()
    assert score.honoured >= MIN_HONOURED * score.requests, score.line()


def test_full_context_honours_held_out_requests_and_no_near_miss(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _check("full_context", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rag", "profile", "mem0"])
def test_every_deleting_backend_on_the_held_out_set(backend: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _check(backend, tmp_path)
