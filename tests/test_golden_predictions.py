"""Every built-in backend answers and retrieves exactly as before the speed work, on the real dev files.

The golden files (tests/data/golden/) hold main's predictions at commit 5ca34c8, before the
precompute, incremental BM25, bulk ingest and retrieve-cost changes: the chosen option (or a digest
of the open answer) and a digest of the ranked retrieved messages of every question, for rag,
profile, full_context, mem0 (no LLM) and the blind controls. tests/golden_predictions.py makes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden_predictions import golden_path, predict


def differences(name: str, tmp_path: Path) -> tuple[int, list[str]]:
    golden = json.loads(golden_path(name).read_text(encoding="utf-8"))
    now = predict(name, tmp_path / "run")
    problems = [f"missing or new: {key}" for key in sorted(set(golden) ^ set(now))]
    for key in sorted(set(golden) & set(now)):
        if golden[key] != now[key]:
            problems.append(f"{key}: was {golden[key]}, now {now[key]}")
    return len(golden), problems


@pytest.mark.slow
def test_personamem_dev_predictions_are_unchanged(personamem_dev: Path, tmp_path: Path) -> None:
    total, problems = differences("personamem", tmp_path)
    assert total == 810 and not problems, "\n".join(problems[:20])


@pytest.mark.slow
def test_locomo_dev_predictions_are_unchanged(locomo_dev: Path, tmp_path: Path) -> None:
    total, problems = differences("locomo", tmp_path)
    assert total > 3000 and not problems, "\n".join(problems[:20])
