"""Comparing rows of one or several runs: one table, paired tests between every two rows, exports.

``compare_runs(run_dirs)`` reads each run's ``summary.json`` and ``predictions.jsonl`` (the rows of
the config that wrote the summary) and builds a ``Comparison``: every row with its accuracy and
Wilson interval, per-type accuracy, context tokens, cost and retrieve latency, and an exact McNemar
test between every two rows on the questions both scored, with the p-values adjusted for the number
of tests by Holm's step-down method. Rows are paired only when their datasets have the same content
hash (``settings.dataset.content_sha256``); other pairs are listed in ``refused`` with the reason.

Rows are named ``backend/reader`` (``rag/embedding[minilm]``), with the run's name in front when
several runs are compared (``dev:rag/embedding[minilm]``). ``find_row`` also accepts the report's
``backend / reader`` spelling and a backend label alone when only one row has it.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memlab.errors import MemlabError
from memlab.report.loading import ReportError, is_control, load_run
from memlab.report.tables import _md, _plain, pct_ci, question_types, type_labels
from memlab.results import (
    PREDICTIONS_FILE,
    Prediction,
    RowSummary,
    RunSummary,
    Score,
    mcnemar_exact,
    read_predictions,
)

CORRECTION = "holm"
CORRECTION_TEXT = "Holm (step-down, family-wise error over all tested pairs)"
Format = Literal["md", "csv", "latex", "json", "plain"]


class CompareError(MemlabError):
    """A comparison that cannot be made as asked (unknown row, rows on different data)."""


class ComparedRow(BaseModel):
    """One row of the comparison table."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="backend/reader, prefixed by the run name when several runs are compared")
    run: str
    backend: str
    reader: str
    control: bool = False
    dataset: str = Field(default="", description="the dataset spec of the run")
    dataset_sha256: str | None = Field(default=None, description="content hash of the dataset, when recorded")
    accuracy: Score | None = None
    accuracy_std: float | None = None
    per_type: dict[str, Score] = Field(default_factory=dict)
    questions: int = 0
    errors: int = 0
    mean_context_tokens: float = 0.0
    cost_usd: float = Field(default=0.0, description="reading plus ingesting")
    retrieve_ms_p50: float | None = None
    retrieve_ms_p95: float | None = None
    llm_model: str | None = None


class PairwiseTest(BaseModel):
    """Exact two-sided McNemar test of two rows on the questions both scored."""

    model_config = ConfigDict(extra="forbid")

    row_a: str
    row_b: str
    n: int = Field(description="questions scored by both rows")
    a_only: int = Field(description="right in row_a, wrong in row_b")
    b_only: int = Field(description="right in row_b, wrong in row_a")
    p: float
    p_adjusted: float = Field(description="p adjusted for the number of tests (see correction)")


class RefusedPair(BaseModel):
    model_config = ConfigDict(extra="forbid")

    row_a: str
    row_b: str
    reason: str


class Comparison(BaseModel):
    """The comparison of the rows of one or several runs (``memlab compare``'s JSON)."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str]
    rows: list[ComparedRow]
    correction: str = CORRECTION
    correction_method: str = CORRECTION_TEXT
    pairwise: list[PairwiseTest] = Field(default_factory=list)
    refused: list[RefusedPair] = Field(default_factory=list)
    without_predictions: list[str] = Field(
        default_factory=list,
        description="runs with a summary.json but no predictions.jsonl (e.g. results shipped in docs/results): "
        "their rows cannot be paired",
    )


# --------------------------------------------------------------------------- building
def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: the i-th smallest p times (m - i),
    made monotone and capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def _dataset_hash(row: RowSummary) -> str | None:
    dataset = row.settings.get("dataset") if isinstance(row.settings, dict) else None
    value = dataset.get("content_sha256") if isinstance(dataset, dict) else None
    return str(value) if value else None


class LoadedRun:
    """A run's summary and the predictions of its config's rows (read from ``path`` unless given)."""

    def __init__(
        self, path: Path, summary: RunSummary | None = None, predictions: list[Prediction] | None = None
    ) -> None:
        self.path = path
        if predictions is None:
            predictions = read_predictions(path)
        self.summary: RunSummary = summary if summary is not None else load_run(path, predictions)
        self.name = self.summary.name or path.resolve().name
        self.has_predictions = bool(predictions) or (path / PREDICTIONS_FILE).is_file()
        self.predictions = self.summary.current(predictions)


def row_name(run: str, row: RowSummary, several: bool) -> str:
    """A row's name in a comparison: ``[run:]backend/reader``."""
    return (f"{run}:" if several else "") + f"{row.backend}/{row.reader}"


