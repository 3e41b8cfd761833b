"""Every built-in backend answers and retrieves exactly as before the speed work, on the real dev files.

The golden files (tests/data/golden/) hold main's predictions at commit 5ca34c8, before the
precompute, incremental BM25, bulk ingest and retrieve-cost changes: the chosen option (or a digest
of the open answer) and a digest of the ranked retrieved messages of every question, for rag,
profile, full_context, mem0 (no LLM) and the blind controls. tests/golden_predictions.py makes
them, and with ``--check`` compares all of LoCoMo dev (here: its first conversation, 199 questions).
The PersonaMem run starts from recorded embeddings (see tests/golden_predictions.py), so it takes
minutes, not half an hour.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden_predictions import differences, recorded_embeddings


@pytest.mark.slow  # minutes: from the recorded embeddings (tests/golden_predictions.py); mem0 embeds its own
def test_personamem_dev_predictions_are_unchanged(personamem_dev: Path, tmp_path: Path) -> None:
    assert recorded_embeddings("personamem").is_file(), "tests/data/golden/personamem-embeddings.sqlite.gz is missing"
    total, problems = differences("personamem", tmp_path / "run", warm=True)
    assert total == 810 and not problems, "\n".join(problems[:20])


@pytest.mark.slow
def test_locomo_dev_predictions_are_unchanged(locomo_dev: Path, tmp_path: Path) -> None:
    total, problems = differences("locomo", tmp_path / "run", contexts=["conv-26"])
    assert total == 5 * 199 and not problems, "\n".join(problems[:20])
