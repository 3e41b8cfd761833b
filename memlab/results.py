"""Result files of a run: ``predictions.jsonl`` (one line per answered question, appended as it
happens) and ``summary.json`` (a typed, versioned aggregate rebuilt from the predictions alone).

Tables and plots are built from these files only, so a run directory is the complete record.

``predictions.jsonl`` is read strictly: a line that is not UTF-8, not JSON or not a prediction stops
the reader with its file and line, and ``repair_predictions`` moves such lines to
``predictions.rejects.jsonl`` (``memlab repair-predictions DIR``). Only a torn last line without its
newline (a run killed mid-write) is dropped silently: nothing was ever written after it.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memlab.errors import MemlabError

SCHEMA_VERSION = 1
PREDICTIONS_FILE = "predictions.jsonl"
REJECTS_FILE = "predictions.rejects.jsonl"
SUMMARY_FILE = "summary.json"

# Blind controls: the ``none`` backend (no memory at all) and the ``longest_option`` reader (never looks
# at memory). The runner adds them to every run; results and reports mark and compare against them.
CONTROL_BACKEND = "none"
CONTROL_READER = "longest_option"
# LoCoMo's category 5: left out of the overall F1 that mem0, MemOS and EverMemOS publish.
ADVERSARIAL_TYPES = frozenset({"adversarial"})


def is_control(backend: str, reader: str) -> bool:
    """Whether a (backend label, reader identity) row is a blind control. The one definition."""
    return backend == CONTROL_BACKEND or reader == CONTROL_READER or reader.startswith(CONTROL_READER + "[")


class ResultsFileError(MemlabError, ValueError):
    """A result file that cannot be read (missing, unreadable, another schema, or a bad line)."""


# Distance from the question to its evidence, in tokens (PersonaMem's distance_to_ref_in_tokens).
DISTANCE_BUCKETS: list[tuple[str, int, float]] = [
    ("<4k", 0, 4_000),
    ("4k-16k", 4_000, 16_000),
    ("16k-32k", 16_000, 32_000),
    ("32k-64k", 32_000, 64_000),
    ("64k-128k", 64_000, 128_000),
    ("128k-512k", 128_000, 512_000),
    (">=512k", 512_000, math.inf),
]


class Costs(BaseModel):
    """What answering cost: seconds per stage, and the reader's and the backend's (ingest) LLM tokens
    and dollars. A prediction's are its question's (ingest: since the previous question); a row's
    are the sums over its predictions. (Unknown keys: as each subclass says.)"""

    ingest_seconds: float = 0.0
    retrieve_seconds: float = 0.0
    answer_seconds: float = 0.0
    prompt_tokens: int = Field(default=0, description="the reader's LLM tokens, every answer run's (--answer-runs)")
    completion_tokens: int = 0
    cost_usd: float = 0.0
    ingest_prompt_tokens: int = Field(default=0, description="LLM tokens a backend spent ingesting")
    ingest_completion_tokens: int = 0
    ingest_cost_usd: float = 0.0


class Prediction(Costs):
    """One answered question for one (backend, reader)."""

    model_config = ConfigDict(extra="forbid")

    backend: str
    reader: str
    question_id: str
    context_id: str
    question_type: str
    topic: str = ""
    distance_blocks: int | None = None
    distance_tokens: int | None = None
    chosen: int | None = None
    answer: int | None = None
    correct: bool | None = None
    scores: list[float] = Field(default_factory=list)
    predicted_text: str | None = None
    context_tokens: int = 0
    retrieved_items: int = 0
    untraceable_items: int = Field(
        default=0, description="retrieved items whose source names no turn of the history (not traceable)"
    )
    retrieved_messages: list[int] | None = Field(
        default=None, description="history message indexes behind the retrieved items; None if unknown"
    )
    evidence_messages: list[int] = Field(default_factory=list)
    metrics: dict[str, float] = Field(default_factory=dict)
    option_order: list[str] | None = Field(
        default=None, description="the option texts in the order shown (datasets that shuffle them: PersonaMem-v2)"
    )
    fields: dict[str, str] = Field(
        default_factory=dict, description="the question's breakdown fields (PersonaMem-v2: who, updated, ...)"
    )
    run_choices: list[int | None] = Field(
        default_factory=list, description="choices of answer runs 2..N (--answer-runs); run 1's is chosen"
    )
    error: str | None = None
    fingerprint: str | None = Field(default=None, description="hash of the settings that determine this answer")
    traceback: str | None = Field(
        default=None, exclude=True, description="full traceback of an error; goes to errors.log, not to this file"
    )

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.backend, self.reader, self.question_id)

    @property
    def row(self) -> tuple[str, str]:
        return (self.backend, self.reader)


class Score(BaseModel):
    """Accuracy with its Wilson 95% interval."""

    n: int
    correct: int
    accuracy: float
    low: float
    high: float


class PairedComparison(BaseModel):
    """A row against a blind control on the questions both scored (exact two-sided McNemar test)."""

    control: str = Field(description="'backend / reader' of the control")
    n: int = Field(description="questions scored by both")
    wins: int = Field(description="right here, wrong in the control")
    losses: int = Field(description="wrong here, right in the control")
    p_value: float


class RowSummary(Costs):
    backend: str
    reader: str
    control: bool = False
    accuracy: Score | None = None
    per_type: dict[str, Score] = Field(default_factory=dict)
    per_distance: dict[str, Score] = Field(default_factory=dict)
    per_field: dict[str, dict[str, Score]] = Field(
        default_factory=dict, description="field -> value -> accuracy (the predictions' breakdown fields)"
    )
    questions: int = 0
    open_questions: int = Field(default=0, description="questions without options (answered in free text)")
    errors: int = 0
    mean_context_tokens: float = 0.0
    retrieved_items: int = Field(default=0, description="items retrieved over all questions")
    untraceable_items: int = Field(
        default=0,
        description="retrieved items not traceable to turns (no session_id + turn_index source): the questions "
        "they were retrieved for have no retrieval metrics",
    )
    untraceable_questions: int = Field(default=0, description="questions with at least one untraceable item")
    metrics: dict[str, float] = Field(default_factory=dict)
    metrics_per_type: dict[str, dict[str, float]] = Field(default_factory=dict)
    vs_controls: list[PairedComparison] = Field(default_factory=list)
    accuracy_runs: list[float] = Field(
        default_factory=list, description="accuracy of each answer run (--answer-runs N), over the scored questions"
    )
    accuracy_mean: float | None = Field(default=None, description="mean of accuracy_runs")
    accuracy_std: float | None = Field(default=None, description="population std of accuracy_runs (as judge_std)")
    retrieve_ms_p50: float | None = Field(default=None, description="median retrieve latency per question, ms")
    retrieve_ms_p95: float | None = Field(default=None, description="95th percentile retrieve latency, ms")
    llm_endpoint: str | None = Field(default=None, description="the reader's LLM endpoint, as preflight reached it")
    llm_model: str | None = Field(default=None, description="the model the endpoint reported serving")
    fingerprint: str | None = None
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="what the fingerprint covers: backend/reader config, dataset, replay, versions",
    )


class RunSummary(BaseModel):
    schema_version: int = SCHEMA_VERSION
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    name: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    dataset: dict[str, Any] = Field(default_factory=dict)
    embedder: str = ""
    plugins: dict[str, str] = Field(default_factory=dict, description="distribution -> version of each plugin used")
    row_fingerprints: dict[str, str] = Field(
        default_factory=dict, description="'backend|reader' -> fingerprint of every row of the run config"
    )
    rows: list[RowSummary] = Field(default_factory=list)
    data_issues: list[str] = Field(default_factory=list)
    failed_jobs: list[dict[str, Any]] = Field(default_factory=list)

    def save(self, run_dir: str | Path) -> Path:
        path = Path(run_dir) / SUMMARY_FILE
        write_atomically(path, self.model_dump_json(indent=2))
        return path

    @classmethod
    def load(cls, run_dir: str | Path) -> RunSummary:
        """The ``summary.json`` of a run directory (or that file itself), version-checked."""
        path = Path(run_dir)
        if path.is_dir():
            path = path / SUMMARY_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResultsFileError(f"{path}: cannot read the run summary: {exc}") from exc
        version = data.get("schema_version") if isinstance(data, dict) else None
        if version != SCHEMA_VERSION:
            raise ResultsFileError(
                f"{path}: summary schema version {version!r}, this memlab reads version {SCHEMA_VERSION}; "
                f"report it with the memlab that wrote it, or delete {SUMMARY_FILE} to rebuild it from "
                f"{PREDICTIONS_FILE}"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ResultsFileError(f"{path}: not a valid run summary:\n{exc}") from exc

    def current(self, predictions: list[Prediction]) -> list[Prediction]:
        """The predictions that belong to this summary's run config (its rows and fingerprints)."""
        if not self.row_fingerprints:
            return predictions
        return [p for p in predictions if self.row_fingerprints.get("|".join(p.row)) == p.fingerprint]

    def row(self, backend: str, reader: str | None = None) -> RowSummary:
        for row in self.rows:
            if row.backend == backend and (reader is None or row.reader == reader):
                return row
        raise KeyError(f"no result row for backend {backend!r}" + (f" and reader {reader!r}" if reader else ""))