def run_names(runs: Sequence[LoadedRun]) -> list[str]:
    """The name of each run in a comparison: its own, or its path when two runs share one."""
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [str(r.path) for r in runs]  # two runs with one name: their paths tell them apart


def _scored(predictions: list[Prediction]) -> dict[tuple[str, str], dict[str, bool]]:
    out: dict[tuple[str, str], dict[str, bool]] = {}
    for p in predictions:
        if p.error is None and p.correct is not None:
            out.setdefault(p.row, {})[p.question_id] = bool(p.correct)
    return out


def compare_runs(run_dirs: Sequence[str | Path]) -> Comparison:
    """The comparison of every row of the given run directories (see the module docstring)."""
    if not run_dirs:
        raise CompareError("compare needs at least one run directory")
    return compare_loaded([LoadedRun(Path(d)) for d in run_dirs])


def compare_loaded(runs: Sequence[LoadedRun]) -> Comparison:
    """``compare_runs`` of runs already loaded (``memlab ui`` keeps them in memory)."""
    runs = list(runs)
    if not runs:
        raise CompareError("compare needs at least one run directory")
    names = run_names(runs)
    several = len(runs) > 1
    rows: list[ComparedRow] = []
    answers: dict[str, dict[str, bool]] = {}
    unpaired = {name for run, name in zip(runs, names) if not run.has_predictions}
    for run, run_name in zip(runs, names):
        scored = _scored(run.predictions)
        spec = str(run.summary.dataset.get("spec", run.summary.config.get("dataset", "")))
        ordered = [r for r in run.summary.rows if not is_control(r)] + [r for r in run.summary.rows if is_control(r)]
        for row in ordered:
            name = row_name(run_name, row, several)
            rows.append(
                ComparedRow(
                    name=name,
                    run=run_name,
                    backend=row.backend,
                    reader=row.reader,
                    control=is_control(row),
                    dataset=spec,
                    dataset_sha256=_dataset_hash(row),
                    accuracy=row.accuracy,
                    accuracy_std=row.accuracy_std,
                    per_type=row.per_type,
                    questions=row.questions,
                    errors=row.errors,
                    mean_context_tokens=row.mean_context_tokens,
                    cost_usd=row.cost_usd + row.ingest_cost_usd,
                    retrieve_ms_p50=row.retrieve_ms_p50,
                    retrieve_ms_p95=row.retrieve_ms_p95,
                    llm_model=row.llm_model,
                )
            )
            answers[name] = scored.get((row.backend, row.reader), {})
    tests: list[tuple[str, str, int, int, int, float]] = []
    refused: list[RefusedPair] = []
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            reason = pairing_refusal(a, b)
            if reason is None and (a.run in unpaired or b.run in unpaired):
                reason = f"no predictions.jsonl in run {a.run if a.run in unpaired else b.run} (a summary alone)"
            if reason is not None:
                refused.append(RefusedPair(row_a=a.name, row_b=b.name, reason=reason))
                continue
            shared = answers[a.name].keys() & answers[b.name].keys()
            if not shared:
                refused.append(RefusedPair(row_a=a.name, row_b=b.name, reason="no question scored by both"))
                continue
            a_only = sum(answers[a.name][q] and not answers[b.name][q] for q in shared)
            b_only = sum(answers[b.name][q] and not answers[a.name][q] for q in shared)
            tests.append((a.name, b.name, len(shared), a_only, b_only, mcnemar_exact(a_only, b_only)))
    adjusted = holm([t[5] for t in tests])
    pairwise = [
        PairwiseTest(row_a=a, row_b=b, n=n, a_only=ao, b_only=bo, p=p, p_adjusted=adj)
        for (a, b, n, ao, bo, p), adj in zip(tests, adjusted)
    ]
    return Comparison(
        runs=[str(r.path) for r in runs],
        rows=rows,
        pairwise=pairwise,
        refused=refused,
        without_predictions=[str(r.path) for r in runs if not r.has_predictions],
    )


