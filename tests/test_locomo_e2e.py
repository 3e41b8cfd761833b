"""LoCoMo end to end through ``memlab run`` against a local OpenAI-compatible server that records
every request (127.0.0.1 only), on the LoCoMo dev file:

- every category-5 prompt of the ``locomo`` reader offers "Not mentioned in the conversation", and a
  reply naming that option scores F1 1;
- every context sent, for every built-in backend, carries the session dates of what it shows;
- the answers judged with mem0's judge over the same server give a per-category table with mean
  and std over judge runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlab.cli import main
from memlab.datasets.locomo import load_locomo
from memlab.eval.judge import ACCURACY_PROMPT, create_judge, judge_run_scores, judge_summary
from memlab.memory import format_date
from memlab.readers.locomo import NOT_MENTIONED
from memlab.testing.recording_server import RecordingServer
from memlab.types import Question

CONTEXT = "conv-30"
MAX_QUESTIONS = 8  # the first 8 of conv-30 in replay order hold 5 category-5 questions


@pytest.fixture(scope="module")
def asked(locomo_dev: Path) -> list[Question]:
    return load_locomo(locomo_dev).questions_for(CONTEXT)[:MAX_QUESTIONS]


def reply(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    if "Select the correct answer: (a) " in content:
        # name the "Not mentioned" option by its letter only, as a terse model would
        return "a" if f"(a) {NOT_MENTIONED}" in content else "b"
    if content.startswith("\nYour task is to label an answer"):
        return '{"label": "CORRECT"}'
    return "7 May 2023"


def _run(locomo_dev: Path, out: Path, server: RecordingServer, backend: str, *extra: str) -> list[dict[str, Any]]:
    args = [
        "run",
        "--dataset",
        f"locomo:{locomo_dev}",
        "--backends",
        backend,
        "--reader",
        "locomo",
        "--contexts",
        CONTEXT,
        "--max-questions",
        str(MAX_QUESTIONS),
        "--no-controls",
        "--no-plots",
        "--no-progress",
        "--out",
        str(out),
        *extra,
    ]
    for key, value in server.llm_settings().items():
        args += [f"--llm.{key.replace('_', '-')}", str(value)]
    assert main(args) == 0
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def _prompt_of(question: Question, prompts: list[str]) -> str:
    matching = [p for p in prompts if f"Question: {question.text}" in p]
    assert len(matching) == 1, f"{question.id}: {len(matching)} prompts ask it"
    return matching[0]


@pytest.mark.data
def test_every_adversarial_prompt_offers_not_mentioned(locomo_dev: Path, asked: list[Question], tmp_path: Path) -> None:
    with RecordingServer(reply) as server:
        rows = _run(locomo_dev, tmp_path / "run", server, "full_context")
    prompts = server.contents()
    assert len(prompts) == len(asked) == MAX_QUESTIONS
    adversarial = [q for q in asked if q.metadata["category"] == 5]
    assert len(adversarial) == 5
    for question in asked:
        prompt = _prompt_of(question, prompts)
        offers = f"(a) {NOT_MENTIONED} (b) " in prompt or f" (b) {NOT_MENTIONED}. " in prompt
        assert offers == (question.metadata["category"] == 5), question.id
        assert prompt.startswith("Below is a conversation between two people: Jon and Gina.")
    by_id = {row["question_id"]: row for row in rows}
    for question in adversarial:
        row = by_id[question.id]
        assert row["predicted_text"] == NOT_MENTIONED and row["metrics"]["f1"] == 1.0
        assert row["question_type"] == "adversarial"
    orders = {"(a) " + NOT_MENTIONED in _prompt_of(q, prompts) for q in adversarial}
    assert orders == {True, False}  # the option order varies between questions


def _session_dates(locomo_dev: Path) -> dict[int, str]:
    """message index -> the rendered date of its session, for conv-30."""
    history = load_locomo(locomo_dev).histories[CONTEXT]
    return {i: format_date(m.timestamp) for i, m in enumerate(history.messages) if m.timestamp}


@pytest.mark.data
@pytest.mark.parametrize(
    "backend, extra",
    [
        ("full_context", ()),
        ("rag", ("--rag.embedder", "hashing")),
        ("mem0", ("--mem0.embedder", "hashing")),
        ("profile", ("--profile.embedder", "hashing")),
    ],
)
def test_every_context_carries_the_session_dates(
    locomo_dev: Path, asked: list[Question], tmp_path: Path, backend: str, extra: tuple[str, ...]
) -> None:
    with RecordingServer(reply) as server:
        rows = _run(locomo_dev, tmp_path / backend, server, backend, *extra)
    prompts = server.contents()
    dates = _session_dates(locomo_dev)
    by_id = {row["question_id"]: row for row in rows}
    for question in asked:
        prompt = _prompt_of(question, prompts)
        retrieved = by_id[question.id]["retrieved_messages"]
        assert retrieved, f"{backend} returned nothing for {question.id}"
        wanted = {dates[i] for i in retrieved}
        # as memlab.memory.format_date writes it: a DATE: header (render_turns) or a dated fact line
        missing = sorted(d for d in wanted if d not in prompt)
        assert not missing, f"{backend}: the context for {question.id} lacks the dates {missing[:3]}"


@pytest.mark.data
def test_judged_report_with_runs(locomo_dev: Path, asked: list[Question], tmp_path: Path) -> None:
    with RecordingServer(reply) as server:
        rows = _run(locomo_dev, tmp_path / "run", server, "full_context")
        judge = create_judge("mem0", server.llm_settings(), cache_dir=tmp_path / "judge")
        questions = {q.id: q for q in asked}
        judged = judge.run_metrics_many([(questions[r["question_id"]], r["predicted_text"]) for r in rows], runs=3)
        judge.close()
    judge_requests = [c for c in server.contents() if c.startswith("\nYour task is to label")]
    answerable = [q for q in asked if q.metadata["category"] != 5]
    assert len(judge_requests) == 3 * len(answerable)  # category 5 is not judged; 3 runs each
    for question in answerable:
        expected = ACCURACY_PROMPT.format(
            question=question.text, gold_answer=question.answer_text, generated_answer="7 May 2023"
        )
        assert judge_requests.count(expected) == 3
    mean, std = judge_summary(judge_run_scores(judged, runs=3))
    assert (mean, std) == (1.0, 0.0)
    f1 = {
        q.id: r["metrics"]["f1"]
        for q, r in zip(asked, sorted(rows, key=lambda r: [q.id for q in asked].index(r["question_id"])))
    }
    print(f"\njudge (mem0-accuracy-v1, 3 runs): {mean:.3f} +- {std:.3f}; F1 by question: {json.dumps(f1)}")


def record(locomo_dev: Path, out: Path) -> None:
    """The run docs/locomo.md's table is generated from: ``full_context`` read by the ``locomo`` reader
    and judged by mem0's judge (3 runs), every request answered by ``reply`` above."""
    with RecordingServer(reply) as server:
        _run(locomo_dev, out, server, "full_context", "--judge", "mem0", "--judge-runs", "3")


if __name__ == "__main__":  # python tests/test_locomo_e2e.py LOCOMO_DEV_FILE OUT_DIR
    import sys

    record(Path(sys.argv[1]), Path(sys.argv[2]))
