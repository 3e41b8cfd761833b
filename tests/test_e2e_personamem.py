"""End to end on the real PersonaMem 128k dev history, on a few questions: the CLI run works,
writes its files, and a rerun with more questions resumes instead of starting over. The accuracy
check against the blind controls on all 135 questions is ``benchmarks/bench_e2e_personamem.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.cli import main
from memlab.results import RunSummary, read_predictions


@pytest.mark.data
def test_dev_history_runs_and_resumes(personamem_dev: Path, tmp_path: Path) -> None:
    out = tmp_path / "dev"
    args = [
        "run",
        "--dataset",
        str(personamem_dev),
        "--backends",
        "rag",
        "--rag.embedder",
        "hashing",
        "--reader.embedder",
        "hashing",
        "--out",
        str(out),
        "--no-progress",
        "--no-plots",
    ]
    assert main([*args, "--max-questions", "4"]) == 0
    first = {p.key: p for p in read_predictions(out)}
    assert len(first) == 3 * 4  # rag and the two controls
    assert main([*args, "--max-questions", "10"]) == 0
    second = {p.key: p for p in read_predictions(out)}
    assert len(second) == 3 * 10
    assert all(second[key] == prediction for key, prediction in first.items()), "answered questions were kept"
    lines = (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(second), "nothing answered twice"
    summary = RunSummary.load(out)
    assert summary.row("rag").questions == 10 and summary.row("rag").errors == 0
    assert summary.dataset["questions"] == 135 and summary.dataset["messages"] == 698
