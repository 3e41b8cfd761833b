"""The runs explorer's pages as server-rendered HTML: ``/``, ``/questions`` and ``/questions/<id>``.

Tables come from ``memlab.report`` (the comparison grid and the McNemar/Holm matrix of ``memlab
compare``, the Wilson intervals and labels of ``memlab report``), plots from its matplotlib code as
inline PNGs; nothing is fetched from elsewhere. Every text from a result file is escaped.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from urllib.parse import quote, urlencode

from memlab.datasets.base import History
from memlab.report.compare import (
    CORRECTION_TEXT,
    PAIRWISE_NOTE,
    CompareError,
    pairwise_grid,
    plot_comparison,
    rows_grid,
)
from memlab.report.plots import plot_run
from memlab.report.tables import breakdown_fields, distance_labels, field_values, pct_ci, row_label, type_labels
from memlab.results import Prediction, RunSummary, Score
from memlab.types import OPTION_LETTERS
from memlab.ui.dataset_context import DatasetTexts, turns
from memlab.ui.question_filter import PAGE_SIZES, SORTS, QuestionQuery, neighbours, select
from memlab.ui.run_index import QuestionEntry, RowRef, RunView, Snapshot

TEXT_LIMIT = 700  # characters of a history turn shown before "…"
TURNS_SHOWN = 10  # retrieved turns listed open; the rest behind a disclosure (full_context retrieves everything)


def e(value: object) -> str:
    return escape(str(value), quote=True)


def layout(title: str, body: str, active: str = "", live: bool = False) -> str:
    """The frame of every page: skip link, navigation, main landmark; ``live``: the reload toggle."""
    current = ' aria-current="page"'
    nav = "".join(
        f'<a href="{href}"{current if active == href else ""}>{label}</a>'
        for href, label in (("/", "Runs"), ("/questions", "Questions"))
    )
    toggle = (
        '<label class="live"><input type="checkbox" id="live-reload"> reload every 5 s (run in progress)</label>'
        if live
        else ""
    )
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} · memlab</title>"
        '<link rel="stylesheet" href="/static/ui.css"><script src="/static/ui.js" defer></script></head>'
        '<body><a class="skip" href="#main">Skip to content</a>'
        f'<header><span class="brand">memlab</span><nav aria-label="Pages">{nav}</nav>{toggle}</header>'
        f'<main id="main" tabindex="-1">{body}</main></body></html>\n'
    )


def table(headers: Sequence[str], body: Sequence[Sequence[str]], caption: str = "", numeric_from: int = 1) -> str:
    """A table of already-escaped cells; columns from ``numeric_from`` on are right-aligned."""
    head = "".join(f'<th scope="col"{_num(i, numeric_from)}>{h}</th>' for i, h in enumerate(headers))
    rows = []
    for cells in body:
        first, rest = cells[0], cells[1:]
        tds = "".join(f"<td{_num(i + 1, numeric_from)}>{c}</td>" for i, c in enumerate(rest))
        rows.append(f'<tr><th scope="row">{first}</th>{tds}</tr>')
    cap = f"<caption>{caption}</caption>" if caption else ""
    return f'<div class="scroll"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _num(index: int, numeric_from: int) -> str:
    return ' class="num"' if index >= numeric_from else ""


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _letter(choice: int | None) -> str:
    if choice is None:
        return "–"
    return f"({OPTION_LETTERS[choice]})" if 0 <= choice < len(OPTION_LETTERS) else str(choice)


# --------------------------------------------------------------------------- front page
class FrontPage:
    """``/``; the plots are drawn once per state of the files (matplotlib is the slow part)."""

    def __init__(self) -> None:
        self._plots: tuple[int, str] | None = None

    def render(self, snapshot: Snapshot) -> str:
        live = any(run.in_progress for run in snapshot.runs)
        parts = ["<h1>Runs</h1>", *(_run_card(run) for run in snapshot.runs)]
        if snapshot.analysis.behind:
            parts.append(
                f'<p class="note" role="status">Rows, tests and plots as of {_when(snapshot.analysis.built)}; while a run '
                "writes they are recomputed at most every few seconds (the question pages are current).</p>"
            )
        parts.append(_rows_section(snapshot))
        parts.append(_pairwise_section(snapshot))
        for run in snapshot.runs:
            parts.append(_breakdowns(run, several=len(snapshot.runs) > 1))
        parts.append(self._plots_section(snapshot))
        return layout("Runs", "".join(parts), active="/", live=live)

    def _plots_section(self, snapshot: Snapshot) -> str:
        if self._plots is None or self._plots[0] != snapshot.analysis.version:  # the plots show the analysis only
            self._plots = (snapshot.analysis.version, _draw_plots(snapshot))
        return self._plots[1]


def _run_card(run: RunView) -> str:
    summary = run.summary
    spec = _dataset_spec(summary)
    if run.in_progress:
        state = (
            f'<p class="status progress" role="status"><strong>In progress</strong> (no summary.json yet, or one older '
            f"than the predictions): {run.predictions:,} predictions so far, last change {_when(run.files.last_change)}. "
            "Reload (or tick “reload every 5 s”) to see new ones.</p>"
        )
    else:
        state = (
            f'<p class="status">Complete: {run.predictions:,} predictions, summary written {e(summary.created)}.</p>'
        )
    facts = [
        ("Directory", f"<code>{e(run.path)}</code>"),
        ("Dataset", e(spec or "–")),
        ("Embedder", e(summary.embedder or "–")),
        ("Versions", e(", ".join(f"{k} {v}" for k, v in summary.versions.items()) or "–")),
    ]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    extra = []
    if run.files.bad_lines:
        shown = "".join(f"<li>{e(line)}</li>" for line in run.files.bad_lines[:10])
        extra.append(
            f'<div class="warning"><p>{len(run.files.bad_lines)} unreadable line(s) in predictions.jsonl were '
            f"skipped (<code>memlab repair-predictions {e(run.path)}</code> moves them aside):</p><ul>{shown}</ul></div>"
        )
    if summary.failed_jobs:
        items = "".join(
            f"<li>{e(job.get('backend', '?'))} / {e(str(job.get('context_id', ''))[:16])}: {e(job.get('error', ''))}</li>"
            for job in summary.failed_jobs
        )
        extra.append(f'<div class="warning"><p>{len(summary.failed_jobs)} job(s) failed:</p><ul>{items}</ul></div>')
    if summary.data_issues:
        items = "".join(f"<li>{e(i)}</li>" for i in summary.data_issues[:20])
        extra.append(f"<details><summary>{len(summary.data_issues)} data issue(s)</summary><ul>{items}</ul></details>")
    tail = run.files.errors_log_tail()
    if tail:
        extra.append(
            f"<details><summary>errors.log (last {len(tail)} lines)</summary><pre>{e(chr(10).join(tail))}</pre></details>"
        )
    return f'<section class="card" aria-label="Run {e(run.name)}"><h2>{e(run.name)}</h2>{state}<dl>{dl}</dl>{"".join(extra)}</section>'


def _dataset_spec(summary: RunSummary) -> str:
    return str(summary.config.get("dataset") or summary.dataset.get("spec") or "")


def _rows_section(snapshot: Snapshot) -> str:
    comparison = snapshot.comparison
    if not comparison.rows:
        return "<section><h2>Rows</h2><p>No predictions yet.</p></section>"
    headers, body, notes = rows_grid(comparison)
    refs = {r.name: r for r in snapshot.rows}
    cells = []
    for row, values in zip(comparison.rows, body):
        ref = refs[row.name]
        link = (
            f'<a href="{e(QuestionQuery(row=ref.short, result="wrong").url())}" '
            f'title="questions {e(row.name)} got wrong">{ref.short}</a>'
        )
        cells.append([f"{link} {e(values[0])}", *(e(v) for v in values[1:])])
    note = f'<p class="note">{e("; ".join(notes))}</p>' if notes else ""
    caption = (
        "Accuracy with its Wilson 95% interval over the scored questions; controls (never shown memory) are "
        "marked and listed beside the other rows. Each id links to the questions that row got wrong."
    )
    resources = _resources(snapshot)
    head = ["Id · Row", *(e(h) for h in headers[1:])]
    return f"<section><h2>Rows</h2>{table(head, cells, e(caption))}{note}{resources}</section>"


def _resources(snapshot: Snapshot) -> str:
    summaries = {run.name: run.summary for run in snapshot.runs}
    body = []
    for ref in snapshot.rows:
        row = summaries[ref.run].row(ref.backend, ref.reader)
        body.append(
            [
                e(f"{ref.short} {ref.name}"),
                f"{row.ingest_seconds:.1f}",
                f"{row.retrieve_seconds:.1f}",
                f"{row.answer_seconds:.1f}",
                "–" if row.retrieve_ms_p95 is None else f"{row.retrieve_ms_p95:.1f}",
                f"{row.prompt_tokens + row.ingest_prompt_tokens:,}",
                f"{row.completion_tokens + row.ingest_completion_tokens:,}",
                f"{row.cost_usd + row.ingest_cost_usd:.4f}",
                str(row.errors),
            ]
        )
    headers = [
        "Row",
        "Ingest s",
        "Retrieve s",
        "Answer s",
        "Retrieve ms p95",
        "Prompt tok",
        "Completion tok",
        "Cost USD",
        "Errors",
    ]
    return "<h3>Time, tokens and cost</h3>" + table(headers, body, "Reading and ingesting together (LLM tokens, USD).")


def _pairwise_section(snapshot: Snapshot) -> str:
    comparison = snapshot.comparison
    if len(comparison.rows) < 2:
        return ""
    headers, body = pairwise_grid(comparison)
    refs = {r.name: r for r in snapshot.rows}
    cells = []
    for a, row in zip(comparison.rows, body):
        line = [e(row[0])]
        for b, text in zip(comparison.rows, row[1:]):
            if text.startswith("+"):  # a tested pair: its discordant questions, each direction
                plus, _, rest = text.partition("/")
                minus, _, p_value = rest.partition(" ")
                mine, theirs = refs[a.name].short, refs[b.name].short
                right = e(QuestionQuery(row=mine, versus=theirs, result="right").url())
                wrong = e(QuestionQuery(row=mine, versus=theirs, result="wrong").url())
                line.append(
                    f'<a href="{right}" title="right in {mine}, wrong in {theirs}">{e(plus)}</a>/'
                    f'<a href="{wrong}" title="wrong in {mine}, right in {theirs}">{e(minus)}</a> {e(p_value)}'
                )
            else:
                line.append(e(text))
        cells.append(line)
    note = PAIRWISE_NOTE.format(method=CORRECTION_TEXT)
    refused: dict[str, int] = {}
    for pair in comparison.refused:
        refused[pair.reason] = refused.get(pair.reason, 0) + 1
    refused_html = "".join(f"<li>not paired ({n} pair(s)): {e(reason)}</li>" for reason, n in refused.items())
    link = f'<p><a href="{e(QuestionQuery(disagree=True).url())}">Questions the rows disagree on</a></p>'
    return (
        f"<section><h2>Paired tests between rows (McNemar, {e(comparison.correction)}-adjusted)</h2>"
        f"{table([e(h) for h in headers], cells, e(note))}"
        f"{f'<ul>{refused_html}</ul>' if refused_html else ''}{link}</section>"
    )


def _breakdowns(run: RunView, several: bool) -> str:
    summary = run.summary
    parts = []
    buckets = distance_labels(summary)
    if buckets:
        body = [
            [e(row_label(row)), *(_score_cell(row.per_distance.get(b)) for b in buckets)]
            for row in summary.rows
            if row.per_distance
        ]
        parts.append("<h3>By distance to the evidence (tokens)</h3>" + table([e(b) for b in ["Row", *buckets]], body))
    for name in breakdown_fields(summary):
        values = field_values(summary, name)
        rows = [r for r in summary.rows if name in r.per_field]
        body = [[e(value), *(_score_cell(r.per_field[name].get(value)) for r in rows)] for value in values]
        parts.append(f"<h3>By {e(name)}</h3>" + table([e(name), *(e(row_label(r)) for r in rows)], body))
    if not parts:
        return ""
    title = f"Breakdowns of {e(run.name)}" if several else "Breakdowns"
    return f"<section><h2>{title}</h2>{''.join(parts)}</section>"


def _score_cell(score: Score | None) -> str:
    if score is None or score.n == 0:
        return "–"
    return f"{e(pct_ci(score))} <small>(n={score.n})</small>"


def _png(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{e(alt)}"><figcaption>{e(alt)}</figcaption></figure>'


def _draw_plots(snapshot: Snapshot) -> str:
    figures = []
    with tempfile.TemporaryDirectory(prefix="memlab-ui-") as tmp:
        folder = Path(tmp)
        if len(snapshot.comparison.rows) > 0:
            try:
                path = plot_comparison(snapshot.comparison, folder / "tokens.png")
                figures.append(_png(path, "Accuracy (95% CI) against mean context tokens, one point per row"))
            except CompareError:
                pass  # nothing scored yet
        for i, run in enumerate(snapshot.runs):
            out = folder / f"run{i}"
            for path in plot_run(run.summary, out):
                what = path.stem.replace("_", " ")
                figures.append(_png(path, f"{run.name}: {what}"))
    if not figures:
        return ""
    return f'<section><h2>Plots</h2><div class="plots">{"".join(figures)}</div></section>'


# --------------------------------------------------------------------------- question list
def _mark(prediction: Prediction | None) -> tuple[str, str]:
    """(symbol, words) of a row's result on a question; words for screen readers and tooltips."""
    if prediction is None:
        return "·", "not answered"
    if prediction.error is not None:
        return "!", "error"
    if prediction.correct is None:
        return "?", "not scored"
    return ("✓", "right") if prediction.correct else ("✗", "wrong")