# --------------------------------------------------------------------------- predictions file
def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` at once: a reader never sees half a file, a failure leaves the old one."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise write_failed(path, exc) from exc


class ResultsWriteError(MemlabError, OSError):
    """A result file could not be written (disk full, permissions): the run stops, nothing is lost."""


def write_failed(path: Path, exc: OSError) -> ResultsWriteError:
    return ResultsWriteError(
        f"cannot write {path}: {exc.strerror or exc}; what was saved before is kept: free space (or fix "
        "permissions) and rerun the same command to resume"
    )


class PredictionsFileError(ResultsFileError):
    """An unreadable line in ``predictions.jsonl``: the run stops instead of appending after it."""


def _repair_hint(path: Path) -> str:
    return (
        f"no answer is added after an unreadable line. To keep the readable lines and move the others to "
        f"{path.parent / REJECTS_FILE}, run: memlab repair-predictions {path.parent}"
    )


def _torn_tail(data: bytes) -> tuple[bytes, bytes]:
    """(complete lines, the partial last line a killed writer left without its newline)."""
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]


def _parse_lines(path: Path, data: bytes) -> Iterable[tuple[int, bytes, Prediction | str]]:
    """Each complete non-blank line with its number and either the prediction or what is wrong with it."""
    for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, raw, f"not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1})"
            continue
        try:
            yield number, raw, Prediction.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "line"
            yield number, raw, f"not a valid prediction ({where}: {first.get('msg', exc)})"


def read_predictions(run_dir: str | Path) -> list[Prediction]:
    """All predictions of a run, the last one winning for a question answered twice (a retried job).

    Raises ``PredictionsFileError`` naming file and line for any unreadable complete line; a torn
    last line without its newline (a killed run) is ignored.
    """
    path = Path(run_dir) / PREDICTIONS_FILE
    if not path.exists():
        return []
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PredictionsFileError(f"{path}: cannot read: {exc}") from exc
    complete, _ = _torn_tail(data)
    out: list[Prediction] = []
    for number, _raw, parsed in _parse_lines(path, complete):
        if isinstance(parsed, str):
            raise PredictionsFileError(f"{path}, line {number}: {parsed}; {_repair_hint(path)}")
        out.append(parsed)
    latest = {p.key: p for p in out}
    return list(latest.values())


def repair_predictions(run_dir: str | Path) -> tuple[int, int]:
    """Move unreadable lines (and a torn last line) of ``predictions.jsonl`` to ``predictions.rejects.jsonl``.

    The good lines are kept in order; the file is replaced atomically. Returns (kept, rejected).
    """
    path = Path(run_dir) / PREDICTIONS_FILE
    if not path.exists():
        raise PredictionsFileError(f"{path}: no such file")
    complete, tail = _torn_tail(path.read_bytes())
    kept: list[bytes] = []
    rejected: list[bytes] = []
    for _number, raw, parsed in _parse_lines(path, complete):
        (rejected if isinstance(parsed, str) else kept).append(raw)
    if tail.strip():
        rejected.append(tail)
    if rejected:
        with (path.parent / REJECTS_FILE).open("ab") as handle:
            handle.write(b"".join(line + b"\n" for line in rejected))
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_bytes(b"".join(line + b"\n" for line in kept))
        tmp.replace(path)
    return len(kept), len(rejected)


class PredictionWriter:
    """Appends predictions, one JSON line each, flushed immediately (a killed run loses nothing).

    Opening checks the whole file first: the writer never appends after an unreadable line. A torn
    last line left by a killed run is moved to the rejects file, so the next line starts clean.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / PREDICTIONS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            read_predictions(self.path.parent)  # raises on a bad line, before anything is appended
            data = self.path.read_bytes()
            complete, tail = _torn_tail(data)
            if tail:
                with (self.path.parent / REJECTS_FILE).open("ab") as handle:
                    handle.write(tail + b"\n")
                with self.path.open("r+b") as handle:
                    handle.truncate(len(complete))
        self._handle = self.path.open("a", encoding="utf-8")

    def write(self, prediction: Prediction) -> None:
        try:
            self._handle.write(prediction.model_dump_json() + "\n")
            self._handle.flush()
        except OSError as exc:
            raise write_failed(self.path, exc) from exc

    def close(self) -> None:
        try:
            self._handle.close()
        except OSError:  # a failed flush (disk full) was reported when it happened
            pass


# --------------------------------------------------------------------------- aggregation
def wilson(correct: int, n: int, z: float = 1.96) -> Score:
    if n == 0:
        return Score(n=0, correct=0, accuracy=0.0, low=0.0, high=0.0)
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Score(n=n, correct=correct, accuracy=p, low=max(0.0, centre - half), high=min(1.0, centre + half))


def distance_bucket(tokens: int | None) -> str | None:
    if tokens is None:
        return None
    for label, low, high in DISTANCE_BUCKETS:
        if low <= tokens < high:
            return label
    return None


def _scores(preds: Iterable[Prediction], key: Any) -> dict[str, Score]:
    groups: dict[str, list[Prediction]] = defaultdict(list)
    for p in preds:
        k = key(p)
        if k is not None:
            groups[k].append(p)
    order = {label: i for i, (label, _, _) in enumerate(DISTANCE_BUCKETS)}
    return {
        k: wilson(sum(bool(p.correct) for p in v), len(v))
        for k, v in sorted(groups.items(), key=lambda kv: (order.get(kv[0], -1), kv[0]))
    }


def _field_order(value: str) -> tuple[int, str]:
    """Values in their natural order: numeric bins ("1024-2047") by their start, the rest by name."""
    head = value.split("-", 1)[0]
    return (int(head), value) if head.isdigit() else (2**62, value)


def field_scores(scored: list[Prediction]) -> dict[str, dict[str, Score]]:
    """Accuracy per value of each breakdown field the predictions carry (``per_field``)."""
    groups: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for p in scored:
        for name, value in p.fields.items():
            groups[name][value].append(bool(p.correct))
    return {
        name: {value: wilson(sum(v), len(v)) for value, v in sorted(values.items(), key=lambda kv: _field_order(kv[0]))}
        for name, values in sorted(groups.items())
    }


def _mean_metrics(preds: list[Prediction]) -> dict[str, float]:
    sums: dict[str, list[float]] = defaultdict(list)
    for p in preds:
        for name, value in p.metrics.items():
            sums[name].append(value)
    return {name: sum(v) / len(v) for name, v in sorted(sums.items())}


def _row_metrics(preds: list[Prediction]) -> dict[str, float]:
    """Means of the per-question metrics, plus the overall F1 without adversarial questions (LoCoMo
    category 5), as mem0, MemOS and EverMemOS report it."""
    metrics = _mean_metrics(preds)
    if "f1" in metrics and any(p.question_type in ADVERSARIAL_TYPES for p in preds):
        kept = [p.metrics["f1"] for p in preds if "f1" in p.metrics and p.question_type not in ADVERSARIAL_TYPES]
        if kept:
            metrics["f1_no_adversarial"] = sum(kept) / len(kept)
    return dict(sorted(metrics.items()))


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def answer_run_accuracies(scored: list[Prediction]) -> list[float]:
    """Accuracy of each answer run over the scored questions (run 1 = ``correct``; a failed repeat
    counts as wrong); empty when the questions were answered once."""
    runs = max((len(p.run_choices) for p in scored), default=0)
    if not runs:
        return []
    out = [sum(bool(p.correct) for p in scored) / len(scored)]
    for i in range(runs):
        right = sum(
            len(p.run_choices) > i and p.run_choices[i] is not None and p.run_choices[i] == p.answer for p in scored
        )
        out.append(right / len(scored))
    return out


def _run_stats(row: RowSummary, scored: list[Prediction], preds: list[Prediction]) -> None:
    """Answer-run mean/std and retrieve latency percentiles of a row."""
    runs = answer_run_accuracies(scored)
    if runs:
        mean = sum(runs) / len(runs)
        row.accuracy_runs = runs
        row.accuracy_mean = mean
        row.accuracy_std = math.sqrt(sum((r - mean) ** 2 for r in runs) / len(runs))
    latencies = [1000 * p.retrieve_seconds for p in preds if p.error is None]
    if latencies:
        row.retrieve_ms_p50 = percentile(latencies, 50)
        row.retrieve_ms_p95 = percentile(latencies, 95)


def summarize_rows(predictions: list[Prediction]) -> list[RowSummary]:
    """One row per (backend, reader), accuracy over questions that were scored (errors excluded)."""
    groups: dict[tuple[str, str], list[Prediction]] = defaultdict(list)
    for p in predictions:
        groups[(p.backend, p.reader)].append(p)
    rows = []
    for (backend, reader), preds in groups.items():
        scored = [p for p in preds if p.error is None and p.correct is not None]
        by_type: dict[str, list[Prediction]] = defaultdict(list)
        for p in preds:
            if p.metrics:
                by_type[p.question_type].append(p)
        rows.append(
            RowSummary(
                backend=backend,
                reader=reader,
                control=is_control(backend, reader),
                accuracy=wilson(sum(bool(p.correct) for p in scored), len(scored)) if scored else None,
                per_type=_scores(scored, lambda p: p.question_type),
                per_distance=_scores(scored, lambda p: distance_bucket(p.distance_tokens)),
                per_field=field_scores(scored),
                questions=len(preds),
                open_questions=sum(p.answer is None for p in preds),
                errors=sum(p.error is not None for p in preds),
                mean_context_tokens=sum(p.context_tokens for p in preds) / len(preds),
                retrieved_items=sum(p.retrieved_items for p in preds),
                untraceable_items=sum(p.untraceable_items for p in preds),
                untraceable_questions=sum(p.untraceable_items > 0 for p in preds),
                **{name: sum(getattr(p, name) for p in preds) for name in Costs.model_fields},
                fingerprint=preds[-1].fingerprint,
                metrics=_row_metrics(preds),
                metrics_per_type={t: _mean_metrics(v) for t, v in sorted(by_type.items())},
            )
        )
        _run_stats(rows[-1], scored, preds)
    _compare_with_controls(rows, groups)
    rows.sort(key=lambda r: (r.control, r.backend, r.reader))
    return rows


def mcnemar_exact(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value: how likely this split of discordant pairs is by chance."""
    n = wins + losses
    if n == 0:
        return 1.0
    # The binomial tail sum of C(n, i), each term from the last one: exact integers as math.comb gives,
    # but linear in the smaller count (a comb per term took seconds for thousands of discordant pairs).
    total, term = 0, 1
    for i in range(min(wins, losses) + 1):
        total += term
        term = term * (n - i) // (i + 1)
    return min(1.0, 2 * (total / 2**n))


def _compare_with_controls(rows: list[RowSummary], groups: dict[tuple[str, str], list[Prediction]]) -> None:
    """Paired comparison of every row with every control: the same questions, so far more telling
    than overlapping confidence intervals."""
    scored = {
        key: {p.question_id: bool(p.correct) for p in preds if p.error is None and p.correct is not None}
        for key, preds in groups.items()
    }
    controls = [r for r in rows if r.control]
    for row in rows:
        if row.control:
            continue
        mine = scored[(row.backend, row.reader)]
        for control in controls:
            theirs = scored[(control.backend, control.reader)]
            shared = mine.keys() & theirs.keys()
            if not shared:
                continue
            wins = sum(mine[q] and not theirs[q] for q in shared)
            losses = sum(theirs[q] and not mine[q] for q in shared)
            row.vs_controls.append(
                PairedComparison(
                    control=f"{control.backend} / {control.reader}",
                    n=len(shared),
                    wins=wins,
                    losses=losses,
                    p_value=mcnemar_exact(wins, losses),
                )
            )
