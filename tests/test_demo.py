"""The demo's explanation is computed from the result numbers, and library chatter goes to a log."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

from memlab.demo import explain, library_output_to
from memlab.results import PairedComparison, RowSummary, RunSummary, wilson

FACTS, LATEST = "recall_user_shared_facts", "acknowledge_latest_user_preferences"


def row(
    backend: str,
    reader: str,
    overall: int,
    per_type: dict[str, int],
    *,
    control: bool = False,
    vs: list[PairedComparison] | None = None,
) -> RowSummary:
    return RowSummary(
        backend=backend,
        reader=reader,
        control=control,
        accuracy=wilson(overall, 100),
        per_type={t: wilson(c, 50) for t, c in per_type.items()},
        vs_controls=vs or [],
    )


def summary(rag_facts: int, profile_latest: int, mem0_overall: int, rag_latest: int = 10) -> RunSummary:
    versus = [PairedComparison(control="none / embedding", n=100, wins=30, losses=5, p_value=1e-5)]
    return RunSummary(
        rows=[
            row("rag", "embedding", 55, {FACTS: rag_facts, LATEST: rag_latest}, vs=versus),
            row("profile", "embedding", 50, {FACTS: 20, LATEST: profile_latest}, vs=versus),
            row("mem0 (no LLM)", "embedding", mem0_overall, {FACTS: 20, LATEST: 10}, vs=versus),
            row("none", "embedding", 25, {FACTS: 12, LATEST: 12}, control=True),
            row("none", "longest_option", 24, {FACTS: 13, LATEST: 12}, control=True),
        ]
    )


def test_three_lines_follow_the_numbers() -> None:
    lines = explain(summary(rag_facts=40, profile_latest=30, mem0_overall=55))
    assert len(lines) == 3
    assert "rag - recall facts 80%" in lines[0] and "profile - latest preference 60%" in lines[0]
    tied = explain(summary(rag_facts=20, profile_latest=30, mem0_overall=55))[0]
    assert "tied rag/profile/mem0 (no LLM) - recall facts 40%" in tied  # a tie is shared, not given to one
    assert "rag scores 55%" in lines[1] and "25%" in lines[1] and "p=1e-05" in lines[1]
    assert "mem0 (no LLM) is a plain retriever" in lines[2] and "55% against rag's 55%" in lines[2]
    # Other numbers, other claims: nothing in the lines is fixed text about who wins.
    flipped = explain(summary(rag_facts=10, profile_latest=5, mem0_overall=20, rag_latest=11))
    assert "rag" not in flipped[0] and "tied profile/mem0 (no LLM) - recall facts 40%" in flipped[0]
    assert "no design beats the blind controls on latest preference" in flipped[0]
    assert "mem0 (no LLM) fall below it" in flipped[1]


def test_library_output_goes_to_the_log_file(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "demo.log"
    noisy = logging.getLogger("faiss.loader")
    own = logging.StreamHandler()  # a library's own stderr handler is redirected too
    noisy.addHandler(own)
    try:
        with library_output_to(log):
            warnings.warn("some FutureWarning from a library", FutureWarning, stacklevel=1)
            noisy.info("Loading faiss with AVX2 support.")
        assert noisy.handlers == [own]  # restored afterwards
    finally:
        noisy.removeHandler(own)
    captured = capsys.readouterr()
    assert "FutureWarning" not in captured.err and "faiss" not in captured.err
    text = log.read_text()
    assert "some FutureWarning from a library" in text and "Loading faiss with AVX2 support." in text


@pytest.mark.slow
def test_demo_end_to_end_prints_table_lines_and_no_library_noise(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    from memlab.cli import main

    out = tmp_path / "demo"
    code = main(
        [
            "demo",
            "--dataset",
            "synthetic:personas=1,sessions=3,turns=4,aspects=4,questions=7",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    captured = capfd.readouterr()
    assert code == 0
    assert "Best per type:" in captured.out and "Memory helps:" in captured.out
    assert "rag's" in captured.out  # the mem0-versus-rag line
    assert f"Report: {out}" in captured.out
    noise = [
        line for line in (captured.out + captured.err).splitlines() if "Warning" in line or "faiss" in line.lower()
    ]
    assert not noise, noise
    assert (out / "demo.log").is_file()


def test_a_demo_folder_from_other_settings_is_kept_aside_and_the_demo_starts_afresh(
    tmp_path: Path,
    monkeypatch,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    from memlab import demo
    from memlab.run import driver

    out = tmp_path / "demo"
    out.mkdir()
    (out / "predictions.jsonl").write_text("{}\n")
    calls: list[bool] = []

    def fake_run(config):  # type: ignore[no-untyped-def]
        calls.append((out / "predictions.jsonl").exists())
        if len(calls) == 1:
            raise driver.SettingsChangedError("cannot resume: ... made with other settings")
        raise RuntimeError("stop here: the second attempt ran in an empty folder")

    monkeypatch.setattr(driver, "run_with_details", fake_run)
    with pytest.raises(RuntimeError, match="second attempt"):
        demo.run_demo(None, out, progress=False)
    assert calls == [True, False]
    assert (tmp_path / "demo.previous" / "predictions.jsonl").read_text() == "{}\n"
    assert "moved it to" in capsys.readouterr().err