def _options(values: Sequence[tuple[str, str]], selected: str) -> str:
    return "".join(
        f'<option value="{e(v)}"{" selected" if v == selected else ""}>{e(label)}</option>' for v, label in values
    )


def _filter_form(snapshot: Snapshot, query: QuestionQuery) -> str:
    labels = type_labels(snapshot.question_types)
    types = [("", "any"), *((t, f"{labels[t]} ({t})" if labels[t] != t else t) for t in snapshot.question_types)]
    controls = [
        f'<label>Question type <select name="type">{_options(types, query.type)}</select></label>',
    ]
    for name, values in snapshot.fields.items():
        current = next((f for f in query.field if f.startswith(name + ":")), "")
        choices = [("", "any"), *((f"{name}:{v}", v) for v in values)]
        controls.append(f'<label>{e(name)} <select name="field">{_options(choices, current)}</select></label>')
    rows = [("", "any"), *((r.short, f"{r.short} {r.name}") for r in snapshot.rows)]
    controls.append(f'<label>Row <select name="row">{_options(rows, query.row)}</select></label>')
    results = [("", "any"), ("right", "right"), ("wrong", "wrong"), ("error", "error"), ("missing", "not answered")]
    controls.append(f'<label>Row was <select name="result">{_options(results, query.result)}</select></label>')
    others = [("", "–"), *((r.short, f"{r.short} {r.name}") for r in snapshot.rows)]
    controls.append(
        f'<label>Versus row (one right, other wrong) <select name="versus">{_options(others, query.versus)}</select></label>'
    )
    if snapshot.distance_buckets:
        buckets = [("", "any"), *((b, b) for b in snapshot.distance_buckets)]
        controls.append(
            f'<label>Distance to evidence <select name="distance">{_options(buckets, query.distance)}</select></label>'
        )
    checked = " checked" if query.disagree else ""
    controls.append(
        f'<label class="check"><input type="checkbox" name="disagree" value="1"{checked}> rows disagree</label>'
    )
    controls.append(f'<label>Id contains <input type="search" name="q" value="{e(query.q)}" size="12"></label>')
    controls.append(f'<label>Sort by <select name="sort">{_options(list(SORTS.items()), query.sort)}</select></label>')
    sizes = [(str(n), str(n)) for n in PAGE_SIZES]
    controls.append(f'<label>Per page <select name="per">{_options(sizes, str(query.per))}</select></label>')
    return (
        '<form class="filters" method="get" action="/questions" role="search" aria-label="Filter questions">'
        f'{"".join(controls)}<button type="submit">Apply</button> <a href="/questions">Reset</a></form>'
    )


