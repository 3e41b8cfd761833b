"""Typed result files of the benchmark scripts that are not ``memlab run``s, and their markdown tables.

A script given ``--json FILE`` writes one of these models (small: aggregates only, never per-question
predictions); ``benchmarks/doc_tables.py`` renders the docs' tables from it with the ``markdown``
method, so a table and its source cannot disagree. Every file carries ``version`` (checked on load)
and the ``command`` that produced it.
"""

from __future__ import annotations

import json
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field, ValidationError

from memlab.report.tables import _md, pct
from memlab.results import ResultsFileError, Score, wilson, write_atomically

RESULT_VERSION = 1
Result = TypeVar("Result", bound="ResultFile")


def command_line() -> str:
    """The command that is running, as the docs note it (``python benchmarks/NAME.py ARGS``)."""
    script = Path(sys.argv[0])
    shown = f"benchmarks/{script.name}" if script.parent.name == "benchmarks" else str(script)
    return shlex.join(["python", shown, *sys.argv[1:]])


class ResultFile(BaseModel):
    """What every result file has: its version, the command that wrote it and when."""

    version: int = RESULT_VERSION
    command: str = Field(default_factory=command_line, description="the command that wrote this file")
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, self.model_dump_json(indent=2) + "\n")
        return path

    @classmethod
    def load(cls: type[Result], path: str | Path) -> Result:
        """The file at ``path``, version-checked; ``ResultsFileError`` names the file otherwise."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResultsFileError(f"{path}: cannot read the result file: {exc}") from exc
        version = data.get("version") if isinstance(data, dict) else None
        if version != RESULT_VERSION:
            raise ResultsFileError(f"{path}: result version {version!r}, this script reads version {RESULT_VERSION}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ResultsFileError(f"{path}: not a valid {cls.__name__}:\n{exc}") from exc

    def markdown(self) -> str:
        """The docs' table of this result (each kind of result file defines its own)."""
        raise NotImplementedError


# --------------------------------------------------------------------------- synthetic sweeps
def score(hits: list[bool]) -> Score:
    """Accuracy of ``hits`` with its Wilson 95% interval."""
    return wilson(sum(hits), len(hits))


class SweepRow(BaseModel):
    name: str
    overall: Score
    columns: dict[str, Score] = Field(description="column key -> accuracy on its questions")


class PairedCheck(BaseModel):
    """One claim of a sweep: a row against another on the same questions (exact McNemar)."""

    label: str
    accuracy: float
    against: float = Field(description="accuracy of the row compared with")
    wins: int
    losses: int
    p_value: float
    passed: bool


BLIND_SUFFIX = "(blind)"  # how the sweeps label their blind controls (no memory, or the longest-option reader)


class SweepResult(ResultFile):
    """benchmarks/synthetic_sweep.py and synthetic_sweep_v2.py: accuracy per question type and row."""

    setting: str = Field(description="data, embedders and reader, as the script prints them")
    headers: dict[str, str] = Field(description="column key -> header, in table order")
    rows: list[SweepRow]
    checks: list[PairedCheck] = Field(default_factory=list)
    seconds: dict[str, float] = Field(default_factory=dict)

    def markdown(self, blind_only: bool = False) -> str:
        """Accuracy % per row, overall and per column, and a last line with the questions of each;
        ``blind_only``: the blind controls alone (the rows the sweeps label ``(blind)``)."""
        headers = ["row", "overall", *self.headers.values()]
        rows = [r for r in self.rows if r.name.endswith(BLIND_SUFFIX)] if blind_only else self.rows
        body = [[r.name, pct(r.overall), *(pct(r.columns.get(key)) for key in self.headers)] for r in rows]
        first = self.rows[0]
        body.append(["questions", str(first.overall.n), *(str(first.columns[k].n) for k in self.headers)])
        return _md(headers, body, set(range(1, len(headers))))

    def checks_markdown(self) -> str:
        """The paired checks: accuracies, wins and losses on the same questions, exact McNemar p."""
        headers = ["check", "accuracy %", "against %", "wins", "losses", "p (McNemar)", "passed"]
        body = [
            [
                c.label,
                f"{100 * c.accuracy:.1f}",
                f"{100 * c.against:.1f}",
                str(c.wins),
                str(c.losses),
                f"{c.p_value:.2g}",
                "yes" if c.passed else "NO",
            ]
            for c in self.checks
        ]
        return _md(headers, body, {1, 2, 3, 4, 5})


# --------------------------------------------------------------------------- systems_cost.py
class SystemCost(BaseModel):
    system: str
    messages: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    requests: dict[str, int] = Field(description="LLM calls by kind (the scripted server's)")


