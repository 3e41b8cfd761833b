"""PersonaMem-v2 loader on snapshots the tests build in the released text layout: both sizes, every
quirk of the release, and every error case with its message."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from personamem_v2_helpers import ITEMS, STAMPS, benchmark_rows, write_csv, write_snapshot

from memlab.datasets import load_dataset
from memlab.datasets.personamem_v2 import (
    COLUMNS,
    RECALL_SUFFIX,
    distance_bin,
    load_personamem_v2,
    option_seed,
    parse_spec,
)
from memlab.errors import DataFormatError, DatasetUnavailableError, MemlabError


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return write_snapshot(tmp_path / "snap")


@pytest.mark.parametrize("size", ["32k", "128k"])
def test_loads_both_sizes_with_one_replay_per_history(snapshot: Path, size: str):
    dataset = load_dataset(f"personamem-v2:{size}:{snapshot}")
    assert dataset.name == f"personamem-v2-{size}"
    assert len(dataset.questions) == 2 * len(ITEMS) and len(dataset.histories) == 2
    stem = f"chat_history_{STAMPS[size]}_persona887"
    history = dataset.histories[stem]
    raw = json.loads((snapshot / f"data/chat_history_{size}/{stem}.json").read_text())["chat_history"]
    # every message kept, in order, system persona first; one session, no timestamps
    assert [(m.role, m.content) for m in history.messages] == [(m["role"], m["content"]) for m in raw]
    assert history.session_starts == [0] and history.messages[0].role == "system"
    for question in dataset.questions_for(stem):
        assert question.end_index == len(history.messages)  # asked after the whole history
        assert question.persona_id == "887"


def test_cells_are_read_as_the_release_writes_them(snapshot: Path):
    dataset = load_personamem_v2(f"32k:{snapshot}")
    rows = benchmark_rows([887, 12])
    for number, (row, question) in enumerate(zip(rows, dataset.questions), start=1):
        content = eval(row["user_query"])["content"]  # the cell is a Python dict literal
        assert question.text == content and question.id == f"p{row['persona_id']}-r{number}"
        wrong = json.loads(row["incorrect_answers"])
        assert sorted(question.options) == sorted([row["correct_answer"], *wrong])
        assert question.options[question.answer] == row["correct_answer"] == question.answer_text
        assert question.type == row["pref_type"] and question.topic == row["topic_query"]
        fields = question.metadata["fields"]
        assert fields["updated"] == row["updated"] and fields["sensitive_info"] == row["sensitive_info"]
        assert question.metadata["updated"] is (row["updated"] == "True")
        assert fields["who"] == row["who"] and fields["conversation_scenario"] == row["conversation_scenario"]
        assert fields["topic_preference"] == row["topic_preference"]
        distance = int(row["distance_from_related_snippet_to_query_32k"])
        assert question.distance_tokens == distance
        assert fields["distance_from_related_snippet_to_query_32k"] == distance_bin(distance)
        assert question.metadata["preference"] == row["preference"]


def test_option_order_is_the_documented_deterministic_shuffle(snapshot: Path):
    first = load_personamem_v2(f"32k:{snapshot}")
    again = load_personamem_v2(f"128k:{snapshot}")
    rows = benchmark_rows([887, 12])
    for row, question, other in zip(rows, first.questions, again.questions):
        content = eval(row["user_query"])["content"]
        options = [row["correct_answer"], *json.loads(row["incorrect_answers"])]
        random.Random(option_seed(row["persona_id"], content + RECALL_SUFFIX)).shuffle(options)
        assert question.options == options == other.options  # same order for both sizes, every load
    assert distance_bin(0) == "0-1023" and distance_bin(1024) == "1024-2047" and distance_bin(2047) == "1024-2047"


def test_evidence_points_at_the_snippet_in_the_history(snapshot: Path):
    dataset = load_personamem_v2(f"128k:{snapshot}")
    for question in dataset.questions:
        history = dataset.histories[question.context_id]
        if question.type == "sensitive_info":  # its block is not in the histories (as in the release)
            assert question.evidence == []
            continue
        (evidence,) = question.evidence
        message = history.messages[int(evidence[1:])]
        assert message.role == "user" and f"(persona {question.persona_id})" in message.content


def test_quirks_are_kept_and_reported_not_fatal(snapshot: Path):
    dataset = load_personamem_v2(f"32k:{snapshot}")
    text = "\n".join(str(issue) for issue in dataset.issues)
    assert "stray key(s) Sure! Here is; kept role and content only" in text
    assert "empty assistant reply, kept" in text
    history = next(iter(dataset.histories.values()))
    assert history.messages[-1].role == "assistant" and history.messages[-1].content == ""
    # an ask-to-forget block ends with the user's turn: consecutive user messages stay as they are
    roles = [m.role for m in history.messages]
    assert any(a == b == "user" for a, b in zip(roles, roles[1:]))


def _rewrite(snapshot: Path, mutate) -> None:
    rows = benchmark_rows([887, 12])
    mutate(rows)
    write_csv(snapshot / "benchmark/text/benchmark.csv", rows)


def test_missing_history_file_is_an_error_naming_file_row_and_field(snapshot: Path):
    missing = snapshot / f"data/chat_history_32k/chat_history_{STAMPS['32k']}_persona12.json"
    missing.unlink()
    with pytest.raises(DataFormatError) as info:
        load_personamem_v2(f"32k:{snapshot}")
    message = str(info.value)
    assert "benchmark.csv, row 5, field 'chat_history_32k_link'" in message
    assert f"{missing} not found" in message and "nothing loaded" in message
    load_personamem_v2(f"128k:{snapshot}")  # the other size is complete


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("user_query", "{'role': 'user', 'content': ", "row 2, field 'user_query': persona 887: neither JSON nor"),
        ("user_query", "{'role': 'assistant', 'content': 'x'}", "field 'user_query': persona 887: role 'assistant'"),
        ("incorrect_answers", '["only one"]', "field 'incorrect_answers': persona 887: expected 3 incorrect answers"),
        ("incorrect_answers", "['a', 'b', 'c']", "field 'incorrect_answers': persona 887: not a JSON list"),
        ("updated", "yes", "field 'updated': persona 887: 'yes' is not True or False"),
        ("sensitive_info", "", "field 'sensitive_info': persona 887: '' is not True or False"),
        ("pref_type", " ", "field 'pref_type': persona 887: empty"),
        ("distance_from_related_snippet_to_query_32k", "far", "is not a non-negative whole number"),
        ("related_conversation_snippet", "[{", "field 'related_conversation_snippet': persona 887: not a JSON list"),
        ("correct_answer", "", "field 'correct_answer': persona 887: empty"),
    ],
)
def test_bad_cells_are_errors_naming_file_row_and_field(snapshot: Path, column: str, value: str, expected: str):
    def mutate(rows):
        rows[1][column] = value

    _rewrite(snapshot, mutate)
    with pytest.raises(DataFormatError, match="1 problem") as info:
        load_personamem_v2(f"32k:{snapshot}")
    assert expected in str(info.value) and "benchmark.csv" in str(info.value)


def test_missing_column_is_an_error_naming_it(snapshot: Path):
    rows = benchmark_rows([887])
    write_csv(snapshot / "benchmark/text/benchmark.csv", rows, [c for c in COLUMNS if c != "who"])
    with pytest.raises(DataFormatError, match=r"missing column\(s\) who; header has 26 columns"):
        load_personamem_v2(f"32k:{snapshot}")
    write_csv(snapshot / "benchmark/text/benchmark.csv", rows, [c for c in COLUMNS if c != "chat_history_128k_link"])
    load_personamem_v2(f"32k:{snapshot}")  # a size needs only its own link column
    with pytest.raises(DataFormatError, match="chat_history_128k_link"):
        load_personamem_v2(f"128k:{snapshot}")


def test_broken_history_files_are_errors(snapshot: Path):
    path = snapshot / f"data/chat_history_32k/chat_history_{STAMPS['32k']}_persona887.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"row 1, field 'chat_history_32k_link'.*not valid JSON"):
        load_personamem_v2(f"32k:{snapshot}")
    path.write_text(json.dumps({"metadata": {}, "chat_history": [{"role": "robot", "content": "x"}]}))
    with pytest.raises(DataFormatError, match="message 0: role 'robot'"):
        load_personamem_v2(f"32k:{snapshot}")
    parts = [{"type": "text", "text": "hi"}]
    path.write_text(json.dumps({"metadata": {}, "chat_history": [{"role": "user", "content": parts}]}))
    with pytest.raises(DataFormatError, match="only the text release is supported"):
        load_personamem_v2(f"32k:{snapshot}")


def test_multimodal_release_is_refused(tmp_path: Path):
    rows = benchmark_rows([887])
    write_csv(tmp_path / "benchmark/multimodal/benchmark.csv", rows)
    with pytest.raises(DataFormatError, match="only the multimodal release.*supports the text release"):
        load_personamem_v2(f"32k:{tmp_path}")
    for row in rows:
        row["chat_history_32k_link"] = row["chat_history_32k_link"].replace(
            "chat_history_32k", "chat_history_multimodal_32k"
        )
    write_csv(tmp_path / "benchmark/text/benchmark.csv", rows)
    with pytest.raises(DataFormatError, match="multimodal history; only the text release"):
        load_personamem_v2(f"32k:{tmp_path}")


def test_specs_and_missing_snapshot(tmp_path: Path):
    assert parse_spec("128k").size == "128k" and parse_spec("32k:/x").root == Path("/x")
    with pytest.raises(MemlabError, match="unknown size '1m'"):
        load_dataset("personamem-v2:1M")
    with pytest.raises(MemlabError, match="give the snapshot folder"):
        load_dataset("personamem-v2:32k:")
    with pytest.raises(DatasetUnavailableError, match="does not exist"):
        load_dataset(f"personamem-v2:32k:{tmp_path / 'nope'}")
    with pytest.raises(DatasetUnavailableError, match="benchmark/text/benchmark.csv not found"):
        load_dataset(f"personamem-v2:32k:{tmp_path}")


def test_download_offline_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("personamem-v2:32k")
    message = str(info.value)
    assert "PersonaMem-v2 32k is not in" in message and "HF_HUB_OFFLINE=1 is set" in message
    assert "huggingface.co/datasets/bowen-upenn/PersonaMem-v2" in message


def test_download_fetches_only_the_missing_linked_histories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """With the CSV present, exactly the histories it links for the size and lacks are fetched."""
    root = write_snapshot(tmp_path / "personamem-v2")
    (root / f"data/chat_history_32k/chat_history_{STAMPS['32k']}_persona12.json").rename(tmp_path / "held.json")
    fetched: list[str] = []

    def fake_download(repo_id, name, target, *, what, advice):
        assert repo_id == "bowen-upenn/PersonaMem-v2"
        fetched.append(name)
        (tmp_path / "held.json").rename(Path(target) / name)
        return Path(target) / name

    monkeypatch.setenv("MEMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr("memlab.datasets.personamem_v2.hub_download", fake_download)
    dataset = load_dataset("personamem-v2:32k")
    assert fetched == [f"data/chat_history_32k/chat_history_{STAMPS['32k']}_persona12.json"]
    assert len(dataset.questions) == 2 * len(ITEMS)
