"""The measured tables of README.md and docs/*.md, generated from result files kept in the repository.

Each measured table sits between two markers naming its source and its kind::

    <!-- memlab:table docs/results/pm128k-embedding accuracy -->
    | ... generated ... |
    <!-- memlab:end -->

The source of a run's table is a folder under the repository holding the run's ``summary.json``
(and, for the ``pairwise`` kind, the ``comparison.json`` that ``memlab compare RUN --out FILE.json``
writes); the source of a benchmark script's table is the result file its ``--json FILE`` wrote
(``benchmarks/result_files.py``).
``python benchmarks/doc_tables.py`` rewrites every block from its source; ``--check`` changes
nothing and exits 1 naming each block whose text differs from what its source gives
(tests/test_doc_tables.py runs the check, so an edited number fails the tests).

To refresh a table: rerun the command noted above it, copy the run's ``summary.json`` (and
``memlab compare RUN --out docs/results/NAME/comparison.json``) into ``docs/results/NAME/`` (a
script's ``--json`` names its file itself), then run this script.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:  # as when run as a script (tests load it by path)
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from result_files import (  # noqa: E402
    ExecutorsResult,
    ExtractorResult,
    LocalLLMResult,
    ResultFile,
    RetrieveScalingResult,
    ScaleResult,
    ServiceResult,
    SweepResult,
    SystemsCostResult,
)

from memlab.report.compare import Comparison, pairwise_grid  # noqa: E402
from memlab.report.tables import (  # noqa: E402
    _md,
    markdown_table,
    metrics_table,
    pct,
    pct_ci,
    question_types,
    resources_table,
    type_labels,
)
from memlab.results import RowSummary, RunSummary  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", "docs")
BLOCK = re.compile(
    r"(?P<open><!-- memlab:table (?P<source>\S+) (?P<kind>[\w-]+) -->\n)(?P<body>.*?)(?P<close><!-- memlab:end -->)",
    re.DOTALL,
)


def _name(row: RowSummary) -> str:
    """The backend as the docs name it: a reader other than the run's embedding reader is said."""
    control = " (control)" if row.control else ""
    if row.reader.startswith("longest_option"):
        return f"{row.backend} + longest option{control}"
    return f"{row.backend}{control}"


def _rows(summary: RunSummary) -> list[RowSummary]:
    return [r for r in summary.rows if not r.control] + [r for r in summary.rows if r.control]


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def personamem_types(summary: RunSummary, root: Path) -> str:
    """Accuracy overall and per question type, one row per backend."""
    types = question_types(summary)
    labels = type_labels(types)
    headers = ["backend", "overall", *(labels[t] for t in types)]
    body = [[_name(r), pct(r.accuracy), *(pct(r.per_type.get(t)) for t in types)] for r in _rows(summary)]
    return _md(headers, body, set(range(1, len(headers))))


def accuracy(summary: RunSummary, root: Path) -> str:
    """Accuracy with its interval, context tokens, retrieve latency, and the paired test against the
    longest-option control."""
    headers = [
        "backend",
        "accuracy % [95% CI]",
        "mean context tokens",
        "retrieve ms p50 / p95",
        "vs longest option: wins / losses, McNemar p",
    ]
    body = []
    for row in _rows(summary):
        versus = next((c for c in row.vs_controls if c.control.endswith("/ longest_option")), None)
        paired = "–" if versus is None else f"{versus.wins} / {versus.losses}, p = {versus.p_value:.2g}"
        latency = "–" if row.retrieve_ms_p50 is None else f"{_ms(row.retrieve_ms_p50)} / {_ms(row.retrieve_ms_p95)}"
        body.append([_name(row), pct_ci(row.accuracy), f"{row.mean_context_tokens:,.0f}", latency, paired])
    return _md(headers, body, {2, 3})


def retrieval(summary: RunSummary, root: Path) -> str:
    """LoCoMo: LLM-free retrieval scores per backend, and whether F1 applies to the reader."""
    names = ["recall@5", "recall@10", "mrr"]
    headers = ["backend", "reader", *names, "F1 (no adversarial)", "questions"]
    body = []
    for row in _rows(summary):
        if row.reader.startswith("longest_option"):
            continue
        f1 = row.metrics.get("f1_no_adversarial")
        f1_cell = f"{f1:.3f}" if f1 is not None else ("n/a (no written answers)" if row.open_questions else "–")
        cells = [f"{row.metrics[m]:.3f}" if m in row.metrics else "–" for m in names]
        body.append([_name(row), row.reader, *cells, f1_cell, str(row.questions)])
    return _md(headers, body, {2, 3, 4, 6})