class SystemsCostResult(ResultFile):
    """benchmarks/systems_cost.py: LLM calls and tokens per ingested message of each system."""

    dataset: str
    systems: list[SystemCost]

    def markdown(self) -> str:
        headers = [
            "system",
            "messages",
            "LLM calls",
            "calls / message",
            "prompt tokens / message",
            "completion tokens / message",
            "seconds / message",
            "requests",
        ]
        body = []
        for s in self.systems:
            n = max(s.messages, 1)
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(s.requests.items()))
            body.append(
                [
                    s.system,
                    str(s.messages),
                    str(s.calls),
                    f"{s.calls / n:.2f}",
                    f"{s.prompt_tokens / n:,.0f}",
                    f"{s.completion_tokens / n:,.1f}",
                    f"{s.seconds / n:.3f}",
                    kinds,
                ]
            )
        return _md(headers, body, set(range(1, 7)))


# --------------------------------------------------------------------------- bench_v2_scale.py
RELEASE_HISTORIES = 200  # PersonaMem-v2's histories per size
TOKENS_128K_FACTOR = 4  # a 128k history against a 32k one (ingest is linear in the history's length)


class ScaleRow(BaseModel):
    backend: str
    executor: str = Field(description="'local' or 'process xN'")
    histories: int
    seconds: float = Field(description="wall seconds of the whole run")
    peak_mib: float = Field(description="largest resident set of any single process of the run")
    exit_status: int = 0

    @property
    def per_history(self) -> float:
        return self.seconds / self.histories

    def projected_hours(self, factor: int = 1) -> float:
        """Time for the release's 200 histories, ``factor`` times as long as the measured ones."""
        return self.per_history * factor * RELEASE_HISTORIES / 3600


class ScaleResult(ResultFile):
    """benchmarks/bench_v2_scale.py: wall time per history and peak memory of each (backend, executor)."""

    dataset: str
    cpu_cores: int | None = None
    rows: list[ScaleRow]

    def markdown(self) -> str:
        headers = [
            "backend",
            "executor",
            "histories",
            "wall s",
            "s / history",
            "peak MiB (largest process)",
            "projected 200 x 32k, h",
            "projected 200 x 128k, h",
        ]
        body = [
            [
                r.backend + (f" (exit {r.exit_status})" if r.exit_status else ""),
                r.executor,
                str(r.histories),
                f"{r.seconds:.1f}",
                f"{r.per_history:.2f}",
                f"{r.peak_mib:.0f}",
                f"{r.projected_hours():.2f}",
                f"{r.projected_hours(TOKENS_128K_FACTOR):.2f}",
            ]
            for r in self.rows
        ]
        return _md(headers, body, set(range(2, len(headers))))


# --------------------------------------------------------------------------- local_llm.py
class LocalLLMRow(BaseModel):
    name: str
    correct: int
    questions: int
    seconds: float
    counted: dict[str, int] = Field(default_factory=dict, description="what the backends and reader counted")


class LocalLLMResult(ResultFile):
    """benchmarks/local_llm.py: accuracy, time and counted failures of each row on a local model."""

    dataset: str
    models: str
    rows: list[LocalLLMRow]

    def markdown(self) -> str:
        body = [
            [
                r.name,
                f"{(r.correct / r.questions if r.questions else 0.0):.1%} ({r.correct}/{r.questions})",
                f"{r.seconds:.0f}",
                ", ".join(f"{k} {v}" for k, v in r.counted.items()) or "-",
            ]
            for r in self.rows
        ]
        return _md(["row", "accuracy", "seconds", "counted"], body, {1, 2})


# --------------------------------------------------------------------------- bench_service.py
class ServicePhase(BaseModel):
    phase: str
    requests: int
    errors: int
    seconds: float
    rps: float = Field(description="requests per second (the big ingest's row: messages per second)")
    p50_ms: float | None = None  # None: no request was timed in this phase
    p90_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None


