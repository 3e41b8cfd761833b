"""End to end on the real PersonaMem 128k dev history: rag with the embedding reader vs blind controls."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.cli import main
from memlab.results import RunSummary


@pytest.mark.slow
@pytest.mark.data
def test_rag_beats_blind_controls_on_dev_history(personamem_dev: Path, tmp_path: Path) -> None:
    out = tmp_path / "dev"
    assert main(["run", "--dataset", str(personamem_dev), "--backends", "rag", "--out", str(out),
                 "--no-progress", "--no-plots"]) == 0
    summary = RunSummary.load(out)
    rag = summary.row("rag")
    blind_reader = summary.row("none", "embedding[minilm]")
    longest = summary.row("none", "longest_option")
    assert rag.questions == 135 and rag.errors == 0
    assert rag.accuracy.accuracy > longest.accuracy.accuracy + 0.05
    assert rag.accuracy.accuracy > blind_reader.accuracy.accuracy + 0.10
    versus = {c.control: c for c in rag.vs_controls}
    assert versus["none / longest_option"].wins > versus["none / longest_option"].losses
    assert versus["none / embedding[minilm]"].p_value < 0.01
    assert summary.dataset["questions"] == 135 and summary.dataset["messages"] == 698