def pairing_refusal(a: ComparedRow, b: ComparedRow) -> str | None:
    """Why rows ``a`` and ``b`` cannot be tested against each other, or None when they can."""
    if a.run == b.run:
        return None  # one run, one dataset
    if a.dataset_sha256 is None or b.dataset_sha256 is None:
        missing = a.name if a.dataset_sha256 is None else b.name
        return f"the dataset content hash of {missing} is not recorded (a run made before fingerprints): cannot tell that both saw the same questions"
    if a.dataset_sha256 != b.dataset_sha256:
        return (
            f"different datasets: {a.dataset or '?'} (content sha256 {a.dataset_sha256[:12]}) vs "
            f"{b.dataset or '?'} (content sha256 {b.dataset_sha256[:12]}); paired tests need the same questions"
        )
    return None


def find_row(comparison: Comparison, name: str) -> ComparedRow:
    """The row called ``name``: ``[run:]backend/reader`` (``backend / reader`` as the report spells it), or
    ``[run:]backend`` when that backend label names one row."""
    wanted = name.replace(" / ", "/").strip()
    runs = {r.run for r in comparison.rows}
    run, sep, rest = wanted.partition(":")
    candidates = comparison.rows
    if sep and run in runs:
        candidates, wanted = [r for r in comparison.rows if r.run == run], rest
    for match in (
        lambda r: f"{r.backend}/{r.reader}" == wanted or r.name == wanted,
        lambda r: r.backend == wanted,
    ):
        found = [r for r in candidates if match(r)]
        if len(found) == 1:
            return found[0]
        if found:
            raise CompareError(
                f"row {name!r} is ambiguous: {', '.join(r.name for r in found)}; name it as backend/reader"
            )
    raise CompareError(f"no row {name!r}; the rows are: {', '.join(r.name for r in comparison.rows)}")


# --------------------------------------------------------------------------- tables
def _types(comparison: Comparison) -> list[str]:
    summary = RunSummary(rows=[RowSummary(backend="", reader="", per_type=r.per_type) for r in comparison.rows])
    return question_types(summary)


