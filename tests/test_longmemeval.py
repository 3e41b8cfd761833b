"""LongMemEval: loader on a fixture written in the released layout, evidence recall, abstention,
the offline download message, the answer prompt and the per-type judge; one run end to end."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memlab.datasets import load_dataset
from memlab.datasets.longmemeval import HF_REPO, load_longmemeval, parse_longmemeval_date
from memlab.errors import DataFormatError, DatasetUnavailableError
from memlab.eval.answers import score_open_answer
from memlab.eval.judge import LONGMEMEVAL_ABSTENTION, LONGMEMEVAL_TEMPORAL, LLMJudge
from memlab.eval.retrieval import evidence_to_indexes, score_retrieval
from memlab.llm.base import LLM, ChatMessage, LLMResponse
from memlab.memory import turn_source
from memlab.readers.longmemeval import ANSWER_PROMPT_COT, ANSWER_PROMPT_DIRECT, LongMemEvalReader
from memlab.types import MemoryItem, Retrieval
from memlab_plugins.rag import RagMemory


# --------------------------------------------------------------------------- fixture generator
def _turn(role: str, content: str, has_answer: bool = False) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": role, "content": content}
    if has_answer:
        turn["has_answer"] = True
    return turn


def _entry(
    qid: str,
    qtype: str,
    question: str,
    answer: Any,
    sessions: list[tuple[str, str, list[dict]]],
    answer_sessions: list[str],
    question_date: str = "2023/05/30 (Tue) 23:40",
) -> dict[str, Any]:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "answer": answer,
        "question_date": question_date,
        "haystack_session_ids": [s[0] for s in sessions],
        "haystack_dates": [s[1] for s in sessions],
        "haystack_sessions": [s[2] for s in sessions],
        "answer_session_ids": answer_sessions,
    }


FILLER = [_turn("user", "Can you suggest a pasta recipe?"), _turn("assistant", "Try cacio e pepe with pecorino.")]


def longmemeval_entries() -> list[dict[str, Any]]:
    """Five questions in the released layout (keys, date format, has_answer, _abs ids)."""
    return [
        _entry(
            "e47becba",
            "single-session-user",
            "What degree did I graduate with?",
            "Business Administration",
            [
                ("sharegpt_a_0", "2023/05/20 (Sat) 02:21", FILLER),
                (
                    "answer_e47becba_1",
                    "2023/05/22 (Mon) 10:05",
                    [
                        _turn(
                            "user",
                            "I graduated with a degree in Business Administration, so budgeting is my thing.",
                            True,
                        ),
                        _turn("assistant", "Great, let us plan your budget."),
                    ],
                ),
            ],
            ["answer_e47becba_1"],
        ),
        # oracle-style: sessions not in date order; one answer session has no marked turn
        _entry(
            "gpt4_2655b836",
            "temporal-reasoning",
            "How many days passed between my two trips?",
            18,
            [
                (
                    "answer_2655b836_2",
                    "2023/04/19 (Wed) 08:00",
                    [
                        _turn("user", "Just back from Oslo, the second trip this spring."),
                        _turn("assistant", "Welcome back!"),
                    ],
                ),
                (
                    "answer_2655b836_1",
                    "2023/04/01 (Sat) 09:30",
                    [
                        _turn("user", "Flying to Rome today for my first trip.", True),
                        _turn("assistant", "Enjoy Rome."),
                    ],
                ),
            ],
            ["answer_2655b836_1", "answer_2655b836_2"],
        ),
        _entry(
            "6a1eabeb",
            "knowledge-update",
            "Where do I live now?",
            "Lisbon",
            [
                (
                    "answer_6a1eabeb_1",
                    "2023/01/10 (Tue) 12:00",
                    [_turn("user", "I live in Porto.", True), _turn("assistant", "Nice.")],
                ),
                (
                    "answer_6a1eabeb_2",
                    "2023/03/02 (Thu) 12:00",
                    [_turn("user", "I moved to Lisbon last week.", True), _turn("assistant", "Congrats.")],
                ),
            ],
            ["answer_6a1eabeb_1", "answer_6a1eabeb_2"],
        ),
        _entry(
            "0a995998_abs",
            "multi-session",
            "How many guitars do I own?",
            "The information provided is not enough. You mentioned owning a piano but not a guitar.",
            [
                (
                    "sharegpt_b_0",
                    "2023/02/01 (Wed) 18:00",
                    [_turn("user", "I practise the piano daily."), _turn("assistant", "Keep it up.")],
                ),
            ],
            [],
        ),
        _entry(
            "pref_1",
            "single-session-preference",
            "Any tips for dinner tonight?",
            "The user would prefer vegetarian suggestions.",
            [
                (
                    "answer_pref_1",
                    "2023/05/01 (Mon) 19:00",
                    [_turn("user", "I am vegetarian.", True), _turn("assistant", "Noted.")],
                ),
            ],
            ["answer_pref_1"],
        ),
    ]


def write_longmemeval_fixture(path: Path, entries: list[dict[str, Any]] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries if entries is not None else longmemeval_entries()), encoding="utf-8")
    return path


@pytest.fixture
def fixture_file(tmp_path: Path) -> Path:
    return write_longmemeval_fixture(tmp_path / "longmemeval_oracle.json")


# --------------------------------------------------------------------------- loader
def test_loader_replays_each_question_as_its_own_history(fixture_file: Path) -> None:
    data = load_dataset(f"longmemeval:{fixture_file}")
    assert data.name == "longmemeval" and data.issues == []
    assert sorted(data.histories) == sorted(["e47becba", "gpt4_2655b836", "6a1eabeb", "0a995998_abs", "pref_1"])
    assert len(data.questions) == 5
    for question in data.questions:
        history = data.histories[question.context_id]
        assert question.context_id == question.id and question.end_index == len(history.messages)
        assert question.options == [] and question.metadata["question_type"] == question.type
        assert all(m.timestamp is not None for m in history.messages)
    by_id = {q.id: q for q in data.questions}
    first = data.histories["e47becba"]
    assert [m.role for m in first.messages] == ["user", "assistant", "user", "assistant"]
    assert first.messages[2].timestamp == datetime(2023, 5, 22, 10, 5)
    assert [s["session_id"] for s in first.session_metadata] == ["sharegpt_a_0", "answer_e47becba_1"]
    assert first.session_starts == [0, 2]
    assert by_id["e47becba"].metadata["question_date"] == "2023/05/30 (Tue) 23:40"
    assert by_id["e47becba"].metadata["question_timestamp"] == "2023-05-30T23:40:00"
    assert by_id["gpt4_2655b836"].answer_text == "18"  # ints in the release become text
    # the oracle file does not sort sessions: the replay goes in date order
    trips = data.histories["gpt4_2655b836"]
    assert [s["session_id"] for s in trips.session_metadata] == ["answer_2655b836_1", "answer_2655b836_2"]
    assert trips.messages[0].content.startswith("Flying to Rome")


def test_evidence_from_has_answer_turns_and_answer_sessions(fixture_file: Path) -> None:
    data = load_longmemeval(fixture_file)
    by_id = {q.id: q for q in data.questions}
    history = data.histories["e47becba"]
    assert evidence_to_indexes(history, by_id["e47becba"]) == [2]
    assert "Business Administration" in history.messages[2].content
    # the second trip's session has no marked turn: all of it is evidence, with the marked Rome turn
    trips = data.histories["gpt4_2655b836"]
    assert [trips.messages[i].content[:10] for i in evidence_to_indexes(trips, by_id["gpt4_2655b836"])] == [
        "Flying to ",
        "Just back ",
        "Welcome ba",
    ]
    assert by_id["6a1eabeb"].evidence == ["m0", "m2"]


def test_evidence_recall_with_a_real_retriever(fixture_file: Path) -> None:
    data = load_longmemeval(fixture_file)
    question = next(q for q in data.questions if q.id == "e47becba")
    history = data.histories["e47becba"]
    memory = RagMemory({"embedder": "hashing", "top_k": 2})
    for session, _ in history.slices(0, len(history.messages)):
        memory.ingest(session, user_id="u")
    retrieval = memory.retrieve("I graduated with a degree in Business Administration", user_id="u")
    metrics = score_retrieval(history, question, retrieval)
    assert metrics["recall@1"] == 1.0 and metrics["mrr"] == 1.0
    # an item from the filler session only: recall 0, a real zero
    session = next(history.slices(0, 2))[0]
    filler = Retrieval(
        items=[MemoryItem(id="x", text="pasta", score=1.0, source=turn_source(session, 0, session.messages[0]))]
    )
    assert score_retrieval(history, question, filler)["recall@5"] == 0.0
    memory.close()


def test_abstention_questions(fixture_file: Path) -> None:
    data = load_longmemeval(fixture_file)
    question = next(q for q in data.questions if q.id == "0a995998_abs")
    assert question.metadata["abstention"] is True and question.evidence == []
    assert score_retrieval(data.histories[question.id], question, Retrieval()) == {}  # nothing to find
    assert score_open_answer(question, "You never mentioned owning a guitar, so I don't know.") == {
        "f1": 1.0,
        "abstained": 1.0,
    }
    assert score_open_answer(question, "Three guitars.") == {"f1": 0.0, "abstained": 0.0}
    assert not next(q for q in data.questions if q.id == "e47becba").metadata["abstention"]


def test_bad_input_is_named(tmp_path: Path) -> None:
    entries = longmemeval_entries()
    del entries[0]["answer"]
    entries[1]["haystack_sessions"][0].append({"role": "tool", "content": "x"})
    entries[2]["haystack_dates"][0] = "someday"
    data = load_longmemeval(write_longmemeval_fixture(tmp_path / "a.json", entries))
    messages = [str(issue) for issue in data.issues]
    assert "e47becba" not in data.histories and len(data.questions) == 4
    assert any("row 0" in m and "missing answer" in m for m in messages)
    assert any("turn skipped" in m and "gpt4_2655b836" in m for m in messages)
    assert any("cannot parse date 'someday'" in m for m in messages)
    uneven = longmemeval_entries()
    uneven[0]["haystack_dates"].pop()
    with pytest.raises(DataFormatError, match=r"entry 0 \(e47becba\).*differ in length"):
        load_longmemeval(write_longmemeval_fixture(tmp_path / "b.json", uneven))
    with pytest.raises(DataFormatError, match="expected a list"):
        load_longmemeval(write_longmemeval_fixture(tmp_path / "c.json", {"x": 1}))  # type: ignore[arg-type]
    twice = longmemeval_entries()[:1] * 2
    with pytest.raises(DataFormatError, match="appears twice"):
        load_longmemeval(write_longmemeval_fixture(tmp_path / "d.json", twice))
    with pytest.raises(DatasetUnavailableError, match="not found"):
        load_dataset(f"longmemeval:{tmp_path / 'missing.json'}")


def test_released_variants_are_looked_up_then_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetUnavailableError) as failure:
        load_dataset("longmemeval:s")
    message = str(failure.value)
    assert "longmemeval_s_cleaned.json" in message and HF_REPO in message
    assert str(tmp_path / "longmemeval") in message and "HF_HUB_OFFLINE=1" in message
    assert "--dataset longmemeval:" in message
    # a file already there is used without any download
    write_longmemeval_fixture(tmp_path / "longmemeval" / "longmemeval_oracle.json")
    assert len(load_dataset("longmemeval:oracle").questions) == 5
    with pytest.raises(Exception, match="unknown LongMemEval variant"):
        from memlab.datasets.longmemeval import download_longmemeval

        download_longmemeval("xl")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2023/05/30 (Tue) 23:40", datetime(2023, 5, 30, 23, 40)),
        ("2023/05/30", datetime(2023, 5, 30)),
        ("May 30", None),
    ],
)
def test_parse_date(text: str, expected: datetime | None) -> None:
    assert parse_longmemeval_date(text) == expected


# --------------------------------------------------------------------------- reader and judge
class EchoLLM(LLM):
    name = "echo"

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float, max_tokens: int | None
    ) -> LLMResponse:
        self.calls.append({"content": messages[-1].content, "max_tokens": max_tokens, "temperature": temperature})
        return LLMResponse(text=" Business Administration. ", prompt_tokens=10, completion_tokens=3)


def test_reader_uses_longmemevals_answer_prompt(fixture_file: Path) -> None:
    question = next(q for q in load_longmemeval(fixture_file).questions if q.id == "e47becba")
    llm = EchoLLM()
    reader = LongMemEvalReader({"llm": {"cache": False}}, llm=llm)
    answer = reader.answer(question, Retrieval(context="DATE: 22 May 2023, 10:05\nuser: I graduated ..."))
    assert answer.text == "Business Administration."
    assert llm.calls[0] == {
        "content": ANSWER_PROMPT_COT.format(
            "DATE: 22 May 2023, 10:05\nuser: I graduated ...",
            "2023/05/30 (Tue) 23:40",
            "What degree did I graduate with?",
        ),
        "max_tokens": 800,
        "temperature": 0.0,
    }
    assert llm.calls[0]["content"].endswith("Question: What degree did I graduate with?\nAnswer (step by step):")
    direct = LongMemEvalReader({"llm": {"cache": False}, "cot": False}, llm=llm)
    direct.answer(question, Retrieval())
    assert llm.calls[1]["content"] == ANSWER_PROMPT_DIRECT.format(
        "(nothing remembered)", "2023/05/30 (Tue) 23:40", "What degree did I graduate with?"
    )
    assert llm.calls[1]["max_tokens"] == 500 and direct.describe() == "longmemeval:echo:direct"


def test_longmemeval_judge_on_loaded_questions(fixture_file: Path) -> None:
    questions = {q.id: q for q in load_longmemeval(fixture_file).questions}
    llm = EchoLLM()
    judge = LLMJudge(llm, prompt="longmemeval")
    assert all(judge.applies_to(q) for q in questions.values())
    judge.judge(questions["gpt4_2655b836"], "19 days")
    assert llm.calls[-1]["content"] == LONGMEMEVAL_TEMPORAL.format(
        "How many days passed between my two trips?", "18", "19 days"
    )
    judge.judge(questions["0a995998_abs"], "I don't know")
    assert llm.calls[-1]["content"].startswith(LONGMEMEVAL_ABSTENTION.split("{}")[0])
    assert LLMJudge(llm).applies_to(questions["0a995998_abs"])  # mem0's judge skips only LoCoMo's category 5


def test_run_end_to_end(fixture_file: Path, tmp_path: Path) -> None:
    from memlab.cli import main
    from memlab.testing.recording_server import RecordingServer

    with RecordingServer(lambda request: "Business Administration") as server:
        settings = server.llm_settings()
        args = [
            "run",
            "--dataset",
            f"longmemeval:{fixture_file}",
            "--backends",
            "full_context",
            "--reader",
            "longmemeval",
            "--no-controls",
            "--no-plots",
            "--no-progress",
            "--out",
            str(tmp_path / "run"),
        ]
        for key, value in settings.items():
            args += [f"--llm.{key.replace('_', '-')}", str(value)]
        assert main(args) == 0
    prompts = server.contents()
    assert len(prompts) == 5
    assert all(
        "Current Date: 2023/05/30 (Tue) 23:40" in p and p.startswith("I will give you several history chats")
        for p in prompts
    )
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    by_id = {row["question_id"]: row for row in rows}
    assert by_id["e47becba"]["metrics"]["recall@10"] == 1.0  # full_context hands back everything
    assert by_id["e47becba"]["metrics"]["f1"] == 1.0
    assert "recall@10" not in by_id["0a995998_abs"]["metrics"]  # abstention: no evidence to find


def test_a_longmemeval_file_given_as_locomo_says_so(fixture_file: Path) -> None:
    with pytest.raises(DataFormatError, match="looks like a LongMemEval file: use --dataset longmemeval:"):
        load_dataset(str(fixture_file))  # a bare .json path is read as LoCoMo
