"""``memlab demo``: every offline backend on the calibrated synthetic data, and what the table shows.

The run is an ordinary ``memlab run`` (results, report and plots in the run directory). After the
table come three lines computed from the result numbers - which design wins which question types,
how far memory lifts the reader above the blind controls, and how close mem0 without an LLM is to
plain rag - and the paths of the plots. Library chatter (mem0's spaCy and FAISS notices,
FutureWarnings, ...) goes to ``<out>/demo.log`` through logging and warnings capture, so it is
kept but stays out of the output.
"""

from __future__ import annotations

import logging
import shutil
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from memlab.datasets.question_types import SHORT_NAMES
from memlab.results import RowSummary, RunSummary

if TYPE_CHECKING:
    from memlab.run.spec import RunConfig

# Every backend that runs offline on the embedded defaults (no model download, no LLM).
DEMO_BACKENDS = ("full_context", "rag", "profile", "mem0")
# 10 personas x 24 questions: 240 questions, enough for the paired tests to separate memory from
# the blind controls overall and on the types where memory matters: about 250 s of CPU from a cold cache
# (two to three minutes on 2 quiet cores, far more when they are shared; README).
DEMO_DATASET = "synthetic:personas=10,seed=7"

# What each design keeps, to say *why* it wins the types it wins (the wins themselves are measured).
DESIGNS = {
    "full_context": "reads every turn",
    "rag": "finds the turns most like the question",
    "profile": "keeps each aspect's current stance and its history",
    "mem0": "finds remembered messages like the question",
}