def _accuracy_cell(row: ComparedRow) -> str:
    text = pct_ci(row.accuracy)
    return text if row.accuracy_std is None else f"{text} ± {100 * row.accuracy_std:.1f}"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def rows_grid(comparison: Comparison) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, cells and footnotes of the comparison table."""
    types = _types(comparison)
    labels = type_labels(types)
    has_std = any(r.accuracy_std is not None for r in comparison.rows)
    headers = [
        "Row",
        "Accuracy % [95% CI]" + (" ± std over answer runs" if has_std else ""),
        *(labels[t] for t in types),
        "n",
        "Ctx tokens",
        "Cost USD",
        "Retrieve ms p50",
        "Retrieve ms p95",
    ]
    body = []
    for row in comparison.rows:
        cells = [row.name + (" (control)" if row.control else ""), _accuracy_cell(row)]
        cells += ["–" if (s := row.per_type.get(t)) is None or s.n == 0 else f"{100 * s.accuracy:.1f}" for t in types]
        cells += [str(row.questions), f"{row.mean_context_tokens:,.0f}", f"{row.cost_usd:.4f}"]
        cells += [_ms(row.retrieve_ms_p50), _ms(row.retrieve_ms_p95)]
        body.append(cells)
    notes = [f"{labels[t]} = {t}" for t in types if labels[t] != t]
    return headers, body, notes


def _short_ids(comparison: Comparison) -> dict[str, str]:
    return {row.name: f"R{i + 1}" for i, row in enumerate(comparison.rows)}


def pairwise_grid(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """The matrix: the cell of row i and column j holds i-only / j-only discordant questions and the
    adjusted p; refused pairs show 'n/a'."""
    ids = _short_ids(comparison)
    tests = {(t.row_a, t.row_b): t for t in comparison.pairwise}
    # n (questions both rows scored) goes into each cell unless every pair has the same n (then: the note).
    per_cell_n = len({t.n for t in comparison.pairwise}) > 1
    refused = {(r.row_a, r.row_b) for r in comparison.refused} | {(r.row_b, r.row_a) for r in comparison.refused}
    headers = ["", *(ids[r.name] for r in comparison.rows)]
    body = []
    for a in comparison.rows:
        cells = [f"{ids[a.name]} {a.name}"]
        for b in comparison.rows:
            if a.name == b.name:
                cells.append("·")
            elif (a.name, b.name) in tests:
                t = tests[(a.name, b.name)]
                cells.append(f"+{t.a_only}/-{t.b_only} p={t.p_adjusted:.2g}" + (f" n={t.n}" if per_cell_n else ""))
            elif (b.name, a.name) in tests:
                t = tests[(b.name, a.name)]
                cells.append(f"+{t.b_only}/-{t.a_only} p={t.p_adjusted:.2g}" + (f" n={t.n}" if per_cell_n else ""))
            else:
                cells.append("n/a" if (a.name, b.name) in refused else "–")
        body.append(cells)
    return headers, body


PAIRWISE_NOTE = (
    "Cell (row i, column j): +questions right in i and wrong in j / -the reverse, and the exact two-sided "
    "McNemar p on the questions both scored, adjusted by {method}; n/a: not paired (see below)."
)


def pairwise_note(comparison: Comparison) -> str:
    """The matrix's legend, with the number of questions each pair was tested on."""
    sizes = sorted({t.n for t in comparison.pairwise})
    n_text = (
        f" Every pair was tested on the same n = {sizes[0]} questions."
        if len(sizes) == 1
        else " n = questions both rows scored (in each cell)."
        if sizes
        else ""
    )
    return PAIRWISE_NOTE.format(method=CORRECTION_TEXT) + n_text


def no_pairs_line(comparison: Comparison) -> str | None:
    """One clear line instead of an all-n/a matrix when no run holds its predictions."""
    if comparison.pairwise or not comparison.without_predictions:
        return None
    runs = ", ".join(comparison.without_predictions)
    return (
        f"No paired tests: {runs} holds a summary.json but no predictions.jsonl (results shipped without their "
        "per-question answers, as under docs/results/), and paired tests need each question's answer. Run the "
        "evaluation (memlab run ... --out DIR) and compare DIR."
    )


