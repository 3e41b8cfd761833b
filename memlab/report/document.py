"""``report.md``: the Markdown document of a run, with its tables and plots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memlab.report.loading import load_run
from memlab.report.plots import plot_run
from memlab.report.tables import (
    distance_table,
    field_tables,
    markdown_table,
    metrics_table,
    paired_table,
    resources_table,
    settings_table,
    traceability_text,
)
from memlab.results import RunSummary, write_atomically

REPORT_FILE = "report.md"


def _section(title: str, body: str) -> list[str]:
    return [f"## {title}", "", body, ""] if body else []


def sampling_settings(config: dict[str, Any]) -> str:
    """Which questions were answered and how often (--max-questions, --sample, --seed, --answer-runs)."""
    limit = config.get("max_questions")
    if limit:
        sample = config.get("sample", "first")
        chosen = f"at most {limit} questions per history, {sample}" + (
            f" (seed {config.get('seed', 0)})" if sample == "stratified" else ""
        )
    else:
        chosen = "every question"
    runs = int(config.get("answer_runs") or 1)
    return f"questions: {chosen}; answer runs: {runs}" + (
        " (accuracy is run 1's; mean ± std over the runs beside it)" if runs > 1 else ""
    )


def render_report(summary: RunSummary, images: Sequence[Path] = ()) -> str:
    """The Markdown of ``report.md``; ``images`` are linked by file name (they sit beside it)."""
    out = [f"# Run report: {summary.name or 'unnamed run'}", ""]
    facts = [f"- created: {summary.created}", f"- schema version: {summary.schema_version}"]
    if summary.dataset:
        facts.append("- dataset: " + ", ".join(f"{k}={v}" for k, v in summary.dataset.items()))
    if summary.embedder:
        facts.append(f"- embedder: {summary.embedder}")
    facts.append(f"- replay: {summary.config.get('replay', 'once')}")
    facts.append("- " + sampling_settings(summary.config))
    judge = summary.config.get("judge")
    if judge:
        model = (judge.get("llm") or {}).get("model") or "default model"
        facts.append(f"- judge: {judge.get('prompt')} prompt, {judge.get('runs', 1)} run(s), {model}")
    if summary.plugins:
        facts.append("- plugin packages: " + ", ".join(f"{k} {v}" for k, v in summary.plugins.items()))
    if summary.versions:
        facts.append("- versions: " + ", ".join(f"{k} {v}" for k, v in summary.versions.items()))
    out += facts + [""]
    out += _section(
        "Accuracy",
        markdown_table(summary)
        + "\n\nAccuracy in %, Wilson 95% interval in brackets, over the n - errors scored questions; "
        "Ctx tokens = mean tokens of memory context shown to the reader; "
        "(control) rows never use memory and show what can be scored without it.",
    )
    out += _section(
        "Against the blind controls",
        paired_table(summary) + "\n\nwins = questions this row answered right and the control wrong, losses the "
        "reverse; p = exact two-sided McNemar test on those discordant questions."
        if paired_table(summary)
        else "",
    )
    out += _section("Accuracy by distance to the evidence", distance_table(summary))
    out += _section(
        "Accuracy by field",
        field_tables(summary) + "\n\nAccuracy in % with its Wilson 95% interval and n, per value of each breakdown "
        "field the dataset carries (PersonaMem-v2: scenario, who, updated, sensitive_info, topic of the preference "
        "and distance to the evidence in the reference's 1,024-token bins); controls beside the other rows."
        if field_tables(summary)
        else "",
    )
    out += _section("Metrics (retrieval, answer scores, judge)", metrics_table(summary))
    traceability = traceability_text(summary)
    out += _section("Not traceable", "\n".join(f"- {line}" for line in traceability.splitlines()))
    out += _section("Time, tokens and cost", resources_table(summary))
    out += _section(
        "Row settings",
        settings_table(summary) + "\n\nA row resumes only when its fingerprint "
        "(a hash of these settings, the reader's and the dataset's) matches."
        if settings_table(summary)
        else "",
    )
    if images:
        out += ["## Plots", ""] + [f"![{p.stem.replace('_', ' ')}]({p.name})" for p in images] + [""]
    if summary.data_issues:
        shown = summary.data_issues[:20]
        more = len(summary.data_issues) - len(shown)
        body = "\n".join(f"- {issue}" for issue in shown) + (f"\n- ... and {more} more" if more else "")
        out += _section(f"Data issues ({len(summary.data_issues)})", body)
    if summary.failed_jobs:
        body = "\n".join("- " + ", ".join(f"{k}: {v}" for k, v in job.items()) for job in summary.failed_jobs)
        out += _section(f"Failed jobs ({len(summary.failed_jobs)})", body)
    return "\n".join(out).rstrip() + "\n"


def write_report(run_dir: str | Path) -> Path:
    """Write ``report.md`` and the plots into the run directory; returns the report's path."""
    run_dir = Path(run_dir)
    summary = load_run(run_dir)
    images = plot_run(summary, run_dir)
    path = run_dir / REPORT_FILE
    write_atomically(path, render_report(summary, images))
    return path