class ServiceResult(ResultFile):
    """benchmarks/bench_service.py: search throughput with 1 and N clients, and another user's search
    latency while one user ingests, per backend."""

    cpu_cores: int | None = None
    load_average: list[float] | None = Field(default=None, description="1, 5, 15 min, before the run")
    users: int
    clients: list[int]
    ingest_messages: int
    ingest_window: float
    backends: dict[str, list[ServicePhase]]

    def phase(self, backend: str, name: str) -> ServicePhase | None:
        return next((p for p in self.backends[backend] if p.phase == name), None)

    def markdown(self) -> str:
        most = max(self.clients)
        headers = [
            "backend",
            "search req/s, 1 client",
            f"{most} clients",
            "ratio",
            f"other user's search p99 during {self.ingest_messages}-message ingests",
            "searches / ingests",
        ]
        body = []
        for backend in self.backends:
            one, many = self.phase(backend, "search, 1 client"), self.phase(backend, f"search, {most} clients")
            meanwhile = self.phase(backend, "other user's search meanwhile")
            ingests = self.phase(backend, f"ingest {self.ingest_messages} msgs (1 req)")
            ratio = f"{many.rps / one.rps:.2f}x" if one and many and one.rps else "–"
            p99 = "–" if meanwhile is None or meanwhile.p99_ms is None else f"{meanwhile.p99_ms:.1f} ms"
            counts = f"{meanwhile.requests if meanwhile else 0} / {ingests.requests if ingests else 0}"
            body.append(
                [backend, f"{one.rps:.1f}" if one else "–", f"{many.rps:.1f}" if many else "–", ratio, p99, counts]
            )
        return _md(headers, body, set(range(1, len(headers))))


# --------------------------------------------------------------------------- bench_profile_extractor.py
class ExtractorResult(ResultFile):
    """benchmarks/bench_profile_extractor.py: the profile extractor's operations against the labelled set."""

    labelled_set: str
    conversations: int
    statements: int
    expected: int
    predicted: int
    matched: int
    precision: float
    recall: float

    def markdown(self) -> str:
        headers = ["conversations", "user statements", "expected ops", "predicted", "matched", "precision", "recall"]
        row = [self.conversations, self.statements, self.expected, self.predicted, self.matched]
        body = [[*(str(v) for v in row), f"{self.precision:.3f}", f"{self.recall:.3f}"]]
        return _md(headers, body, set(range(len(headers))))


# --------------------------------------------------------------------------- bench_retrieve_scaling.py
class ScalingPoint(BaseModel):
    messages: int
    queries: int
    mean_ms: float = Field(description="mean retrieve over the replay's question points")
    full_history_ms: float = Field(description="median retrieve at the last point (the whole history)")
    load_before: float
    load_after: float


class RetrieveScalingResult(ResultFile):
    """benchmarks/bench_retrieve_scaling.py: retrieve time per query at two history sizes."""

    backend: str
    embedder: str
    points: list[ScalingPoint]

    def markdown(self) -> str:
        headers = ["messages", "queries", "mean retrieve ms", "median at the full history, ms", "load average"]
        body = [
            [
                f"{p.messages:,}",
                str(p.queries),
                f"{p.mean_ms:.1f}",
                f"{p.full_history_ms:.1f}",
                f"{p.load_before:.2f} -> {p.load_after:.2f}",
            ]
            for p in self.points
        ]
        if len(self.points) > 1:
            small, large = min(self.points, key=lambda p: p.messages), max(self.points, key=lambda p: p.messages)
            body.append(
                [
                    f"ratio {large.messages:,} / {small.messages:,}",
                    "",
                    f"{large.mean_ms / small.mean_ms:.2f}x",
                    f"{large.full_history_ms / small.full_history_ms:.2f}x",
                    "",
                ]
            )
        return _md(headers, body, {1, 2, 3})


# --------------------------------------------------------------------------- bench_executors.py
class ExecutorRow(BaseModel):
    executor: str
    workers: int
    seconds: float
    ray_start_seconds: float | None = None
    predictions: int
    same_chosen: bool = Field(description="every chosen answer equals the local executor's")
    max_score_diff: float


class ExecutorsResult(ResultFile):
    """benchmarks/bench_executors.py: one evaluation under the local, process and Ray executors."""

    dataset: str
    embedder: str
    rows: list[ExecutorRow]

    def markdown(self) -> str:
        headers = [
            "executor",
            "workers",
            "wall s",
            "speed-up",
            "ray start s",
            "predictions",
            "same chosen",
            "max |score diff|",
        ]
        base = self.rows[0].seconds if self.rows else 0.0
        body = [
            [
                r.executor,
                str(r.workers),
                f"{r.seconds:.1f}",
                f"{base / r.seconds:.2f}x" if r.seconds else "–",
                "–" if r.ray_start_seconds is None else f"{r.ray_start_seconds:.1f}",
                str(r.predictions),
                "yes" if r.same_chosen else "NO",
                f"{r.max_score_diff:.1e}",
            ]
            for r in self.rows
        ]
        return _md(headers, body, {1, 2, 3, 4, 5})
