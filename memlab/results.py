"""Result files of a run: ``predictions.jsonl`` (one line per answered question, appended as it
happens) and ``summary.json`` (a typed, versioned aggregate rebuilt from the predictions alone).

Tables and plots are built from these files only, so a run directory is the complete record.
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

SCHEMA_VERSION = 1
PREDICTIONS_FILE = "predictions.jsonl"
SUMMARY_FILE = "summary.json"

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


class Prediction(BaseModel):
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
    retrieved_messages: list[int] | None = Field(
        default=None, description="history message indexes behind the retrieved items; None if unknown"
    )
    evidence_messages: list[int] = Field(default_factory=list)
    ingest_seconds: float = 0.0
    retrieve_seconds: float = 0.0
    answer_seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    metrics: dict[str, float] = Field(default_factory=dict)
    error: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.backend, self.reader, self.question_id)


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


class RowSummary(BaseModel):
    backend: str
    reader: str
    control: bool = False
    accuracy: Score | None = None
    per_type: dict[str, Score] = Field(default_factory=dict)
    per_distance: dict[str, Score] = Field(default_factory=dict)
    questions: int = 0
    errors: int = 0
    mean_context_tokens: float = 0.0
    ingest_seconds: float = 0.0
    retrieve_seconds: float = 0.0
    answer_seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    metrics: dict[str, float] = Field(default_factory=dict)
    metrics_per_type: dict[str, dict[str, float]] = Field(default_factory=dict)
    vs_controls: list[PairedComparison] = Field(default_factory=list)


class RunSummary(BaseModel):
    schema_version: int = SCHEMA_VERSION
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    name: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    dataset: dict[str, Any] = Field(default_factory=dict)
    embedder: str = ""
    rows: list[RowSummary] = Field(default_factory=list)
    data_issues: list[str] = Field(default_factory=list)
    failed_jobs: list[dict[str, Any]] = Field(default_factory=list)

    def save(self, run_dir: str | Path) -> Path:
        path = Path(run_dir) / SUMMARY_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.model_dump_json(indent=2), encoding="utf-8")
        tmp.replace(path)  # atomic: a reader never sees half a summary
        return path

    @classmethod
    def load(cls, run_dir: str | Path) -> "RunSummary":
        path = Path(run_dir)
        if path.is_dir():
            path = path / SUMMARY_FILE
        data = json.loads(path.read_text(encoding="utf-8"))
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"{path}: summary schema version {version}, this memlab reads {SCHEMA_VERSION}")
        return cls.model_validate(data)

    def row(self, backend: str, reader: str | None = None) -> RowSummary:
        for row in self.rows:
            if row.backend == backend and (reader is None or row.reader == reader):
                return row
        raise KeyError(f"no result row for backend {backend!r}" + (f" and reader {reader!r}" if reader else ""))


# --------------------------------------------------------------------------- predictions file
class PredictionWriter:
    """Appends predictions, one JSON line each, flushed immediately (a killed run loses nothing)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / PREDICTIONS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._handle = self.path.open("a", encoding="utf-8")

    def _repair_tail(self) -> None:
        # A run killed mid-write can leave half a line; cut it so the next append starts clean.
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):
            self.path.write_bytes(data[: data.rfind(b"\n") + 1])

    def write(self, prediction: Prediction) -> None:
        self._handle.write(prediction.model_dump_json() + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def read_predictions(run_dir: str | Path) -> list[Prediction]:
    """All complete predictions of a run; a torn last line (killed run) is skipped, not fatal."""
    path = Path(run_dir) / PREDICTIONS_FILE
    if not path.exists():
        return []
    out: list[Prediction] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(Prediction.model_validate_json(line))
        except ValidationError as exc:
            if number == len(lines):
                continue
            raise ValueError(f"{path}, line {number}: not a valid prediction: {exc}") from exc
    # The last write wins if a question was answered twice (e.g. a retried job).
    latest = {p.key: p for p in out}
    return list(latest.values())


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


def _mean_metrics(preds: list[Prediction]) -> dict[str, float]:
    sums: dict[str, list[float]] = defaultdict(list)
    for p in preds:
        for name, value in p.metrics.items():
            sums[name].append(value)
    return {name: sum(v) / len(v) for name, v in sorted(sums.items())}


def summarize_rows(predictions: list[Prediction], controls: set[tuple[str, str]] = frozenset()) -> list[RowSummary]:  # type: ignore[assignment]
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
                control=(backend, reader) in controls,
                accuracy=wilson(sum(bool(p.correct) for p in scored), len(scored)) if scored else None,
                per_type=_scores(scored, lambda p: p.question_type),
                per_distance=_scores(scored, lambda p: distance_bucket(p.distance_tokens)),
                questions=len(preds),
                errors=sum(p.error is not None for p in preds),
                mean_context_tokens=sum(p.context_tokens for p in preds) / len(preds),
                ingest_seconds=sum(p.ingest_seconds for p in preds),
                retrieve_seconds=sum(p.retrieve_seconds for p in preds),
                answer_seconds=sum(p.answer_seconds for p in preds),
                prompt_tokens=sum(p.prompt_tokens for p in preds),
                completion_tokens=sum(p.completion_tokens for p in preds),
                cost_usd=sum(p.cost_usd for p in preds),
                metrics=_mean_metrics(preds),
                metrics_per_type={t: _mean_metrics(v) for t, v in sorted(by_type.items())},
            )
        )
    _compare_with_controls(rows, groups)
    rows.sort(key=lambda r: (r.control, r.backend, r.reader))
    return rows


def mcnemar_exact(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value: how likely this split of discordant pairs is by chance."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


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
            row.vs_controls.append(PairedComparison(
                control=f"{control.backend} / {control.reader}", n=len(shared), wins=wins, losses=losses,
                p_value=mcnemar_exact(wins, losses),
            ))