def _csv(headers: list[str], body: list[list[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows(body)
    return buffer.getvalue()


# One pass over the text, so what one replacement writes is never escaped again (95% -> 95\%, not 95\textbackslash...).
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "±": r"$\pm$",
    "–": "--",
    "·": "",
    "✓": r"$\surd$",
}
_LATEX_PATTERN = re.compile("|".join(re.escape(c) for c in _LATEX_SPECIAL))
# A table wider than this many characters (its widest cell per column, plus column gaps) would run off a
# one-column page at \small: it is scaled to the text width (\resizebox) instead.
LATEX_MAX_CHARACTERS = 80
LATEX_PREAMBLE = "% memlab compare export; needs \\usepackage{graphicx} (\\resizebox) in the preamble"


def latex_escape(text: str) -> str:
    """``text`` as LaTeX text: its special characters escaped, the few non-ASCII signs memlab prints spelled out."""
    return _LATEX_PATTERN.sub(lambda m: _LATEX_SPECIAL[m.group(0)], text)


def _latex(headers: list[str], body: list[list[str]], caption: str, label: str = "") -> str:
    """A ``table`` float with plain ``\\hline`` rules (no package beyond graphicx), scaled to the text width
    when it is wider than ``LATEX_MAX_CHARACTERS``."""
    spec = "l" + "r" * (len(headers) - 1)
    tabular = [
        rf"\begin{{tabular}}{{{spec}}}",
        r"\hline",
        " & ".join(latex_escape(h) for h in headers) + r" \\",
        r"\hline",
        *(" & ".join(latex_escape(c) for c in row) + r" \\" for row in body),
        r"\hline",
        r"\end{tabular}",
    ]
    widths = [max(len(row[i]) if i < len(row) else 0 for row in [headers, *body]) for i in range(len(headers))]
    if sum(widths) + 3 * len(widths) > LATEX_MAX_CHARACTERS:
        tabular = [r"\resizebox{\linewidth}{!}{%", *tabular, "}"]
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        *tabular,
        rf"\caption{{{latex_escape(caption)}}}",
        *([rf"\label{{{label}}}"] if label else []),
        r"\end{table}",
    ]
    return "\n".join(lines)


def _refused_lines(comparison: Comparison) -> list[str]:
    # One line per distinct reason and run pair, not per row pair: two runs on other data refuse every pair.
    seen: dict[str, int] = {}
    for r in comparison.refused:
        seen[r.reason] = seen.get(r.reason, 0) + 1
    return [f"not paired ({count} pair(s)): {reason}" for reason, count in seen.items()]


def render_comparison(comparison: Comparison, fmt: Format = "md") -> str:
    """The comparison as Markdown, CSV, LaTeX, JSON or aligned plain text (the terminal)."""
    if fmt == "json":
        return comparison.model_dump_json(indent=2)
    headers, body, notes = rows_grid(comparison)
    p_headers, p_body = pairwise_grid(comparison)
    note = pairwise_note(comparison)
    refused = _refused_lines(comparison)
    no_pairs = no_pairs_line(comparison)
    if fmt == "csv":  # both tables, a blank line between; --out FILE.csv writes one file each (csv_tables)
        return "\n".join(csv_tables(comparison).values())
    if fmt == "latex":
        caption = (
            "Accuracy with Wilson 95% intervals; context tokens are the mean tokens of memory shown to "
            "the reader; controls never see memory." + (" " + "; ".join(notes) + "." if notes else "")
        )
        tables = [LATEX_PREAMBLE, _latex(headers, body, caption, "tab:memlab-accuracy")]
        if no_pairs is None:
            tables.append(_latex(p_headers, p_body, note, "tab:memlab-pairwise"))
        return "\n\n".join(tables) + "\n"
    if fmt == "plain":
        parts = [_plain(headers, body, set(range(1, len(headers)))), *notes, ""]
        parts += [no_pairs] if no_pairs else [_plain(p_headers, p_body, set()), note, *refused]
        return "\n".join(parts) + "\n"
    parts = [_md(headers, body, set(range(1, len(headers))))]
    if notes:
        parts.append("Columns: " + "; ".join(notes) + ".")
    parts += ["### Paired tests between rows", *([no_pairs] if no_pairs else [_md(p_headers, p_body, set()), note])]
    if refused and not no_pairs:
        parts.append("\n".join(f"- {line}" for line in refused))
    return "\n\n".join(parts) + "\n"


def _number(value: float | None, scale: float = 1.0, digits: int = 4) -> str:
    return "" if value is None else f"{scale * value:.{digits}f}"


def csv_tables(comparison: Comparison) -> dict[str, str]:
    """One CSV per table, numbers as numbers (percent columns ``*_pct``): ``accuracy`` (a row per compared
    row) and ``pairwise`` (a line per tested pair)."""
    types = _types(comparison)
    headers = ["row", "run", "backend", "reader", "control", "accuracy_pct", "ci_low_pct", "ci_high_pct"]
    headers += ["accuracy_std_pct", *(f"{t}_pct" for t in types), "n", "errors", "mean_context_tokens"]
    headers += ["cost_usd", "retrieve_ms_p50", "retrieve_ms_p95"]
    body = []
    for row in comparison.rows:
        acc = row.accuracy
        cells = [row.name, row.run, row.backend, row.reader, str(row.control).lower()]
        low, mid, high = (None, None, None) if acc is None else (acc.low, acc.accuracy, acc.high)
        cells += [_number(mid, 100, 2), _number(low, 100, 2), _number(high, 100, 2)]
        cells += [_number(row.accuracy_std, 100, 2)]
        cells += [_number(s.accuracy, 100, 2) if (s := row.per_type.get(t)) and s.n else "" for t in types]
        cells += [str(row.questions), str(row.errors), f"{row.mean_context_tokens:.1f}", f"{row.cost_usd:.6f}"]
        cells += [_number(row.retrieve_ms_p50, 1, 3), _number(row.retrieve_ms_p95, 1, 3)]
        body.append(cells)
    pair_headers = ["row_a", "row_b", "n", "a_only", "b_only", "p", f"p_adjusted_{CORRECTION}"]
    pair_rows = [
        [t.row_a, t.row_b, str(t.n), str(t.a_only), str(t.b_only), f"{t.p:.6g}", f"{t.p_adjusted:.6g}"]
        for t in comparison.pairwise
    ]
    return {"accuracy": _csv(headers, body), "pairwise": _csv(pair_headers, pair_rows)}


# --------------------------------------------------------------------------- plot
def plot_comparison(comparison: Comparison, path: str | Path, x: Literal["tokens", "cost"] = "tokens") -> Path:
    """Accuracy (Wilson 95% interval as error bars) against mean context tokens or total cost, one
    labelled point per row; controls grey. Symmetric-log x axis, so 0 tokens (controls) stays visible."""
    from matplotlib.figure import Figure

    rows = [r for r in comparison.rows if r.accuracy is not None and r.accuracy.n]
    if not rows:
        raise CompareError("nothing to plot: no row has a scored accuracy")
    fig = Figure(figsize=(8.0, 5.2 + 0.22 * len(rows)), layout="constrained")
    ax = fig.add_subplot()
    ids = _short_ids(comparison)
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
    markers = ["o", "s", "^", "D", "v", "P", "*", "h"]  # with the colour, tells apart rows a colour repeats for
    points: list[tuple[str, float, float]] = []
    for i, row in enumerate(rows):
        assert row.accuracy is not None
        value = row.mean_context_tokens if x == "tokens" else row.cost_usd
        acc = 100 * row.accuracy.accuracy
        err = [[max(0.0, acc - 100 * row.accuracy.low)], [max(0.0, 100 * row.accuracy.high - acc)]]
        color = "#8c8c8c" if row.control else palette[i % len(palette)]
        # Points close together would overprint their names: each point carries its short id, the
        # legend under the plot names it.
        ax.errorbar(
            [value],
            [acc],
            yerr=err,
            fmt="x" if row.control else markers[(i // len(palette)) % len(markers)],
            capsize=3,
            color=color,
            label=f"{ids[row.name]} {row.name} (n={row.accuracy.n})",
        )
        points.append((ids[row.name], value, acc))
    fig.legend(loc="outside lower center", ncols=1, fontsize="small", frameon=False)
    ax.set_xscale("symlog", linthresh=10 if x == "tokens" else 1e-4)
    ax.set_xlabel("mean context tokens shown to the reader" if x == "tokens" else "total cost (USD)")
    ax.set_ylabel("accuracy % (95% CI)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.set_title("Accuracy against " + ("context tokens" if x == "tokens" else "cost"))
    fig.draw_without_rendering()  # the final layout, so label positions are measured where they will be
    for label, offset in zip(points, _label_offsets(ax, points)):
        ax.annotate(label[0], label[1:], textcoords="offset points", xytext=offset, fontsize=8)
    path = Path(path)
    fig.savefig(path, dpi=120)
    return path


# Where a point's label may go, in points from the point: right, then above/below, then left, then further out.
_LABEL_CANDIDATES = [(5, 3), (5, -11), (5, 12), (5, -20), (-22, 3), (-22, -11), (-22, 12), (-22, -20)]
_LABEL_CANDIDATES += [(5, 21), (5, -29), (-22, 21), (-22, -29), (32, 3), (32, -11)]


def _label_offsets(ax: Any, points: list[tuple[str, float, float]]) -> list[tuple[int, int]]:
    """An offset per label such that no two labels overlap and no label covers a point (greedy; the first
    free candidate, else the least crowded)."""
    to_px = ax.figure.dpi / 72.0
    anchors = [ax.transData.transform((px, py)) for _, px, py in points]
    placed: list[tuple[float, float, float, float]] = []
    offsets = []

    def clashes(box: tuple[float, float, float, float]) -> int:
        x0, y0, x1, y1 = box
        hits = sum(not (x1 <= a or b <= x0 or y1 <= c or d <= y0) for a, c, b, d in placed)
        return hits + sum(x0 - 3 <= ax_ <= x1 + 3 and y0 - 3 <= ay <= y1 + 3 for ax_, ay in anchors)

    for (label, _, _), (ax_, ay) in zip(points, anchors):
        width, height = 5.0 * len(label) * to_px, 8.0 * to_px  # 8-point text
        boxes = []
        for dx, dy in _LABEL_CANDIDATES:
            x0, y0 = ax_ + dx * to_px, ay + dy * to_px
            boxes.append(((dx, dy), (x0, y0, x0 + width, y0 + height)))
        best = min(boxes, key=lambda b: clashes(b[1]))
        free = next((b for b in boxes if clashes(b[1]) == 0), best)
        placed.append(free[1])
        offsets.append(free[0])
    return offsets


# --------------------------------------------------------------------------- per-question diff
class DiffLine(BaseModel):
    """One question on which two rows disagree."""

    model_config = ConfigDict(extra="forbid")

    question_id: str
    question_type: str
    question: str | None = None
    answer: int | None
    a_choice: int | None
    b_choice: int | None
    a_correct: bool | None
    b_correct: bool | None
    a_retrieved: list[int] | None = None
    b_retrieved: list[int] | None = None
    evidence: list[int] = Field(default_factory=list)
    a_context_tokens: int = 0
    b_context_tokens: int = 0


class RowDiff(BaseModel):
    model_config = ConfigDict(extra="forbid")

    row_a: str
    row_b: str
    shared: int = Field(description="questions both rows answered")
    a_only: int
    b_only: int
    lines: list[DiffLine]


def _predictions_of(run_dirs: Sequence[str | Path], row: ComparedRow) -> dict[str, Prediction]:
    runs = [LoadedRun(Path(d)) for d in run_dirs]
    for run, name in zip(runs, run_names(runs)):
        if name == row.run:
            return {p.question_id: p for p in run.predictions if p.row == (row.backend, row.reader)}
    raise CompareError(f"run of row {row.name!r} not found")  # pragma: no cover - rows come from these runs


def _question_texts(run_dirs: Sequence[str | Path]) -> dict[str, str]:
    """Question texts from the run's dataset when it can be loaded here (best effort: the diff stands without)."""
    try:
        from memlab.run.job import cached_dataset

        spec = load_run(run_dirs[0]).config.get("dataset")
        return {q.id: q.text for q in cached_dataset(str(spec)).questions} if spec else {}
    except Exception:  # noqa: BLE001 - a dataset that moved or needs a download leaves the texts out
        return {}


def diff_rows(run_dirs: Sequence[str | Path], row_a: str, row_b: str) -> RowDiff:
    """The questions rows ``row_a`` and ``row_b`` answer differently (different choice or one right and
    one wrong): right-only-in-a first, then right-only-in-b, then both wrong."""
    comparison = compare_runs(run_dirs)
    a, b = find_row(comparison, row_a), find_row(comparison, row_b)
    if a.name == b.name:
        raise CompareError(f"--diff needs two different rows, got {a.name!r} twice")
    reason = pairing_refusal(a, b)
    if reason is not None:
        raise CompareError(f"cannot diff {a.name} and {b.name}: {reason}")
    mine, theirs = _predictions_of(run_dirs, a), _predictions_of(run_dirs, b)
    texts = _question_texts(run_dirs)
    lines = []
    shared = [q for q in mine if q in theirs]
    for qid in shared:
        p, o = mine[qid], theirs[qid]
        if p.chosen == o.chosen and p.correct == o.correct:
            continue
        lines.append(
            DiffLine(
                question_id=qid,
                question_type=p.question_type,
                question=texts.get(qid),
                answer=p.answer,
                a_choice=p.chosen,
                b_choice=o.chosen,
                a_correct=p.correct,
                b_correct=o.correct,
                a_retrieved=p.retrieved_messages,
                b_retrieved=o.retrieved_messages,
                evidence=p.evidence_messages,
                a_context_tokens=p.context_tokens,
                b_context_tokens=o.context_tokens,
            )
        )
    lines.sort(key=lambda d: (0 if d.a_correct else 1 if d.b_correct else 2, d.question_type, d.question_id))
    return RowDiff(
        row_a=a.name,
        row_b=b.name,
        shared=len(shared),
        a_only=sum(bool(d.a_correct) and not d.b_correct for d in lines),
        b_only=sum(bool(d.b_correct) and not d.a_correct for d in lines),
        lines=lines,
    )


def _letter(choice: int | None) -> str:
    return "–" if choice is None else "abcdefghij"[choice] if 0 <= choice < 10 else str(choice)


def _retrieved(indexes: list[int] | None, evidence: list[int], limit: int) -> str:
    if indexes is None:
        return "?"
    if not indexes:
        return "nothing"
    shown = ",".join(f"#{i}" + ("*" if i in evidence else "") for i in indexes[:limit])
    return shown + (f" (+{len(indexes) - limit})" if len(indexes) > limit else "")


def render_diff(diff: RowDiff, fmt: Format = "plain", limit: int = 6) -> str:
    """The diff as a terminal table (``plain``), Markdown, CSV or JSON. Retrieved turns are history
    message indexes, ``*`` marking the question's evidence."""
    if fmt == "json":
        return diff.model_dump_json(indent=2)
    headers = ["Question", "Type", "Correct", "A", "B", "A retrieved", "B retrieved", "Text"]
    full = fmt in ("csv", "md")
    body = [
        [
            d.question_id,
            d.question_type,
            _letter(d.answer),
            _letter(d.a_choice) + (" ✓" if d.a_correct else ""),
            _letter(d.b_choice) + (" ✓" if d.b_correct else ""),
            _retrieved(d.a_retrieved, d.evidence, 10_000 if full else limit),
            _retrieved(d.b_retrieved, d.evidence, 10_000 if full else limit),
            (d.question or "")[: 10_000 if full else 60],
        ]
        for d in diff.lines
    ]
    head = (
        f"A = {diff.row_a}\nB = {diff.row_b}\n{diff.shared} questions answered by both; {len(diff.lines)} differ: "
        f"{diff.a_only} right only in A, {diff.b_only} right only in B, "
        f"{len(diff.lines) - diff.a_only - diff.b_only} wrong in both with different choices "
        f"(retrieved: history message indexes, * = evidence)"
    )
    if fmt == "csv":
        return _csv(headers, body)
    if fmt == "md":
        return head.replace("\n", "  \n") + "\n\n" + _md(headers, body, set()) + "\n"
    if fmt == "latex":
        return _latex(headers, body, head.replace("\n", "; "))
    return head + "\n\n" + (_plain(headers, body, set()) if body else "(no question differs)") + "\n"


def write_text(path: str | Path, text: str) -> Path:
    """Write an export, refusing a missing parent directory (no silent mkdir of a mistyped path)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise CompareError(f"--out {path}: the directory {path.parent} does not exist")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CompareError(f"--out {path}: cannot write: {exc.strerror or exc}") from exc
    return path


__all__ = [
    "CORRECTION",
    "CompareError",
    "ComparedRow",
    "Comparison",
    "DiffLine",
    "PairwiseTest",
    "RefusedPair",
    "ReportError",
    "RowDiff",
    "LoadedRun",
    "compare_loaded",
    "compare_runs",
    "csv_tables",
    "row_name",
    "run_names",
    "diff_rows",
    "latex_escape",
    "find_row",
    "holm",
    "pairing_refusal",
    "plot_comparison",
    "render_comparison",
    "render_diff",
    "write_text",
]