def pairwise(summary: RunSummary, root: Path) -> str:
    """The matrix of paired tests between every two rows (memlab compare's comparison.json)."""
    comparison = Comparison.model_validate_json((root / "comparison.json").read_text(encoding="utf-8"))
    headers, body = pairwise_grid(comparison)
    return _md(headers, body, set())


@dataclass(frozen=True)
class Kind:
    """How a kind of table reads its source (a run folder or a result file) and renders it."""

    render: Callable[[Any, Path], str]
    load: Callable[[Path], Any] = RunSummary.load


def result_table(result_type: type[ResultFile]) -> Kind:
    """The table a script's result file draws of itself (its ``markdown``)."""
    return Kind(lambda result, _: result.markdown(), result_type.load)


KINDS: dict[str, Kind] = {
    # a run's summary.json
    "personamem-types": Kind(personamem_types),
    "accuracy": Kind(accuracy),
    "retrieval": Kind(retrieval),
    "pairwise": Kind(pairwise),
    "summary": Kind(lambda summary, _: markdown_table(summary)),  # the table memlab run prints and reports
    "metrics": Kind(lambda summary, _: metrics_table(summary, per_type=False)),
    "resources": Kind(lambda summary, _: resources_table(summary)),
    # a benchmark script's --json result file
    "sweep": result_table(SweepResult),
    "sweep-blind": Kind(lambda result, _: result.markdown(blind_only=True), SweepResult.load),
    "sweep-checks": Kind(lambda result, _: result.checks_markdown(), SweepResult.load),
    "systems-cost": result_table(SystemsCostResult),
    "v2-scale": result_table(ScaleResult),
    "local-llm": result_table(LocalLLMResult),
    "service": result_table(ServiceResult),
    "extractor": result_table(ExtractorResult),
    "retrieve-scaling": result_table(RetrieveScalingResult),
    "executors": result_table(ExecutorsResult),
}


class TableSourceError(ValueError):
    pass


def render_block(source: str, kind: str, repo: Path = ROOT) -> str:
    if kind not in KINDS:
        raise TableSourceError(f"unknown table kind {kind!r} (known: {', '.join(KINDS)})")
    path = repo / source
    try:
        loaded = KINDS[kind].load(path)
    except Exception as exc:  # noqa: BLE001 - named in one line for the docs' author
        raise TableSourceError(f"{source}: {exc}") from exc
    return KINDS[kind].render(loaded, path).rstrip("\n") + "\n"


def documents(repo: Path = ROOT) -> list[Path]:
    out: list[Path] = []
    for name in DOCUMENTS:
        path = repo / name
        out += sorted(path.glob("*.md")) if path.is_dir() else [path] if path.exists() else []
    return out


def regenerate(text: str, repo: Path = ROOT) -> tuple[str, list[str]]:
    """``text`` with every block regenerated, and the blocks (source kind) that changed."""
    changed: list[str] = []

    def replace(match: re.Match[str]) -> str:
        body = render_block(match["source"], match["kind"], repo)
        if body != match["body"]:
            changed.append(f"{match['source']} {match['kind']}")
        return match["open"] + body + match["close"]

    return BLOCK.sub(replace, text), changed


def check(repo: Path = ROOT, files: list[Path] | None = None) -> list[str]:
    """'file: block' for every generated table that differs from its source."""
    problems = []
    for path in files if files is not None else documents(repo):
        _, changed = regenerate(path.read_text(encoding="utf-8"), repo)
        problems += [f"{path.relative_to(repo) if path.is_relative_to(repo) else path}: {c}" for c in changed]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a table differs from its source"
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for problem in problems:
            print(f"out of date: {problem}", file=sys.stderr)
        if problems:
            print("run: python benchmarks/doc_tables.py", file=sys.stderr)
        return 1 if problems else 0
    for path in documents():
        text = path.read_text(encoding="utf-8")
        new, changed = regenerate(text)
        if changed:
            path.write_text(new, encoding="utf-8")
            print(f"{path.relative_to(ROOT)}: regenerated {', '.join(changed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
