"""Tables and plots of a run, built from its result files only (``summary.json``/``predictions.jsonl``).

``write_report(run_dir)`` writes ``report.md`` and the PNG plots into the run directory; the table
functions return Markdown (or aligned plain text for the terminal) from a ``RunSummary``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from memlab.datasets.question_types import CANONICAL_TYPES, LEGACY_NAMES, SHORT_NAMES
from memlab.results import (
    DISTANCE_BUCKETS,
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    ResultsFileError,
    RowSummary,
    RunSummary,
    Score,
    read_predictions,
    summarize_rows,
)
from memlab.results import is_control as is_control_pair

REPORT_FILE = "report.md"
TYPE_PLOT = "accuracy_by_type.png"
DISTANCE_PLOT = "accuracy_by_distance.png"

# Short column headers. Runs of the PersonaMem loader carry the paper's seven canonical type names
# (labels from memlab.datasets.question_types); the raw file names get their own labels for result
# files written without that mapping (old and new names can meet in one file, so each is distinct).
LOCOMO_TYPES = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")  # paper order
TYPE_LABELS: dict[str, str] = {
    "recalling_facts_mentioned_by_the_user": "Mentioned facts",
    "recalling_the_latest_user_preferences": "Latest prefs",
    "recalling_the_reasons_behind_previous_updates": "Update reasons",
    "generalizing_to_new_scenarios": "New scenarios",
    "generalizing_past_reasons_in_memory_to_new_scenarios": "Past reasons",
    "recommendation_aligned_with_users_latest_preferences": "Latest-pref recs",
    "identifying_new_things_not_mentioned_by_the_user": "New things",
    **{name: name.capitalize() for name in LOCOMO_TYPES},
    **{name: short[:1].upper() + short[1:] for name, short in SHORT_NAMES.items()},
}
# Column order: the paper's order for PersonaMem (legacy names beside their canonical type), then LoCoMo's.
_TYPE_RANK = {name: i for i, name in enumerate((*CANONICAL_TYPES, *LOCOMO_TYPES))}


ReportError = ResultsFileError  # a run directory that cannot be reported on


# --------------------------------------------------------------------------- loading
def is_control(row: RowSummary) -> bool:
    return row.control or is_control_pair(row.backend, row.reader)


def load_run(run_dir: str | Path) -> RunSummary:
    """The summary of a run; rebuilt from ``predictions.jsonl`` when ``summary.json`` is missing or
    older than the predictions (a killed or resumed run). Metadata of a stale summary is kept, and
    so is its choice of rows (those of the run config that wrote it, with their fingerprints)."""
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
    predictions = summary.current(read_predictions(run_dir))  # rows of the config that wrote the summary
    old = {(r.backend, r.reader): r for r in summary.rows}
    rows = summarize_rows(predictions)
    for row in rows:
        if (row.backend, row.reader) in old:
            row.settings = old[(row.backend, row.reader)].settings
    return summary.model_copy(update={"rows": rows})


def _summary_of(run: str | Path | RunSummary) -> RunSummary:
    return run if isinstance(run, RunSummary) else load_run(run)


# --------------------------------------------------------------------------- formatting helpers
def ordered_rows(summary: RunSummary) -> list[RowSummary]:
    """Rows in summary order, controls last."""
    return [r for r in summary.rows if not is_control(r)] + [r for r in summary.rows if is_control(r)]


def row_label(row: RowSummary) -> str:
    return f"{row.backend} / {row.reader}" + (" (control)" if is_control(row) else "")


def _humanize(name: str) -> str:
    text = re.sub(r"[_\-]+", " ", name).strip()
    return text[:1].upper() + text[1:] if text else name


def type_labels(types: Sequence[str]) -> dict[str, str]:
    """Short, unique column header per question type (unknown types: their name made readable)."""
    labels = {t: TYPE_LABELS.get(t, _humanize(t)) for t in types}
    seen: dict[str, int] = {}
    for label in labels.values():
        seen[label] = seen.get(label, 0) + 1
    # Two types mapping to one header would be indistinguishable: fall back to the raw names.
    return {t: (label if seen[label] == 1 else t) for t, label in labels.items()}


def _type_rank(name: str) -> tuple[int, str]:
    rank = _TYPE_RANK.get(name, _TYPE_RANK.get(LEGACY_NAMES.get(name, ""), len(_TYPE_RANK)))
    return (rank, name)


def question_types(summary: RunSummary) -> list[str]:
    """Question types present in any row: known types in the paper's order, then others by name."""
    return sorted({t for row in summary.rows for t in row.per_type}, key=_type_rank)


