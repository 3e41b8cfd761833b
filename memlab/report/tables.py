"""The tables of a run report, as Markdown (or aligned plain text for the terminal), from a ``RunSummary``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from memlab.datasets.question_types import CANONICAL_TYPES, LEGACY_NAMES, SHORT_NAMES
from memlab.report.loading import is_control
from memlab.results import DISTANCE_BUCKETS, RowSummary, RunSummary, Score

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
    # --answer-runs N: the spread over the N runs stands beside run 1's accuracy.
    show_runs = any(r.accuracy_std is not None for r in summary.rows)
    if show_runs:
        headers.insert(3, "Runs mean ± std %")
    body = []
    for row in ordered_rows(summary):
        cells = [row.backend + (" (control)" if is_control(row) else ""), row.reader, pct_ci(row.accuracy)]
        if show_runs:
            cells.append(
                "–"
                if row.accuracy_mean is None or row.accuracy_std is None
                else f"{100 * row.accuracy_mean:.1f} ± {100 * row.accuracy_std:.1f} ({len(row.accuracy_runs)} runs)"
            )
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


def traceability_text(summary: RunSummary) -> str:
    """One line per row whose retrieved items could not all be traced to turns; empty when every item could.

    Such items carry no ``session_id`` + ``turn_index`` source, so the questions they came back for
    have no retrieval metrics (recall@k, MRR): said here rather than left as a blank in the tables.
    """
    lines = [
        f"not traceable: row {row.backend} / {row.reader}: {row.untraceable_items} of {row.retrieved_items} retrieved "
        f"items carry no turn source (session_id + turn_index), so {row.untraceable_questions} of {row.questions} "
        "questions have no retrieval metrics"
        for row in ordered_rows(summary)
        if row.untraceable_items
    ]
    return "\n".join(lines)


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


# Scores of a written answer to an open question (LoCoMo, LongMemEval).
OPEN_ANSWER_METRICS = frozenset({"f1", "f1_no_adversarial", "bleu1"})
# Headers of metrics whose names alone would mislead: LoCoMo's overall F1 with and without category 5.
METRIC_LABELS = {
    "f1": "F1 (all categories)",
    "f1_no_adversarial": "F1 without adversarial (cat. 5)",
    "bleu1": "BLEU-1",
    "judge": "Judge",
    "judge_std": "Judge std",
}


def _metric(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def metrics_table(summary: RunSummary, per_type: bool = True) -> str:
    """Markdown table of retrieval metrics (recall@k, MRR, ...) for rows that have any, overall and
    (``per_type``) per question type; empty string when no row has metrics."""
    rows = [r for r in ordered_rows(summary) if r.metrics]
    if not rows:
        return ""
    names = sorted({m for r in rows for m in r.metrics}, key=_metric_order)
    unscored = [r for r in rows if r.open_questions and not OPEN_ANSWER_METRICS & r.metrics.keys()]
    if unscored:  # open questions read by a reader that writes no answers: say so instead of a blank
        names += [m for m in ("f1", "bleu1") if m not in names]
    show_types = per_type and any(r.metrics_per_type for r in rows)
    labels = type_labels(sorted({t for r in rows for t in r.metrics_per_type}))
    headers = ["Backend", "Reader", *(["Type"] if show_types else []), *(METRIC_LABELS.get(m, m) for m in names)]
    body = []
    for row in rows:
        lead = [row.backend + (" (control)" if is_control(row) else ""), row.reader]
        na = row in unscored

        def cell(values: dict[str, float], m: str, na: bool = na) -> str:
            return "n/a" if na and m in OPEN_ANSWER_METRICS else _metric(values.get(m))

        body.append(lead + (["all"] if show_types else []) + [cell(row.metrics, m) for m in names])
        if show_types:
            for t, values in sorted(row.metrics_per_type.items(), key=lambda kv: _type_rank(kv[0])):
                body.append(lead + [labels[t]] + [cell(values, m) for m in names])
    first_metric = len(headers) - len(names)
    table = _md(headers, body, set(range(first_metric, len(headers))))
    if unscored:
        readers = ", ".join(sorted({r.reader for r in unscored}))
        table += (
            f"\n\nF1 / BLEU n/a: the reader ({readers}) writes no answers to open questions (the embedding "
            "reader returns the remembered turn it finds most relevant), so their F1 and BLEU would measure "
            "nothing; read open questions with an LLM reader (--reader locomo or llm) for these scores."
        )
    return table


def breakdown_fields(summary: RunSummary) -> list[str]:
    """The breakdown fields (``per_field``) any row has, by name."""
    return sorted({name for row in summary.rows for name in row.per_field})


def field_values(summary: RunSummary, name: str) -> list[str]:
    """The values of one breakdown field over all rows, in the order the rows list them (numeric bins
    by their start: ``results.field_scores`` sorts each row's)."""
    values: dict[str, None] = {}
    for row in summary.rows:
        values.update(dict.fromkeys(row.per_field.get(name, {})))
    return list(values)


def field_table(summary: RunSummary, name: str) -> str:
    """Markdown: accuracy % [95% CI] (n) per value of breakdown field ``name`` (one line per value),
    one column per row, controls beside the others; empty when no row has the field."""
    values = field_values(summary, name)
    rows = [r for r in ordered_rows(summary) if name in r.per_field]
    if not values or not rows:
        return ""
    headers = [_humanize(name), *(row_label(r) for r in rows)]
    body = []
    for value in values:
        cells = [value]
        for row in rows:
            score = row.per_field[name].get(value)
            cells.append("–" if score is None or score.n == 0 else f"{pct_ci(score)} (n={score.n})")
        body.append(cells)
    return _md(headers, body, set(range(1, len(headers))))


def field_tables(summary: RunSummary) -> str:
    """Every breakdown field's table, each under its name; empty when there are none."""
    blocks = [f"{_humanize(name)}:\n\n{field_table(summary, name)}" for name in breakdown_fields(summary)]
    return "\n\n".join(b for b in blocks if b.strip())


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


def failed_jobs_text(summary: RunSummary, details_in: str | Path | None = None) -> str:
    """The failed jobs for the terminal: a count (and where their details are), then one line per
    job (backend / context: error); empty string when no job failed."""
    if not summary.failed_jobs:
        return ""
    where = f" (details in {details_in})" if details_in else ""
    lines = [f"{len(summary.failed_jobs)} job(s) failed{where}:"]
    lines += [f"  {job['backend']} / {job['context_id'][:16]}: {job['error']}" for job in summary.failed_jobs]
    return "\n".join(lines)


def _metric_order(name: str) -> tuple[str, int, str]:
    # recall@2 before recall@10: numeric suffixes sort by value.
    base, _, k = name.partition("@")
    return (base, int(k) if k.isdigit() else -1, name)


def resources_table(summary: RunSummary) -> str:
    """Markdown: time, tokens and cost per row, reading (the reader's LLM) beside ingesting (LLM calls
    a backend makes while building memory, e.g. mem0's fact extraction)."""
    if not summary.rows:
        return ""
    headers = [
        "Backend",
        "Reader",
        "Ingest s",
        "Retrieve s",
        "Answer s",
        "Read prompt tok",
        "Read completion tok",
        "Read cost USD",
        "Ingest prompt tok",
        "Ingest completion tok",
        "Ingest cost USD",
        "Total cost USD",
    ]
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
            f"{row.ingest_prompt_tokens:,}",
            f"{row.ingest_completion_tokens:,}",
            f"{row.ingest_cost_usd:.4f}",
            f"{row.cost_usd + row.ingest_cost_usd:.4f}",
        ]
        for row in ordered_rows(summary)
    ]
    return _md(headers, body, set(range(2, len(headers))))


def settings_table(summary: RunSummary) -> str:
    """Markdown: what each row's fingerprint covers: backend config, reader, replay, plugin packages."""
    rows = [r for r in ordered_rows(summary) if r.settings]
    if not rows:
        return ""
    headers = ["Backend", "Reader", "Fingerprint", "Replay", "Backend config", "Plugin packages"]
    body = []
    for row in rows:
        backend, reader = row.settings.get("backend", {}), row.settings.get("reader", {})
        config = json.dumps(backend.get("config", {}), sort_keys=True, separators=(", ", ": "))
        packages = "; ".join(dict.fromkeys(str(p) for p in (backend.get("package"), reader.get("package")) if p))
        body.append(
            [
                row.backend,
                row.reader,
                row.fingerprint or "–",
                str(row.settings.get("replay", "–")),
                f"`{config}`",
                packages,
            ]
        )
    return _md(headers, body, set())
