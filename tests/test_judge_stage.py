"""The judge stage of ``memlab run`` (``--judge``, ``--judge-runs``) on a small LoCoMo file: verdicts
resumable in judgments.jsonl, ``judge``/``judge_std`` in summary rows, category 5 left out by the
mem0 judge, the judge's LLM defaulting to the reader's, and LoCoMo's F1 with and without category 5."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import run_helpers

from memlab.cli import main
from memlab.llm.base import ChatMessage
from memlab.results import RunSummary
from memlab.run.judging import JUDGMENTS_FILE, read_judgments
from memlab.testing.fake_llm import HashChoiceLLM, serve


def locomo_file(tmp_path: Path) -> Path:
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "9:05 am on 3 January, 2024",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "I grew tomatoes in my garden."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "I moved to Lisbon last year."},
            ],
        },
        "qa": [
            {"question": "What is Ann's cat called?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
            {"question": "Where does Ann live?", "answer": "Lisbon", "evidence": ["D1:3"], "category": 4},
            {"question": "What did Bob grow?", "answer": "tomatoes", "evidence": ["D1:2"], "category": 4},
            {"question": "What did Ann grow?", "adversarial_answer": "tomatoes", "evidence": ["D1:2"], "category": 5},
        ],
    }
    path = tmp_path / "locomo-small.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def reply(messages: list[ChatMessage]) -> str:
    text = "\n".join(m.content for m in messages)
    if "CORRECT" in text and "WRONG" in text:  # a judge prompt
        right = "Gold answer: Miso" in text  # the generated answer is always "Miso"
        return json.dumps({"reason": "r", "label": "CORRECT" if right else "WRONG"})
    return "Miso"


@pytest.fixture
def server():
    srv = serve(HashChoiceLLM(reply=reply), model_id="fake")
    yield srv
    srv.stop()


def run_args(path: Path, out: Path, server: Any, *more: str) -> list[str]:
    """``memlab run`` of full_context (and the controls) with the llm reader on the LoCoMo file at ``path``."""
    reader = run_helpers.llm_reader_args(server.base_url, "fake")
    return run_helpers.run_args(out, *reader, *more, dataset=f"locomo:{path}", backends="full_context")


def test_memlab_judge_in_the_pipeline(tmp_path: Path, server: Any) -> None:
    path, out = locomo_file(tmp_path), tmp_path / "run"
    assert main(run_args(path, out, server, "--judge", "memlab")) == 0
    summary = RunSummary.load(out)
    row = summary.row("full_context")
    # The reader always says "Miso": right for the cat, wrong for Lisbon and tomatoes, and not an
    # abstention for the adversarial question.
    assert row.metrics["f1"] == pytest.approx(1 / 4) and row.metrics["f1_no_adversarial"] == pytest.approx(1 / 3)
    assert row.metrics["judge"] == pytest.approx(1 / 4) and row.metrics["judge_std"] == 0.0
    assert summary.config["judge"]["llm"]["base_url"] == server.base_url  # defaulted to the reader's LLM
    judged = read_judgments(out)
    assert len([j for j in judged if j.backend == "full_context"]) == 4
    # Resumable: a rerun judges nothing again.
    assert main(run_args(path, out, server, "--judge", "memlab")) == 0
    assert len(read_judgments(out)) == len(judged)


class FakeJudge:
    """A judge whose runs disagree (the real one is deterministic at temperature 0)."""

    def __init__(self, prompt: str, llm_config: Any = None, **_: Any) -> None:
        self.prompt_name = prompt

    def applies_to(self, question: Any) -> bool:
        return question.type != "adversarial"

    def judge(self, question: Any, answer: str | None, *, run: int = 0) -> dict[str, Any]:
        # Run 0 accepts only the cat, run 1 also Lisbon: runs differ, so the std is not 0.
        right = question.answer_text == "Miso" or (run == 1 and question.answer_text == "Lisbon")
        return {"correct": right, "prompt_tokens": 1, "completion_tokens": 1}

    def close(self) -> None:
        pass


def test_mem0_judge_runs_give_mean_and_std(
    tmp_path: Path, server: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import memlab.eval.judge

    monkeypatch.setattr(memlab.eval.judge, "create_judge", FakeJudge)
    path, out = locomo_file(tmp_path), tmp_path / "run"
    assert main(run_args(path, out, server, "--judge", "mem0", "--judge-runs", "2", "--judge.model", "judge-m")) == 0
    row = RunSummary.load(out).row("full_context")
    assert row.metrics["judge"] == pytest.approx((1 / 3 + 2 / 3) / 2)  # category 5 left out
    assert row.metrics["judge_std"] == pytest.approx(1 / 6)
    assert {j.run for j in read_judgments(out)} == {0, 1}
    assert all(j.question_type != "adversarial" for j in read_judgments(out))
    report = (out / "report.md").exists() or main(["report", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert report and "judge: mem0 prompt, 2 run(s), judge-m" in text and "F1 without adversarial (cat. 5)" in text
    # Another judge model is another judge: its verdicts never mix with these.
    before = len(read_judgments(out))
    assert main(run_args(path, out, server, "--judge", "mem0", "--judge-runs", "2", "--judge.model", "other")) == 0
    assert len(read_judgments(out)) == 2 * before


def test_judge_options_need_a_judge(tmp_path: Path, server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = locomo_file(tmp_path)
    assert main(run_args(path, tmp_path / "run", server, "--judge.model", "m")) == 2
    assert "--judge mem0|memlab" in capsys.readouterr().err
    assert not (tmp_path / "run" / JUDGMENTS_FILE).exists()
