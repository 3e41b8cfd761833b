"""Loading a run for reporting: ``summary.json``, rebuilt from ``predictions.jsonl`` when stale."""

from __future__ import annotations

from pathlib import Path

from memlab.results import (
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    Prediction,
    ResultsFileError,
    RowSummary,
    RunSummary,
    read_predictions,
    summarize_rows,
)
from memlab.results import is_control as is_control_pair

ReportError = ResultsFileError  # a run directory that cannot be reported on


def is_control(row: RowSummary) -> bool:
    return row.control or is_control_pair(row.backend, row.reader)


def load_run(run_dir: str | Path, predictions: list[Prediction] | None = None) -> RunSummary:
    """The summary of a run; rebuilt from ``predictions.jsonl`` when ``summary.json`` is missing or
    older than the predictions (a killed or resumed run). Metadata of a stale summary is kept, and
    so is its choice of rows (those of the run config that wrote it, with their fingerprints).
    ``predictions``: the file's predictions when the caller has read them already (``memlab ui``
    keeps them indexed), so they are not read twice."""
    run_dir = Path(run_dir)
    summary_path, predictions_path = run_dir / SUMMARY_FILE, run_dir / PREDICTIONS_FILE
    has_summary, has_predictions = summary_path.is_file(), predictions_path.is_file()
    if not has_summary and not has_predictions:
        raise ReportError(f"{run_dir}: no {SUMMARY_FILE} or {PREDICTIONS_FILE}; is this a run directory?")
    # Read (and version-check) the summary even when stale: its config and versions still apply.
    summary = RunSummary.load(summary_path) if has_summary else RunSummary(name=run_dir.resolve().name)
    stale = has_predictions and (
        not has_summary or summary_path.stat().st_mtime_ns < predictions_path.stat().st_mtime_ns
    )
    if not stale:
        return summary
    if predictions is None:
        predictions = read_predictions(run_dir)
    predictions = summary.current(predictions)  # rows of the config that wrote the summary
    old = {(r.backend, r.reader): r for r in summary.rows}
    rows = summarize_rows(predictions)
    for row in rows:
        if (row.backend, row.reader) in old:
            row.settings = old[(row.backend, row.reader)].settings
    return summary.model_copy(update={"rows": rows})


def _summary_of(run: str | Path | RunSummary) -> RunSummary:
    return run if isinstance(run, RunSummary) else load_run(run)
