"""The runs ``memlab ui`` shows, kept in memory and indexed by question, re-read when their files change.

Each run directory is watched through the (mtime, size) of its result files: ``summary.json``,
``predictions.jsonl`` and ``errors.log``. A request first calls ``RunIndex.refresh``: a few ``stat``
calls when nothing changed. When ``predictions.jsonl`` grew (a run in progress appends to it) only
the new complete lines are parsed; when it shrank or was replaced (``memlab repair-predictions``)
it is read again from the start. The summary, the comparison (``memlab compare``'s, McNemar with
Holm's correction) and the question index are then rebuilt from the predictions in memory, so a
reload after new predictions costs one pass over them, and a reload without changes costs nothing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from memlab.report.compare import Comparison, LoadedRun, compare_loaded, row_name, run_names
from memlab.report.loading import ReportError, load_run
from memlab.report.tables import question_types
from memlab.results import (
    DISTANCE_BUCKETS,
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    Prediction,
    RunSummary,
    _parse_lines,
    _torn_tail,
    distance_bucket,
)

log = logging.getLogger("memlab.ui")
ERRORS_FILE = "errors.log"  # memlab.run.driver.ERRORS_FILE (not imported: that pulls in the runner)
TAIL_CHECK_BYTES = 4096
Stamp = tuple[int, int] | None  # (mtime_ns, size) of a file, None when absent


def _stamp(path: Path) -> Stamp:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


class RunFiles:
    """One run directory's predictions, read incrementally (a run in progress appends to them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.predictions: dict[tuple[str, str, str], Prediction] = {}  # the last line of a key wins
        self.bad_lines: list[str] = []  # unreadable lines: shown on the page, never fatal
        self.arrivals: list[Prediction] = []  # every parsed line in file order (the index takes them in turn)
        self.generation = 0  # bumped when the file is read again from the start
        self._offset = 0  # bytes of predictions.jsonl parsed so far (complete lines only)
        self._lines_before = 0  # lines in those bytes: numbers in messages about bad lines
        self._inode: int | None = None
        self._seen_tail = b""  # the last bytes parsed: a rewrite in place changes them
        self.stamps: tuple[Stamp, Stamp, Stamp] = (None, None, None)
        self.last_change = 0.0

    def refresh(self) -> bool:
        """Catch up with the files; True when anything changed since the last call."""
        stamps = (
            _stamp(self.path / SUMMARY_FILE),
            _stamp(self.path / PREDICTIONS_FILE),
            _stamp(self.path / ERRORS_FILE),
        )
        if stamps == self.stamps:
            return False
        self.stamps = stamps
        self.last_change = time.time()
        self._read_new_predictions()
        return True

    def _read_new_predictions(self) -> None:
        path = self.path / PREDICTIONS_FILE
        try:
            with path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                if stat.st_ino != self._inode or stat.st_size < self._offset:  # replaced or truncated
                    self._start_over(stat.st_ino)
                # Appending keeps what was read; a file rewritten in place does not: its bytes before
                # the offset no longer match the ones read last time, so it is read again.
                handle.seek(self._offset - len(self._seen_tail))
                if handle.read(len(self._seen_tail)) != self._seen_tail:
                    self._start_over(stat.st_ino)
                    handle.seek(0)
                data = handle.read()
        except FileNotFoundError:
            self._start_over(None)
            return
        except OSError as exc:
            raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        complete, _torn = _torn_tail(data)  # a line still being written waits for the next refresh
        for number, _raw, parsed in _parse_lines(path, complete):
            if isinstance(parsed, str):
                self.bad_lines.append(f"{path}, line {self._lines_before + number}: {parsed}")
            else:
                self.predictions[parsed.key] = parsed
                self.arrivals.append(parsed)
        self._offset += len(complete)
        self._lines_before += complete.count(b"\n")
        if complete:
            self._seen_tail = (self._seen_tail + complete)[-TAIL_CHECK_BYTES:]

    def _start_over(self, inode: int | None) -> None:
        self.predictions, self.bad_lines, self._offset, self._lines_before, self._inode = {}, [], 0, 0, inode
        self._seen_tail = b""
        self.arrivals = []
        self.generation += 1

    def errors_log_tail(self, lines: int = 40) -> list[str]:
        """The last lines of ``errors.log`` (at most 64 KiB of it is read)."""
        path = self.path / ERRORS_FILE
        try:
            with path.open("rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - 65_536))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]


@dataclass
class RowRef:
    """A row of the comparison, with where its predictions come from."""

    name: str  # the comparison's name: [run:]backend/reader
    short: str  # R1, R2, ... (the matrix's ids)
    run: str
    backend: str
    reader: str
    control: bool


@dataclass
class QuestionEntry:
    """One question and each row's prediction for it."""

    question_id: str
    question_type: str
    context_id: str
    topic: str
    answer: int | None
    distance_tokens: int | None
    distance_bucket: str | None
    fields: dict[str, str]
    cells: dict[str, Prediction] = field(default_factory=dict)  # row name -> prediction
    runs: set[str] = field(default_factory=set)  # names of the runs that asked it
    # Derived from the cells once per snapshot (``settle``), so filtering 5,000 questions stays cheap.
    disagree: bool = False  # rows that scored it differ in right/wrong, or picked different options
    right: int = 0  # rows that got it right
    results: dict[str, str] = field(default_factory=dict)  # row name -> right / wrong / error / unscored

    def settle(self) -> None:
        self.results = {name: result_of(p) for name, p in self.cells.items()}
        answered = [p for p in self.cells.values() if p.error is None]
        scored = {p.correct for p in answered if p.correct is not None}
        chosen = {p.chosen for p in answered if p.chosen is not None}
        self.disagree = len(scored) > 1 or len(chosen) > 1
        self.right = sum(1 for r in self.results.values() if r == "right")


def result_of(prediction: Prediction) -> str:
    if prediction.error is not None:
        return "error"
    if prediction.correct is None:
        return "unscored"
    return "right" if prediction.correct else "wrong"


@dataclass
class RunView:
    """What the pages show of one run."""

    path: Path
    name: str
    summary: RunSummary
    files: RunFiles
    in_progress: bool
    predictions: int


@dataclass
class Analysis:
    """The summaries and the comparison of the runs: the costly part (a pass over every prediction),
    recomputed when a summary changes, and while a run writes at most every ``analysis_interval`` s."""

    summaries: list[RunSummary]
    names: list[str]  # each run's name in the comparison
    comparison: Comparison
    rows: list[RowRef]
    cell_names: list[dict[tuple[str, str], str]]  # per run: (backend, reader) -> row name
    built: float
    version: int
    behind: bool = False  # predictions arrived since it was computed


@dataclass
class Snapshot:
    """Everything the pages show at one moment; replaced whole (never changed) when a file changes."""

    runs: list[RunView]
    analysis: Analysis
    questions: dict[str, QuestionEntry]
    order: list[str]  # question ids in first-seen order (history order of the runs)
    question_types: list[str]
    fields: dict[str, list[str]]  # field name -> values seen
    distance_buckets: list[str]
    version: int

    @property
    def comparison(self) -> Comparison:
        return self.analysis.comparison

    @property
    def rows(self) -> list[RowRef]:
        return self.analysis.rows

    def row(self, name: str) -> RowRef | None:
        return next((r for r in self.rows if r.name == name or r.short == name), None)


ANALYSIS_INTERVAL = 5.0  # seconds between recomputations of the rows while a run writes


class RunIndex:
    """The run directories given to ``memlab ui``; ``snapshot()`` is always current with their files.

    New predictions go into the question index on the request that sees them (only the new ones are
    touched). The rows' summaries and the paired tests (a pass over every prediction: seconds at
    50,000) are recomputed in a background thread when a summary changes, and while a run writes at
    most every ``analysis_interval`` seconds; requests never wait for them, except the first."""

    def __init__(self, run_dirs: Sequence[str | Path], analysis_interval: float = ANALYSIS_INTERVAL) -> None:
        if not run_dirs:
            raise ReportError("memlab ui needs at least one run directory")
        self.files = []
        for run_dir in run_dirs:
            path = Path(run_dir)
            if not path.is_dir():
                raise ReportError(f"{run_dir}: not a directory")
            if not (path / SUMMARY_FILE).is_file() and not (path / PREDICTIONS_FILE).is_file():
                raise ReportError(f"{run_dir}: no {SUMMARY_FILE} or {PREDICTIONS_FILE}; is this a run directory?")
            self.files.append(RunFiles(path))
        self.analysis_interval = analysis_interval
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._consumed = [0] * len(self.files)  # arrivals of each file already in the snapshot's index
        self._generations = [-1] * len(self.files)
        self._summary_stamps: list[Stamp] = [None] * len(self.files)
        self._worker: threading.Thread | None = None
        self._version = 0
        self._analysis_version = 0

    def snapshot(self) -> Snapshot:
        """The current state of the runs (a few stats when no file changed since the last call)."""
        with self._lock:
            changed = any([f.refresh() for f in self.files])
            rewritten = [f.generation for f in self.files] != self._generations
            if self._snapshot is None or rewritten:  # first look, or a file read again: index it all now
                cut, generations, copies = self._cut()
                self._install(self._full(self._analyse(copies), copies), cut, generations)
            elif changed:
                self._version += 1
                self._snapshot = self._incremental(self._snapshot)
            snapshot = self._snapshot
            assert snapshot is not None
            summaries_changed = [f.stamps[0] for f in self.files] != self._summary_stamps
            if summaries_changed:
                snapshot.analysis.behind = True
            due = time.time() - snapshot.analysis.built >= self.analysis_interval
            if (summaries_changed or (snapshot.analysis.behind and due)) and not self.recomputing():
                self._worker = threading.Thread(target=self._reanalyse, name="memlab-ui-analysis", daemon=True)
                self._worker.start()
            return snapshot

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Wait for a recomputation in progress (tests and scripts that need the rows current)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def recomputing(self) -> bool:
        """Whether the rows are being recomputed in the background now."""
        return self._worker is not None and self._worker.is_alive()

    def _cut(self) -> tuple[list[int], list[int], list[list[Prediction]]]:
        """Under the lock: how far each file's arrivals go now, and a copy of them."""
        cut = [len(f.arrivals) for f in self.files]
        return cut, [f.generation for f in self.files], [f.arrivals[:n] for f, n in zip(self.files, cut)]

    def _install(self, full: Snapshot, cut: list[int], generations: list[int]) -> None:
        """Under the lock: make ``full`` (built from arrivals up to ``cut``) current, with what came since."""
        self._consumed = list(cut)
        self._generations = list(generations)
        self._version += 1
        self._snapshot = self._incremental(full)
        self._snapshot.analysis.behind = any(len(f.arrivals) > n for f, n in zip(self.files, cut))

    def _reanalyse(self) -> None:
        with self._lock:
            cut, generations, copies = self._cut()
        try:
            full = self._full(self._analyse(copies), copies)  # outside the lock: requests go on meanwhile
        except Exception:  # noqa: BLE001 - the pages keep the last analysis; the log has the reason
            log.exception("recomputing the rows failed")
            return
        with self._lock:
            if [f.generation for f in self.files] == generations:  # else a file was re-read: the next look redoes it
                self._install(full, cut, generations)

    # ------------------------------------------------------------------ the costly part
    def _analyse(self, arrivals: list[list[Prediction]]) -> Analysis:
        loaded: list[LoadedRun] = []
        stamps = [f.stamps[0] for f in self.files]
        for files, lines in zip(self.files, arrivals):
            predictions = list({p.key: p for p in lines}.values())  # the last line of a key wins
            loaded.append(LoadedRun(files.path, load_run(files.path, predictions), predictions))
        names = run_names(loaded)
        comparison = compare_loaded(loaded)
        short = {row.name: f"R{i + 1}" for i, row in enumerate(comparison.rows)}
        rows = [RowRef(r.name, short[r.name], r.run, r.backend, r.reader, r.control) for r in comparison.rows]
        several = len(loaded) > 1
        cell_names = [
            {(r.backend, r.reader): row_name(name, r, several) for r in run.summary.rows}
            for run, name in zip(loaded, names)
        ]
        self._summary_stamps = stamps
        self._analysis_version += 1
        return Analysis(
            summaries=[run.summary for run in loaded],
            names=names,
            comparison=comparison,
            rows=rows,
            cell_names=cell_names,
            built=time.time(),
            version=self._analysis_version,
        )

    # ------------------------------------------------------------------ the question index
    def _views(self, analysis: Analysis) -> list[RunView]:
        views = []
        for files, summary, name in zip(self.files, analysis.summaries, analysis.names):
            summary_stamp, predictions_stamp, _ = files.stamps
            # No summary yet, or one older than the predictions: the run is still writing (or was killed).
            in_progress = summary_stamp is None or (
                predictions_stamp is not None and summary_stamp[0] < predictions_stamp[0]
            )
            views.append(RunView(files.path, name, summary, files, in_progress, len(files.predictions)))
        return views

    def _wanted(self, analysis: Analysis, run: int, prediction: Prediction) -> str | None:
        """The row name a prediction belongs to, or None when it is not of the summary's run config."""
        fingerprints = analysis.summaries[run].row_fingerprints
        if fingerprints and fingerprints.get("|".join(prediction.row)) != prediction.fingerprint:
            return None
        return analysis.cell_names[run].get(prediction.row)

    def _full(self, analysis: Analysis, arrivals: list[list[Prediction]]) -> Snapshot:
        questions: dict[str, QuestionEntry] = {}
        for run, lines in enumerate(arrivals):
            for prediction in lines:  # in file order: a later line of a key replaces the earlier one
                _add(questions, prediction, self._wanted(analysis, run, prediction), analysis.names[run])
        for entry in questions.values():
            entry.settle()
        return self._snapshot_of(analysis, questions, list(questions))

    def _incremental(self, old: Snapshot) -> Snapshot:
        """Under the lock: ``old`` with the arrivals it has not seen; the analysis is kept (and marked behind)."""
        analysis = old.analysis
        questions = dict(old.questions)
        order = list(old.order)
        touched: dict[str, QuestionEntry] = {}
        for run, files in enumerate(self.files):
            fresh = files.arrivals[self._consumed[run] :]
            self._consumed[run] = len(files.arrivals)
            if fresh:
                analysis.behind = True
            for prediction in fresh:
                cell = self._wanted(analysis, run, prediction)
                if cell is None:
                    continue
                qid = prediction.question_id
                if qid not in touched:  # a copy: pages still reading the old snapshot see it unchanged
                    before = questions.get(qid)
                    if before is None:
                        order.append(qid)
                    else:
                        questions[qid] = replace(before, cells=dict(before.cells), runs=set(before.runs))
                _add(questions, prediction, cell, analysis.names[run])
                touched[qid] = questions[qid]
        for entry in touched.values():
            entry.settle()
        return self._snapshot_of(analysis, questions, order)

    def _snapshot_of(self, analysis: Analysis, questions: dict[str, QuestionEntry], order: list[str]) -> Snapshot:
        fields: dict[str, dict[str, None]] = {}
        for entry in questions.values():
            for key, value in entry.fields.items():
                fields.setdefault(key, {})[value] = None
        types = question_types(RunSummary(rows=[row for summary in analysis.summaries for row in summary.rows]))
        types += sorted({e.question_type for e in questions.values()} - set(types))
        buckets = sorted({e.distance_bucket for e in questions.values() if e.distance_bucket}, key=_bucket_rank)
        return Snapshot(
            runs=self._views(analysis),
            analysis=analysis,
            questions=questions,
            order=order,
            question_types=types,
            fields={k: sorted(v, key=_natural) for k, v in sorted(fields.items())},
            distance_buckets=buckets,
            version=self._version,
        )


def _add(questions: dict[str, QuestionEntry], prediction: Prediction, cell: str | None, run: str) -> None:
    if cell is None:
        return
    entry = questions.get(prediction.question_id)
    if entry is None:
        entry = questions[prediction.question_id] = QuestionEntry(
            question_id=prediction.question_id,
            question_type=prediction.question_type,
            context_id=prediction.context_id,
            topic=prediction.topic,
            answer=prediction.answer,
            distance_tokens=prediction.distance_tokens,
            distance_bucket=distance_bucket(prediction.distance_tokens),
            fields=dict(prediction.fields),
        )
    entry.cells[cell] = prediction
    entry.runs.add(run)


def _bucket_rank(label: str) -> int:
    return next((i for i, (name, _, _) in enumerate(DISTANCE_BUCKETS) if name == label), len(DISTANCE_BUCKETS))


def _natural(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value.split("-")[0].strip("<>= ")), value)
    except ValueError:
        return (1, 0.0, value)


__all__ = [
    "ANALYSIS_INTERVAL",
    "ERRORS_FILE",
    "Analysis",
    "QuestionEntry",
    "RowRef",
    "RunFiles",
    "RunIndex",
    "RunView",
    "Snapshot",
]