def distance_labels(summary: RunSummary) -> list[str]:
    """Distance buckets present in any row, in ``DISTANCE_BUCKETS`` order."""
    present = {b for row in summary.rows for b in row.per_distance}
    return [label for label, _, _ in DISTANCE_BUCKETS if label in present]


def pct(score: Score | None) -> str:
    return "–" if score is None or score.n == 0 else f"{100 * score.accuracy:.1f}"


def pct_ci(score: Score | None) -> str:
    if score is None or score.n == 0:
        return "–"
    return f"{100 * score.accuracy:.1f} [{100 * score.low:.1f}, {100 * score.high:.1f}]"


def _md(headers: list[str], body: list[list[str]], right: set[int]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = ["| " + " | ".join(esc(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|")
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def _plain(headers: list[str], body: list[list[str]], right: set[int]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *body]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in body)])


# --------------------------------------------------------------------------- tables
def _accuracy_grid(summary: RunSummary) -> tuple[list[str], list[list[str]], set[int], list[str]]:
    types = question_types(summary)
    labels = type_labels(types)
    show_cost = any(r.cost_usd > 0 for r in summary.rows)
    headers = ["Backend", "Reader", "Accuracy % [95% CI]", *(labels[t] for t in types), "n", "Ctx tokens", "Errors"]
    headers += ["Cost USD"] if show_cost else []
    body = []
    for row in ordered_rows(summary):
        cells = [row.backend + (" (control)" if is_control(row) else ""), row.reader, pct_ci(row.accuracy)]
        cells += [pct(row.per_type.get(t)) for t in types]
        cells += [str(row.questions), f"{row.mean_context_tokens:,.0f}", str(row.errors)]
        cells += [f"{row.cost_usd:.4f}"] if show_cost else []
        body.append(cells)
    notes = [f"{labels[t]} = {t}" for t in types if labels[t] != t]
    return headers, body, set(range(2, len(headers))), notes


def markdown_table(summary: RunSummary) -> str:
    """Accuracy per (backend, reader): overall with Wilson 95% CI, per question type, n, mean
    context tokens and errors. Controls are marked and listed last. Accuracy is over the n - errors
    questions that were scored."""
    if not summary.rows:
        return "_No results in this run._"
    headers, body, right, notes = _accuracy_grid(summary)
    table = _md(headers, body, right)
    return table + ("\n\nColumns: " + "; ".join(notes) + "." if notes else "")


def terminal_table(summary: RunSummary) -> str:
    """``markdown_table`` as aligned plain text."""
    if not summary.rows:
        return "No results in this run."
    headers, body, right, notes = _accuracy_grid(summary)
    return _plain(headers, body, right) + ("\n\n" + "\n".join(notes) if notes else "")


def distance_table(summary: RunSummary) -> str:
    """Markdown: accuracy % (and n) per distance-to-evidence bucket per row; empty when no row has
    distances (e.g. LoCoMo)."""
    buckets = distance_labels(summary)
    if not buckets:
        return ""
    body = []
    for row in ordered_rows(summary):
        cells = [row.backend + (" (control)" if is_control(row) else ""), row.reader]
        for b in buckets:
            score = row.per_distance.get(b)
            cells.append("–" if score is None or score.n == 0 else f"{pct(score)} (n={score.n})")
        body.append(cells)
    return _md(["Backend", "Reader", *buckets], body, set(range(2, len(buckets) + 2)))


def _metric(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def metrics_table(summary: RunSummary, per_type: bool = True) -> str:
    """Markdown table of retrieval metrics (recall@k, MRR, ...) for rows that have any, overall and
    (``per_type``) per question type; empty string when no row has metrics."""
    rows = [r for r in ordered_rows(summary) if r.metrics]
    if not rows:
        return ""
    names = sorted({m for r in rows for m in r.metrics}, key=_metric_order)
    show_types = per_type and any(r.metrics_per_type for r in rows)
    labels = type_labels(sorted({t for r in rows for t in r.metrics_per_type}))
    headers = ["Backend", "Reader", *(["Type"] if show_types else []), *names]
    body = []
    for row in rows:
        lead = [row.backend + (" (control)" if is_control(row) else ""), row.reader]
        body.append(lead + (["all"] if show_types else []) + [_metric(row.metrics.get(m)) for m in names])
        if show_types:
            for t, values in sorted(row.metrics_per_type.items(), key=lambda kv: _type_rank(kv[0])):
                body.append(lead + [labels[t]] + [_metric(values.get(m)) for m in names])
    first_metric = len(headers) - len(names)
    return _md(headers, body, set(range(first_metric, len(headers))))


def paired_table(summary: RunSummary) -> str:
    """Markdown table: each row against each blind control on the same questions (exact McNemar);
    empty string when there is no control to compare with."""
    body = [
        [row.backend, row.reader, c.control, str(c.n), str(c.wins), str(c.losses), f"{c.p_value:.3g}"]
        for row in ordered_rows(summary)
        for c in row.vs_controls
    ]
    if not body:
        return ""
    headers = ["Backend", "Reader", "vs control", "n", "wins", "losses", "p (McNemar)"]
    return _md(headers, body, {3, 4, 5, 6})


def _metric_order(name: str) -> tuple[str, int, str]:
    # recall@2 before recall@10: numeric suffixes sort by value.
    base, _, k = name.partition("@")
    return (base, int(k) if k.isdigit() else -1, name)


def resources_table(summary: RunSummary) -> str:
    """Markdown: time, tokens and cost per row."""
    if not summary.rows:
        return ""
    headers = ["Backend", "Reader", "Ingest s", "Retrieve s", "Answer s", "Prompt tok", "Completion tok", "Cost USD"]
    body = [
        [
            row.backend + (" (control)" if is_control(row) else ""),
            row.reader,
            f"{row.ingest_seconds:.1f}",
            f"{row.retrieve_seconds:.1f}",
            f"{row.answer_seconds:.1f}",
            f"{row.prompt_tokens:,}",
            f"{row.completion_tokens:,}",
            f"{row.cost_usd:.4f}",
        ]
        for row in ordered_rows(summary)
    ]
    return _md(headers, body, set(range(2, len(headers))))


# --------------------------------------------------------------------------- plots
def _style(index: int, control: bool) -> dict[str, object]:
    from matplotlib import colormaps

    if control:
        greys = ["#8c8c8c", "#b5b5b5", "#5f5f5f", "#d0d0d0"]
        return {"color": greys[index % len(greys)], "hatch": "//", "linestyle": "--", "marker": "x"}
    palette = colormaps["tab10"].colors
    return {"color": palette[index % len(palette)], "hatch": "", "linestyle": "-", "marker": "o"}


def _styles(rows: list[RowSummary]) -> list[dict[str, object]]:
    counts = {True: 0, False: 0}
    out = []
    for row in rows:
        control = is_control(row)
        out.append(_style(counts[control], control))
        counts[control] += 1
    return out


def _plot_types(summary: RunSummary, path: Path) -> Path | None:
    from matplotlib.figure import Figure

    rows = [r for r in ordered_rows(summary) if r.accuracy is not None]
    if not rows:
        return None
    types = question_types(summary)
    labels = type_labels(types)
    groups = ["Overall", *(labels[t] for t in types)]
    n_rows = len(rows)
    width = min(0.8 / n_rows, 0.4)
    # Bars are labelled with their value (a 0% bar is otherwise invisible) while there is room.
    label_bars = n_rows * len(groups) <= 40
    fig = Figure(figsize=(max(7.0, 1.0 + len(groups) * (0.35 + 0.22 * n_rows)), 4.8), layout="constrained")
    ax = fig.add_subplot()
    for i, (row, style) in enumerate(zip(rows, _styles(rows))):
        scores = [row.accuracy, *(row.per_type.get(t) for t in types)]
        xs = [g + (i - (n_rows - 1) / 2) * width for g in range(len(groups))]
        acc = [100 * s.accuracy if s and s.n else float("nan") for s in scores]
        # Wilson bounds can land a rounding error inside the point at 0% or 100%; matplotlib refuses
        # negative error lengths.
        err_lo = [max(0.0, 100 * (s.accuracy - s.low)) if s and s.n else 0.0 for s in scores]
        err_hi = [max(0.0, 100 * (s.high - s.accuracy)) if s and s.n else 0.0 for s in scores]
        ax.bar(
            xs, acc, width * 0.95, label=row_label(row), color=style["color"], hatch=style["hatch"],
            edgecolor="#333333" if style["hatch"] else style["color"], linewidth=0.6,
            yerr=[err_lo, err_hi], error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#222222"},
        )
        if label_bars:
            for x, value in zip(xs, acc):
                if value == value:  # not NaN
                    ax.text(
                        x, 1.5, f"{value:.0f}", rotation=90, ha="center", va="bottom", fontsize=7,
                        bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "alpha": 0.7, "linewidth": 0},
                    )
    tilt = len(groups) > 4  # long type names side by side would overlap
    ax.set_xticks(range(len(groups)), groups, rotation=25 if tilt else 0, ha="right" if tilt else "center")
    ax.axvline(0.5, color="#999999", linewidth=0.8, linestyle=":")  # overall | per type
    ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy % (95% CI)")
    ax.set_title(f"Accuracy per question type{' - ' + summary.name if summary.name else ''}")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    # Legend outside the axes so it never covers a bar.
    fig.legend(loc="outside lower center", ncols=min(n_rows, 3), fontsize="small", frameon=False)
    fig.savefig(path, dpi=120)
    return path


def _plot_distance(summary: RunSummary, path: Path) -> Path | None:
    from matplotlib.figure import Figure

    buckets = distance_labels(summary)
    rows = [r for r in ordered_rows(summary) if r.per_distance]
    if not buckets or not rows:
        return None
    fig = Figure(figsize=(max(7.0, 1.2 * len(buckets) + 3), 4.8), layout="constrained")
    ax = fig.add_subplot()
    for row, style in zip(rows, _styles(rows)):
        # Gaps (a bucket this row has no question in) stay gaps instead of being interpolated over.
        xs = list(range(len(buckets)))
        scores = [row.per_distance.get(b) for b in buckets]
        acc = [100 * s.accuracy if s and s.n else float("nan") for s in scores]
        low = [100 * s.low if s and s.n else float("nan") for s in scores]
        high = [100 * s.high if s and s.n else float("nan") for s in scores]
        ax.plot(
            xs, acc, label=row_label(row), color=style["color"], linestyle=style["linestyle"], marker=style["marker"]
        )
        ax.fill_between(xs, low, high, color=style["color"], alpha=0.12, linewidth=0)
    ax.set_xticks(range(len(buckets)), buckets)
    ax.set_xlim(-0.3, len(buckets) - 0.7)
    ax.set_ylim(-2, 102)  # markers at 0% and 100% stay whole
    ax.set_xlabel("distance from question to evidence (tokens)")
    ax.set_ylabel("accuracy % (band: 95% CI)")
    ax.set_title(f"Accuracy against distance to the evidence{' - ' + summary.name if summary.name else ''}")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncols=min(len(rows), 3), fontsize="small", frameon=False)
    fig.savefig(path, dpi=120)
    return path