def question_list(snapshot: Snapshot, query: QuestionQuery) -> str:
    entries, total = select(snapshot, query)
    pages = max(1, -(-total // query.per))
    legend = "".join(
        f"<li><strong>{r.short}</strong> {e(r.name)}{' (control)' if r.control else ''}</li>" for r in snapshot.rows
    )
    has_fields = bool(snapshot.fields)
    headers = [
        "Question",
        "Type",
        *(["Fields"] if has_fields else []),
        "Distance (tokens)",
        *(f'<abbr title="{e(r.name)}">{r.short}</abbr>' for r in snapshot.rows),
    ]
    body = []
    within = query.query_string(page=1)
    suffix = "?" + urlencode({"list": within}) if within else ""  # the question page steps through this list
    for entry in entries:
        link = f'<a href="{e(question_url(entry.question_id) + suffix)}">{e(entry.question_id)}</a>'
        fields = ", ".join(f"{e(k)}={e(v)}" for k, v in entry.fields.items())
        cells = [
            link,
            e(entry.question_type),
            *([fields] if has_fields else []),
            "–" if entry.distance_tokens is None else f"{entry.distance_tokens:,}",
        ]
        for ref in snapshot.rows:
            symbol, words = _mark(entry.cells.get(ref.name))
            cells.append(
                f'<span class="mark {words.replace(" ", "-")}" title="{ref.short}: {words}">{symbol}<span class="sr">{words}</span></span>'
            )
        body.append(cells)
    pager = _pager(query, pages)
    summary = f'<p role="status">{total:,} of {len(snapshot.questions):,} questions match; page {min(query.page, pages)} of {pages}.</p>'
    rows_table = table(headers, body, numeric_from=3 if has_fields else 2) if body else "<p>No question matches.</p>"
    return layout(
        "Questions",
        f'<h1>Questions</h1>{_filter_form(snapshot, query)}<details><summary>Rows</summary><ul class="legend">{legend}</ul></details>'
        f"{summary}{rows_table}{pager}",
        active="/questions",
        live=any(run.in_progress for run in snapshot.runs),
    )


def _pager(query: QuestionQuery, pages: int) -> str:
    links = []
    for label, page, rel in (
        ("« first", 1, ""),
        ("‹ previous", query.page - 1, "prev"),
        ("next ›", query.page + 1, "next"),
        ("last »", pages, ""),
    ):
        if 1 <= page <= pages and page != query.page:
            links.append(f'<a href="{e(query.url(page=page))}"{f" rel={rel}" if rel else ""}>{label}</a>')
        else:
            links.append(f'<span aria-disabled="true">{label}</span>')
    return f'<nav class="pager" aria-label="Pages of questions">{" ".join(links)}</nav>'


# --------------------------------------------------------------------------- question page
def question_url(question_id: str) -> str:
    return "/questions/" + quote(question_id, safe="")


def _stepper(snapshot: Snapshot, question_id: str, within: QuestionQuery | None) -> str:
    """Back to the list, and previous / next question in it (the list's filter rides along as ``list``)."""
    if within is None:
        within = QuestionQuery()
    previous, following, position, count = neighbours(snapshot, within, question_id)
    carried = within.query_string(page=1)
    suffix = "?" + urlencode({"list": carried}) if carried else ""
    back = within.url(page=1 + max(0, position - 1) // within.per)
    links = [f'<a href="{e(back)}">← the list</a>']
    if position:
        links.append(
            f'<a href="{e(question_url(previous) + suffix)}" rel="prev">‹ previous</a>'
            if previous
            else '<span aria-disabled="true">‹ previous</span>'
        )
        links.append(f"<span>{position:,} of {count:,} in the list</span>")
        links.append(
            f'<a href="{e(question_url(following) + suffix)}" rel="next">next ›</a>'
            if following
            else '<span aria-disabled="true">next ›</span>'
        )
    return f'<nav class="pager" aria-label="Questions in the list">{" ".join(links)}</nav>'


def question_page(
    snapshot: Snapshot,
    question_id: str,
    texts: DatasetTexts,
    wait_for_texts: float = 0.0,
    within: QuestionQuery | None = None,
) -> str | None:
    """The page of one question, or None when no run has it; ``within``: the list it was opened from."""
    entry = snapshot.questions.get(question_id)
    if entry is None:
        return None
    spec = next((_dataset_spec(run.summary) for run in snapshot.runs if run.name in entry.runs), "")
    if wait_for_texts:
        texts.wait(spec, wait_for_texts)
    else:
        texts.request(spec)
    question = texts.question(spec, question_id)
    history = texts.history(spec, entry.context_id)
    status = texts.status(spec)
    parts = [_stepper(snapshot, question_id, within), f"<h1>Question <code>{e(question_id)}</code></h1>"]
    facts = [
        ("Type", e(entry.question_type)),
        ("History", e(entry.context_id)),
        ("Distance to evidence", "–" if entry.distance_tokens is None else f"{entry.distance_tokens:,} tokens"),
        *((e(k), e(v)) for k, v in entry.fields.items()),
    ]
    if entry.topic:
        facts.append(("Topic", e(entry.topic)))
    if question is not None:
        facts.append(("Asked after message", f"#{question.end_index}"))
    parts.append('<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>")
    if question is not None:
        parts.append(f'<blockquote class="question">{e(question.text)}</blockquote>')
    elif status == "loading":
        parts.append('<p class="note" role="status">Loading the dataset for the question text… reload in a moment.</p>')
    else:
        parts.append(f'<p class="note">Question and turn texts: dataset {e(spec or "(not recorded)")} {e(status)}.</p>')
    shown_order = next((p.option_order for p in entry.cells.values() if p.option_order), None)
    options = list(question.options) if question is not None else list(shown_order or [])
    if question is not None and question.answer_text and not options:
        parts.append(f"<p><strong>Reference answer:</strong> {e(question.answer_text)}</p>")
    if options:
        items = "".join(
            f'<li class="{"correct" if i == entry.answer else ""}">{_lettered(i, text)}'
            + (' <strong class="badge">correct</strong>' if i == entry.answer else "")
            + "</li>"
            for i, text in enumerate(options)
        )
        parts.append(f'<h2>Options</h2><ol class="options">{items}</ol>')
    elif entry.answer is not None:
        parts.append(f"<p>Correct option: <strong>{_letter(entry.answer)}</strong></p>")
    parts.append(_picks(snapshot, entry))
    evidence = next((p.evidence_messages for p in entry.cells.values() if p.evidence_messages), [])
    asked_at = question.end_index if question is not None else None
    if evidence:
        parts.append("<h2>Evidence turns</h2>" + _turn_list(history, evidence, set(evidence), asked_at))
    parts.append("<h2>Retrieved context, per row</h2>")
    for ref in snapshot.rows:
        prediction = entry.cells.get(ref.name)
        if prediction is None:
            continue
        parts.append(_retrieved(ref, prediction, history, set(evidence), asked_at))
    return layout(f"Question {question_id}", "".join(parts), active="/questions")


def _lettered(index: int, text: str) -> str:
    """An option with its letter, unless its text starts with it already (PersonaMem writes "(a) ...")."""
    letter = f"({OPTION_LETTERS[index]})" if index < len(OPTION_LETTERS) else str(index)
    if text.lstrip().lower().startswith(letter):
        return e(text)
    return f'<span class="letter">{letter}</span> {e(text)}'


def _picks(snapshot: Snapshot, entry: QuestionEntry) -> str:
    width = max((len(p.scores) for p in entry.cells.values()), default=0)
    headers = [
        "Row",
        "Pick",
        "Result",
        *(f"Score ({OPTION_LETTERS[i]})" if i < 4 else f"Score {i}" for i in range(width)),
    ]
    headers += ["Context tokens", "Items", "Retrieve ms"]
    body = []
    for ref in snapshot.rows:
        p = entry.cells.get(ref.name)
        if p is None:
            continue
        symbol, words = _mark(p)
        scores = []
        for i in range(width):
            if i < len(p.scores):
                text = f"{p.scores[i]:.3f}"
                scores.append(f"<strong>{text}</strong>" if i == p.chosen else text)
            else:
                scores.append("–")
        result = f'<span class="mark {words.replace(" ", "-")}">{symbol}</span> {words}'
        if p.error:
            result += f"<br><small>{e(p.error)}</small>"
        pick = _letter(p.chosen) if p.predicted_text is None else e(p.predicted_text)
        body.append(
            [
                f"{ref.short} {e(ref.name)}",
                pick,
                result,
                *scores,
                f"{p.context_tokens:,}",
                str(p.retrieved_items),
                f"{1000 * p.retrieve_seconds:.1f}",
            ]
        )
    return "<h2>Each row's pick</h2>" + table(headers, body, "The chosen option's score in bold.", numeric_from=3)


def _turn_list(history: History | None, indexes: list[int], evidence: set[int], asked_at: int | None) -> str:
    items: list[tuple[bool, str]] = []
    shown = turns(history, indexes, asked_at or 0) if history is not None else []
    if shown:
        asked_session = history.session_number_of(asked_at) if history is not None and asked_at else None
        for turn in shown:
            is_evidence = turn.index in evidence
            where = f"#{turn.index} · session {turn.session} · {e(turn.role)}"
            if asked_at is not None:
                where += f" · {turn.back:,} messages back"
                if asked_session is not None:
                    sessions = asked_session - turn.session
                    where += (
                        " (this session)"
                        if sessions == 0
                        else f" ({sessions} session{'s' if sessions > 1 else ''} back)"
                    )
            badge = ' <strong class="badge">evidence</strong>' if is_evidence else ""
            text = turn.text if len(turn.text) <= TEXT_LIMIT else turn.text[:TEXT_LIMIT] + "…"
            items.append(
                (
                    is_evidence,
                    f'<li class="turn{" evidence" if is_evidence else ""}"><div class="where">{where}{badge}</div>'
                    f'<div class="text">{e(text)}</div></li>',
                )
            )
    else:
        for index in indexes:
            badge = ' <strong class="badge">evidence</strong>' if index in evidence else ""
            items.append(
                (
                    index in evidence,
                    f'<li class="turn{" evidence" if index in evidence else ""}"><div class="where">message #{index}{badge}</div></li>',
                )
            )
    head = "".join(html for _, html in items[:TURNS_SHOWN])
    rest = items[TURNS_SHOWN:]
    if not rest:
        return f'<ol class="turns">{head}</ol>'
    found = sum(1 for is_evidence, _ in rest if is_evidence)
    label = f"{len(rest)} more turn(s)" + (f", {found} of them evidence" if found else "")
    more = "".join(html for _, html in rest)
    return (
        f'<ol class="turns">{head}</ol><details class="more"><summary>{label}</summary>'
        f'<ol class="turns" start="{TURNS_SHOWN + 1}">{more}</ol></details>'
    )


def _retrieved(
    ref: RowRef, prediction: Prediction, history: History | None, evidence: set[int], asked_at: int | None
) -> str:
    indexes = prediction.retrieved_messages
    head = f"{ref.short} {e(ref.name)}"
    if ref.control or indexes is None and prediction.retrieved_items == 0:
        body = "<p>Shown no memory.</p>" if ref.control else "<p>Nothing retrieved.</p>"
    elif indexes is None:
        body = (
            f"<p>{prediction.retrieved_items} item(s) that cannot be traced to history turns (e.g. extracted facts); "
            "the result files do not hold their text.</p>"
        )
    elif not indexes:
        body = "<p>Nothing retrieved.</p>"
    else:
        found = len(evidence & set(indexes))
        recall = f"; {found} of {len(evidence)} evidence turns among them" if evidence else ""
        body = f"<p>{len(indexes)} turn(s), in the row's rank order{recall}.</p>" + _turn_list(
            history, indexes, evidence, asked_at
        )
    return f'<details class="retrieved" open><summary>{head}</summary>{body}</details>'


def not_found(what: str) -> str:
    return layout(
        "Not found",
        f'<h1>Not found</h1><p>{e(what)}</p><p><a href="/">Runs</a> · <a href="/questions">Questions</a></p>',
    )


def bad_request(message: str) -> str:
    return layout(
        "Bad request",
        f'<h1>Bad request</h1><p role="alert">{e(message)}</p><p><a href="/questions">Reset the filters</a></p>',
    )


__all__ = ["FrontPage", "bad_request", "layout", "not_found", "question_list", "question_page"]