@contextmanager
def library_output_to(log_path: Path) -> Iterator[None]:
    """Send every log record and warning to ``log_path`` (not to the terminal) while the block runs."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    _redirect_library_handlers()
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # every warning once per place, into the log
            yield
    finally:
        logging.captureWarnings(False)
        root.handlers, root.level = saved_handlers, saved_level
        for logger, handlers, propagate in reversed(_REDIRECTED):
            logger.handlers, logger.propagate = handlers, propagate
        _REDIRECTED.clear()
        handler.close()


# Loggers whose own handlers were taken away while the demo runs: (logger, handlers, propagate).
_REDIRECTED: list[tuple[logging.Logger, list[logging.Handler], bool]] = []


def _redirect_library_handlers() -> None:
    """Libraries that attach their own stderr handlers (mem0, faiss) log through the root's file
    handler instead; what was changed is remembered so that it is restored afterwards."""
    for logger in [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]:
        if isinstance(logger, logging.Logger) and logger.handlers:
            _REDIRECTED.append((logger, logger.handlers[:], logger.propagate))
            logger.handlers = []
            logger.propagate = True


def _label(qtype: str) -> str:
    return SHORT_NAMES.get(qtype, qtype)


def _accuracy(row: RowSummary) -> float:
    return row.accuracy.accuracy if row.accuracy is not None else 0.0


def _design(row: RowSummary) -> str:
    return row.backend.split()[0].split("[")[0]


def _blind(summary: RunSummary) -> RowSummary | None:
    """The stronger blind control overall (the bar every memory row must clear)."""
    controls = [r for r in summary.rows if r.control and r.accuracy is not None]
    return max(controls, key=_accuracy, default=None)


def explain(summary: RunSummary) -> list[str]:
    """Three short lines saying what the table shows, computed from its numbers."""
    memory_rows = [r for r in summary.rows if not r.control and r.accuracy is not None]
    blind = _blind(summary)
    if not memory_rows or blind is None:
        return ["(no memory rows and controls to compare)"]
    lines = []
    # 1. Which design wins which question types (only a lead over every blind control counts).
    types = sorted({t for r in memory_rows for t in r.per_type})
    controls = [r for r in summary.rows if r.control]
    wins: dict[tuple[str, ...], list[str]] = {}
    none_better: list[str] = []
    for qtype in types:
        scored = [r for r in memory_rows if qtype in r.per_type]
        top = max(r.per_type[qtype].accuracy for r in scored)
        bar = max((c.per_type[qtype].accuracy for c in controls if qtype in c.per_type), default=0.0)
        if top > bar:
            tied = tuple(r.backend for r in scored if r.per_type[qtype].accuracy == top)  # ties are shared
            wins.setdefault(tied, []).append(f"{_label(qtype)} {top:.0%}")
        else:
            none_better.append(_label(qtype))
    by_name = {r.backend: r for r in memory_rows}
    parts = []
    for tied, won in wins.items():
        if len(tied) == 1:
            parts.append(f"{tied[0]} - {', '.join(won)} ({DESIGNS.get(_design(by_name[tied[0]]), 'its design')})")
        else:
            parts.append(f"tied {'/'.join(tied)} - {', '.join(won)}")
    if none_better:
        parts.append(f"no design beats the blind controls on {', '.join(none_better)}")
    lines.append("Best per type: " + "; ".join(parts) + ".")
    # 2. How far memory lifts the same reader above the blind controls, with the paired test.
    best = max(memory_rows, key=_accuracy)
    versus = next((c for c in best.vs_controls if c.control == f"{blind.backend} / {blind.reader}"), None)
    test = f", McNemar p={versus.p_value:.2g} on {versus.n} paired questions" if versus else ""
    below = [r.backend for r in memory_rows if _accuracy(r) < _accuracy(blind)]
    lines.append(
        f"Memory helps: {best.backend} scores {_accuracy(best):.0%} against {_accuracy(blind):.0%} for the best "
        f"blind control ({blind.backend} / {blind.reader}){test}; "
        + (f"{', '.join(below)} fall below it." if below else "every memory backend beats it.")
    )
    # 3. mem0 without an LLM is a plain retriever: measured against rag.
    mem0 = next((r for r in memory_rows if _design(r) == "mem0"), None)
    rag = next((r for r in memory_rows if r.backend == "rag"), None)
    if mem0 is not None and rag is not None:
        mine, theirs = _accuracy(mem0), _accuracy(rag)
        if "no llm" in mem0.backend.lower() or abs(mine - theirs) <= 0.02:
            lines.append(
                f"{mem0.backend} is a plain retriever here (no LLM extracts facts): one memory per message, found by "
                f"similarity like rag, so it scores {mine:.0%} against rag's {theirs:.0%}."
            )
        else:
            lines.append(f"{mem0.backend} scores {mine:.0%} against rag's {theirs:.0%}.")
    return lines


def run_demo(dataset: str | None, out: Path, *, progress: bool = True) -> int:
    from memlab.run.driver import SettingsChangedError
    from memlab.run.spec import BackendSpec, RunConfig

    out = Path(out)
    config = RunConfig(
        dataset=dataset or DEMO_DATASET,
        backends=[BackendSpec(name=name) for name in DEMO_BACKENDS],
        out=out,
        progress=progress,
    )
    try:
        return _run_and_explain(config, out)
    except SettingsChangedError:
        # The demo owns its folder: answers made by another memlab version (other reader or backend
        # settings) cannot be resumed, so they are kept aside and the demo starts afresh.
        previous = out.with_name(out.name + ".previous")
        shutil.rmtree(previous, ignore_errors=True)
        out.rename(previous)
        print(
            f"memlab demo: {out} held a demo made with other settings (another memlab version); "
            f"moved it to {previous}, starting afresh",
            file=sys.stderr,
        )
        return _run_and_explain(config, out)


def _run_and_explain(config: RunConfig, out: Path) -> int:
    from memlab import report
    from memlab.run.driver import run_with_details

    log_path = out / "demo.log"
    print(
        f"memlab demo: {config.dataset}, backends {', '.join(DEMO_BACKENDS)} (+ blind controls), offline; "
        f"library messages go to {log_path}",
        file=sys.stderr,
    )
    with library_output_to(log_path):
        from memlab.registry import backends

        for name in DEMO_BACKENDS:  # imported first, so handlers they attach on import are redirected too
            backends.get(name)
        _redirect_library_handlers()
        result = run_with_details(config)
        summary = report.load_run(out)
        plots = report.write_report(out)
    blocks = (
        report.terminal_table(summary),
        report.paired_table(summary),
        report.failed_jobs_text(summary, details_in=log_path),
    )
    print("\n\n".join(block for block in blocks if block))
    print()
    for line in explain(summary):
        print(line)
    pictures = sorted(str(p) for p in plots.parent.glob("*.png"))
    print(f"Report: {plots}" + (f"; plots: {', '.join(pictures)}" if pictures else ""))
    return 1 if result.failed else 0  # a demo with a failed job is not a green demo