def plot_run(run: str | Path | RunSummary, out_dir: str | Path) -> list[Path]:
    """Write the plots of a run as PNGs into ``out_dir``: accuracy per question type (grouped bars,
    controls grey and hatched) and accuracy against distance to the evidence. A plot without data
    (no scored rows, no distances) is skipped. Returns the paths written."""
    summary = _summary_of(run)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [_plot_types(summary, out / TYPE_PLOT), _plot_distance(summary, out / DISTANCE_PLOT)]
    return [p for p in written if p is not None]


# --------------------------------------------------------------------------- report.md
def _section(title: str, body: str) -> list[str]:
    return [f"## {title}", "", body, ""] if body else []


def render_report(summary: RunSummary, images: Sequence[Path] = ()) -> str:
    """The Markdown of ``report.md``; ``images`` are linked by file name (they sit beside it)."""
    out = [f"# Run report: {summary.name or 'unnamed run'}", ""]
    facts = [f"- created: {summary.created}", f"- schema version: {summary.schema_version}"]
    if summary.dataset:
        facts.append("- dataset: " + ", ".join(f"{k}={v}" for k, v in summary.dataset.items()))
    if summary.embedder:
        facts.append(f"- embedder: {summary.embedder}")
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
        if paired_table(summary) else "",
    )
    out += _section("Accuracy by distance to the evidence", distance_table(summary))
    out += _section("Retrieval metrics", metrics_table(summary))
    out += _section("Time, tokens and cost", resources_table(summary))
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
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(render_report(summary, images), encoding="utf-8")
    tmp.replace(path)
    return path
