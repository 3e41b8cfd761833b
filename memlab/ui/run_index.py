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

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
        self._offset += len(complete)
        self._lines_before += complete.count(b"\n")
        if complete:
            self._seen_tail = (self._seen_tail + complete)[-TAIL_CHECK_BYTES:]

    def _start_over(self, inode: int | None) -> None:
        self.predictions, self.bad_lines, self._offset, self._lines_before, self._inode = {}, [], 0, 0, inode
        self._seen_tail = b""

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

    @property
    def disagree(self) -> bool:
        """Rows that scored it differ in right/wrong, or picked different options."""
        scored = {p.correct for p in self.cells.values() if p.correct is not None and p.error is None}
        chosen = {p.chosen for p in self.cells.values() if p.error is None and p.chosen is not None}
        return len(scored) > 1 or len(chosen) > 1

    @property
    def right(self) -> int:
        return sum(1 for p in self.cells.values() if p.correct and p.error is None)


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
class Snapshot:
    """Everything derived from the runs' files at one moment; replaced whole when a file changes."""

    runs: list[RunView]
    comparison: Comparison
    rows: list[RowRef]
    questions: dict[str, QuestionEntry]
    order: list[str]  # question ids in first-seen order (history order of the runs)
    question_types: list[str]
    fields: dict[str, list[str]]  # field name -> values seen
    distance_buckets: list[str]
    built: float
    build_seconds: float
    version: int

    def row(self, name: str) -> RowRef | None:
        return next((r for r in self.rows if r.name == name or r.short == name), None)


class RunIndex:
    """The run directories given to ``memlab ui``; ``snapshot()`` is always current with their files."""

    def __init__(self, run_dirs: Sequence[str | Path]) -> None:
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
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._version = 0

    def snapshot(self) -> Snapshot:
        """The current state of the runs (a few stats when no file changed since the last call)."""
        with self._lock:
            changed = [f.refresh() for f in self.files]
            if self._snapshot is None or any(changed):
                self._version += 1
                self._snapshot = self._build()
            return self._snapshot

    def _build(self) -> Snapshot:
        started = time.perf_counter()
        loaded: list[LoadedRun] = []
        views: list[RunView] = []
        for files in self.files:
            predictions = list(files.predictions.values())
            summary = load_run(files.path, predictions)
            loaded.append(LoadedRun(files.path, summary, predictions))
            summary_stamp, predictions_stamp, _ = files.stamps
            # No summary yet, or one older than the predictions: the run is still writing (or was killed).
            in_progress = summary_stamp is None or (
                predictions_stamp is not None and summary_stamp[0] < predictions_stamp[0]
            )
            views.append(RunView(files.path, "", summary, files, in_progress, len(predictions)))
        names = run_names(loaded)
        for view, name in zip(views, names):
            view.name = name
        comparison = compare_loaded(loaded)
        short = {row.name: f"R{i + 1}" for i, row in enumerate(comparison.rows)}
        rows = [RowRef(r.name, short[r.name], r.run, r.backend, r.reader, r.control) for r in comparison.rows]
        several = len(loaded) > 1
        questions: dict[str, QuestionEntry] = {}
        fields: dict[str, dict[str, None]] = {}
        for run, name in zip(loaded, names):
            names_of = {(r.backend, r.reader): row_name(name, r, several) for r in run.summary.rows}
            for prediction in run.predictions:
                cell = names_of.get(prediction.row)
                if cell is None:
                    continue
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
                    for key, value in prediction.fields.items():
                        fields.setdefault(key, {})[value] = None
                entry.cells[cell] = prediction
                entry.runs.add(name)
        types = question_types(RunSummary(rows=[row for run in loaded for row in run.summary.rows]))
        types += sorted({e.question_type for e in questions.values()} - set(types))
        buckets = sorted(
            {e.distance_bucket for e in questions.values() if e.distance_bucket},
            key=_bucket_rank,
        )
        return Snapshot(
            runs=views,
            comparison=comparison,
            rows=rows,
            questions=questions,
            order=list(questions),
            question_types=types,
            fields={k: sorted(v, key=_natural) for k, v in sorted(fields.items())},
            distance_buckets=buckets,
            built=time.time(),
            build_seconds=time.perf_counter() - started,
            version=self._version,
        )


def _bucket_rank(label: str) -> int:
    return next((i for i, (name, _, _) in enumerate(DISTANCE_BUCKETS) if name == label), len(DISTANCE_BUCKETS))


def _natural(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value.split("-")[0].strip("<>= ")), value)
    except ValueError:
        return (1, 0.0, value)


__all__ = ["ERRORS_FILE", "QuestionEntry", "RowRef", "RunFiles", "RunIndex", "RunView", "Snapshot"]
