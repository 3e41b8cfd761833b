"""The judge stage (``--judge mem0|memlab``, ``--judge-runs N``): after answering, an LLM judges each
open answer against the gold answer, ``N`` times; rows get ``judge`` (the mean over runs of the share
judged correct) and ``judge_std`` (the standard deviation over runs, as MemOS reports it).

Verdicts are appended to ``judgments.jsonl`` as they come, keyed by the row's fingerprint, the
question id, the run index and the judge's own fingerprint (prompt name, model, endpoint and
decoding), so the stage resumes like answering does and a different judge never mixes its verdicts
with another's. The judge's LLM responses are also cached (``memlab.eval.judge``).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from memlab.results import Prediction, ResultsFileError, RowSummary, write_failed
from memlab.run.spec import JudgeSpec, RunConfig

JUDGMENTS_FILE = "judgments.jsonl"


class Judgment(BaseModel):
    """One verdict on one answer."""

    model_config = ConfigDict(extra="forbid")

    backend: str
    reader: str
    fingerprint: str | None
    question_id: str
    question_type: str
    run: int
    judge: str  # the judge's fingerprint
    correct: bool | None
    score: float | None = None  # judges that score rather than label (PersonaMem-v2: [0, 1])
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def key(self) -> tuple[str, str, str | None, str, int, str]:
        return (self.backend, self.reader, self.fingerprint, self.question_id, self.run, self.judge)


def judge_settings(spec: JudgeSpec) -> dict[str, Any]:
    """What determines a verdict: prompt name, runs, and the LLM (operational settings left out)."""
    from memlab.llm.config import LLMConfig
    from memlab.run.fingerprint import OPERATIONAL_KEYS

    llm = LLMConfig.model_validate({k: v for k, v in spec.llm.items() if k != "api_key"})
    resolved = {k: v for k, v in json.loads(llm.model_dump_json()).items() if k not in OPERATIONAL_KEYS}
    from memlab.eval.judge import PROMPT_NAMES

    # the prompt's versioned name: a changed prompt text is a different judge
    return {"prompt": PROMPT_NAMES[spec.prompt], "llm": resolved, "provider": llm.resolved_provider()}


def judge_fingerprint(spec: JudgeSpec) -> str:
    from memlab.run.fingerprint import fingerprint_of

    return fingerprint_of(judge_settings(spec))


def read_judgments(out: Path) -> list[Judgment]:
    path = out / JUDGMENTS_FILE
    if not path.exists():
        return []
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]  # a torn last line (killed run) is judged again
    found = []
    for number, raw in enumerate(complete.split(b"\n")[:-1], start=1):
        if not raw.strip():
            continue
        try:
            found.append(Judgment.model_validate_json(raw))
        except ValueError as exc:
            raise ResultsFileError(
                f"{path}, line {number}: not a valid judgment ({exc}); delete the line to judge that answer again"
            ) from exc
    return found


def judge_run(config: RunConfig, rows: list[Any], predictions: list[Prediction], progress: bool) -> None:
    """Judge every open answer of the current rows that has no verdict yet (``runs`` times each)."""
    assert config.judge is not None
    from memlab.run.job import cached_dataset

    out = Path(config.out)
    spec = config.judge
    judge_id = judge_fingerprint(spec)
    done = {j.key for j in read_judgments(out)}
    questions = {q.id: q for q in cached_dataset(config.dataset).questions}
    todo = []
    for p in predictions:
        question = questions.get(p.question_id)
        if p.error is not None or p.predicted_text is None or question is None or question.answer_text is None:
            continue
        for run in range(spec.runs):
            if (p.backend, p.reader, p.fingerprint, p.question_id, run, judge_id) not in done:
                todo.append((p, question, run))
    if not todo:
        return
    from memlab.eval.judge import create_judge

    judge = create_judge(spec.prompt, spec.llm, cache_dir=config.resolved_cache_dir())
    path = out / JUDGMENTS_FILE
    try:
        todo = [(p, q, r) for p, q, r in todo if judge.applies_to(q)]  # mem0's judge skips category 5

        def one(item: tuple[Prediction, Any, int]) -> Judgment:
            p, question, run = item
            verdict = judge.judge(question, p.predicted_text, run=run)
            return Judgment(
                backend=p.backend,
                reader=p.reader,
                fingerprint=p.fingerprint,
                question_id=p.question_id,
                question_type=p.question_type,
                run=run,
                judge=judge_id,
                correct=verdict.get("correct"),
                score=verdict.get("score"),
                prompt_tokens=int(verdict.get("prompt_tokens", 0)),
                completion_tokens=int(verdict.get("completion_tokens", 0)),
            )

        workers = max(1, int(spec.llm.get("max_concurrency", 4)))
        with path.open("a", encoding="utf-8") as handle, ThreadPoolExecutor(max_workers=workers) as pool:
            for judgment in pool.map(one, todo):  # written in order as they complete
                try:
                    handle.write(judgment.model_dump_json() + "\n")
                    handle.flush()
                except OSError as exc:
                    raise write_failed(path, exc) from exc
    finally:
        judge.close()


def add_judgments(config: RunConfig, rows: list[RowSummary]) -> None:
    """Put ``judge`` / ``judge_std`` (and per type ``judge``) into the rows, from this judge's verdicts."""
    if config.judge is None:
        return
    judge_id = judge_fingerprint(config.judge)
    by_row: dict[tuple[str, str, str | None], list[Judgment]] = defaultdict(list)
    for judgment in read_judgments(Path(config.out)):
        if judgment.judge == judge_id and (judgment.correct is not None or judgment.score is not None):
            by_row[(judgment.backend, judgment.reader, judgment.fingerprint)].append(judgment)
    for row in rows:
        verdicts = by_row.get((row.backend, row.reader, row.fingerprint))
        if not verdicts:
            continue
        per_run = _per_run(verdicts)
        row.metrics["judge"] = statistics.fmean(per_run)
        row.metrics["judge_std"] = statistics.pstdev(per_run) if len(per_run) > 1 else 0.0
        by_type: dict[str, list[Judgment]] = defaultdict(list)
        for verdict in verdicts:
            by_type[verdict.question_type].append(verdict)
        for question_type, group in by_type.items():
            row.metrics_per_type.setdefault(question_type, {})["judge"] = statistics.fmean(_per_run(group))
        row.settings = {**row.settings, "judge": {"fingerprint": judge_id, **judge_settings(config.judge)}}


def _per_run(verdicts: list[Judgment]) -> list[float]:
    runs: dict[int, list[float]] = defaultdict(list)
    for verdict in verdicts:
        runs[verdict.run].append(verdict.score if verdict.score is not None else float(bool(verdict.correct)))
    return [sum(v) / len(v) for _, v in sorted(runs.items())]
