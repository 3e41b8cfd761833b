"""LoCoMo loader: the real dev file (via shared_data) and small hand-made files for the edge cases."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from memlab.datasets import load_dataset
from memlab.datasets.locomo import (
    CATEGORIES,
    LOCOMO_URL,
    download_locomo,
    load_locomo,
    parse_locomo_datetime,
)
from memlab.errors import DataFormatError, DatasetUnavailableError
from memlab.eval.retrieval import evidence_to_indexes


@pytest.fixture(scope="module")
def dev(locomo_dev: Path):
    return load_locomo(locomo_dev)


# --------------------------------------------------------------------------- real dev file
@pytest.mark.data
def test_dev_file_counts(dev) -> None:
    assert sorted(dev.histories) == ["conv-26", "conv-30", "conv-41", "conv-42"]
    assert len(dev.questions) == 757
    assert Counter(q.type for q in dev.questions) == {
        "single-hop": 311,
        "adversarial": 173,
        "temporal": 130,
        "multi-hop": 111,
        "open-domain": 32,
    }
    conv = dev.histories["conv-26"]
    assert len(conv.messages) == 419
    assert len(conv.session_starts) == 19  # session_20..35 have date-times but no turns
    assert len(conv.session_metadata) == 19
    assert conv.metadata["speaker_a"] == "Caroline" and conv.metadata["speaker_b"] == "Melanie"


@pytest.mark.data
def test_dev_file_turns_and_sessions(dev, locomo_dev: Path) -> None:
    raw = json.loads(locomo_dev.read_text(encoding="utf-8"))
    for sample in raw:
        history = dev.histories[sample["sample_id"]]
        conv = sample["conversation"]
        dia_ids = history.metadata["dia_ids"]
        assert len(dia_ids) == len(history.messages)
        turns = [t for n in range(1, 100) for t in conv.get(f"session_{n}", []) or []]
        assert [t["dia_id"] for t in turns] == dia_ids
        for turn, message in zip(turns, history.messages):
            expected_role = "user" if turn["speaker"] == conv["speaker_a"] else "assistant"
            assert message.role == expected_role
            assert message.content.startswith(f"{turn['speaker']}: {turn['text'].strip()}")
            if turn.get("blip_caption"):
                assert message.content.endswith(f"[shares a photo: {turn['blip_caption'].strip()}]")
        # each session starts at its first turn and carries its date-time
        for number, start in enumerate(history.session_starts):
            meta = history.session_metadata[number]
            session_no = meta["session_number"]
            assert dia_ids[start] == f"D{session_no}:1"
            assert meta["date_time"] == conv[f"session_{session_no}_date_time"]
            assert history.messages[start].timestamp == parse_locomo_datetime(meta["date_time"])
    first = dev.histories["conv-26"].messages[0]
    assert first.timestamp == datetime(2023, 5, 8, 13, 56)
    assert first.content == "Caroline: Hey Mel! Good to see you! How have you been?"


@pytest.mark.data
def test_dev_file_questions(dev) -> None:
    by_id = {q.id: q for q in dev.questions}
    q = by_id["conv-26:q0"]
    assert q.text == "When did Caroline go to the LGBTQ support group?"
    assert q.answer_text == "7 May 2023" and q.type == "temporal" and q.options == []
    assert q.evidence == ["D1:3"] and q.context_id == "conv-26"
    assert by_id["conv-26:q1"].answer_text == "2022"  # ints in the file become text
    for question in dev.questions:
        history = dev.histories[question.context_id]
        assert question.end_index == len(history.messages)
        assert question.type == CATEGORIES[question.metadata["category"]] == question.metadata["category_name"]
        assert question.metadata["speakers"] == [history.metadata["speaker_a"], history.metadata["speaker_b"]]
    adversarial = by_id["conv-26:q167"]
    assert adversarial.type == "adversarial"
    assert adversarial.answer_text == "Yes"  # adversarial_answer: the trap
    assert adversarial.metadata["answer"] == "No" and adversarial.metadata["adversarial"] is True
    # evidence resolves to the turn it names
    history = dev.histories["conv-26"]
    indexes = evidence_to_indexes(history, q)
    assert [history.metadata["dia_ids"][i] for i in indexes] == ["D1:3"]
    assert "LGBTQ support group" in history.messages[indexes[0]].content


@pytest.mark.data
def test_dev_file_every_message_has_its_session_date(dev) -> None:
    # 115 of the 130 temporal gold answers are dates: the session date must reach every turn
    for history in dev.histories.values():
        assert all(message.timestamp is not None for message in history.messages)
        for number, start in enumerate(history.session_starts):
            stop = (
                history.session_starts[number + 1]
                if number + 1 < len(history.session_starts)
                else len(history.messages)
            )
            assert {m.timestamp for m in history.messages[start:stop]} == {
                parse_locomo_datetime(history.session_metadata[number]["date_time"])
            }


def test_category_tables_differ_where_documented() -> None:
    from memlab.datasets.locomo import MEM0_CATEGORY_NAMES

    differing = sorted(c for c, name in MEM0_CATEGORY_NAMES.items() if CATEGORIES[c] != name)
    assert differing == [1, 3, 4] and 5 not in MEM0_CATEGORY_NAMES


@pytest.mark.data
def test_dev_file_bad_evidence_is_reported(dev, locomo_dev: Path) -> None:
    issues = [(i.row, i.field, i.message) for i in dev.issues]
    assert all(i.file == str(locomo_dev) for i in dev.issues)
    assert (37, "evidence", "conv-26: evidence 'D8:6; D9:17' holds several ids; split") in issues
    assert (58, "evidence", "conv-42: evidence 'D10:19' names no turn of the conversation") in issues
    assert (88, "evidence", "conv-42: evidence 'D' names no turn of the conversation") in issues
    assert len(dev.issues) == 3
    by_id = {q.id: q for q in dev.questions}
    assert by_id["conv-26:q37"].evidence == ["D8:6", "D9:17"]
    assert "D10:19" not in by_id["conv-42:q58"].evidence
    # every evidence id left on a question resolves
    for question in dev.questions:
        history = dev.histories[question.context_id]
        assert len(evidence_to_indexes(history, question)) == len(question.evidence)


@pytest.mark.data
def test_load_dataset_dispatch(locomo_dev: Path) -> None:
    by_spec = load_dataset(f"locomo:{locomo_dev}")
    by_path = load_dataset(str(locomo_dev))
    assert by_spec.summary() == by_path.summary()
    assert by_spec.summary()["questions"] == 757 and by_spec.name == "locomo"


# --------------------------------------------------------------------------- hand-made files
def _sample(sample_id: str = "conv-x", **overrides) -> dict:
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "9:05 am on 3 January, 2024",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
            {
                "speaker": "Bob",
                "dia_id": "D1:2",
                "text": "Look at my garden!",
                "blip_caption": "a photo of tomatoes",
                "img_url": ["http://x"],
            },
        ],
        "session_2_date_time": "sometime in spring",
        "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "Back from Oslo."}],
        "session_3_date_time": "1:00 pm on 1 March, 2024",  # date-time with no turns, as in the release
    }
    conversation.update(overrides.pop("conversation", {}))
    sample = {
        "sample_id": sample_id,
        "conversation": conversation,
        "qa": [
            {"question": "What is Ann's cat called?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
            {"question": "What did Ann grow?", "adversarial_answer": "tomatoes", "evidence": ["D1:2"], "category": 5},
            {"question": "Where did Bob travel?", "answer": "Oslo", "evidence": ["D2:01", "D9:9"], "category": 1},
            {"question": "No answer here?", "evidence": [], "category": 2},
            {"question": "Odd category", "answer": "x", "evidence": [], "category": 9},
        ],
    }
    sample.update(overrides)
    return sample


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "locomo-small.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_small_file_mapping(tmp_path: Path) -> None:
    path = _write(tmp_path, [_sample()])
    dataset = load_locomo(path)
    history = dataset.histories["conv-x"]
    assert [m.role for m in history.messages] == ["user", "assistant", "assistant"]
    assert history.messages[1].content == "Bob: Look at my garden! [shares a photo: a photo of tomatoes]"
    assert history.session_starts == [0, 2]
    assert history.metadata["dia_ids"] == ["D1:1", "D1:2", "D2:1"]
    assert history.messages[0].timestamp == datetime(2024, 1, 3, 9, 5)
    assert history.messages[2].timestamp is None
    assert [q.id for q in dataset.questions] == ["conv-x:q0", "conv-x:q1", "conv-x:q2"]
    cat_five = dataset.questions[1]
    assert cat_five.type == "adversarial" and cat_five.answer_text == "tomatoes"
    assert dataset.questions[2].evidence == ["D2:1"]  # 'D2:01' normalised, 'D9:9' dropped
    fields = Counter((i.row, i.field) for i in dataset.issues)
    assert fields == {
        (0, "session_2_date_time"): 1,  # unparseable date-time
        (2, "evidence"): 1,
        (3, "answer"): 1,
        (4, "category"): 1,
    }
    assert all(str(path) in str(i) for i in dataset.issues)


def test_unknown_speaker_is_reported(tmp_path: Path) -> None:
    sample = _sample(conversation={"session_2": [{"speaker": "Cyd", "dia_id": "D2:1", "text": "hi"}]})
    dataset = load_locomo(_write(tmp_path, [sample]))
    issue = next(i for i in dataset.issues if i.field and i.field.endswith("speaker"))
    assert "Cyd" in issue.message and issue.field == "session_2[0].speaker"
    assert dataset.histories["conv-x"].messages[2].content == "Cyd: hi"


def test_broken_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="expected a list"):
        load_locomo(_write(tmp_path, {"not": "a list"}))
    with pytest.raises(DataFormatError, match="appears twice"):
        load_locomo(_write(tmp_path, [_sample(), _sample()]))
    with pytest.raises(DataFormatError, match="speaker_a and speaker_b"):
        load_locomo(_write(tmp_path, [_sample(conversation={"speaker_b": "Ann"})]))
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    with pytest.raises(DataFormatError, match="not valid JSON"):
        load_locomo(bad)
    with pytest.raises(DatasetUnavailableError, match="not found"):
        load_locomo(tmp_path / "missing.json")


def test_wrongly_shaped_entries_are_named_not_crashes(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"conversation 1: expected an object, got list"):
        load_locomo(_write(tmp_path, [_sample(), ["not", "a", "conversation"]]))
    with pytest.raises(DataFormatError, match=r"conv-x: session_2\[0\] must be an object, got str"):
        load_locomo(_write(tmp_path, [_sample(conversation={"session_2": ["Bob: hi"]})]))
    sample = _sample()
    sample["qa"].insert(0, "What is Ann's cat called?")
    dataset = load_locomo(_write(tmp_path, [sample]))
    assert len(dataset.questions) == 3  # the string is reported and skipped, the real questions stay
    issue = next(i for i in dataset.issues if i.field == "qa")
    assert issue.row == 0 and "got str" in issue.message


def test_directory_path_finds_locomo10(tmp_path: Path) -> None:
    (tmp_path / "locomo10.json").write_text(json.dumps([_sample()]), encoding="utf-8")
    assert list(load_locomo(tmp_path).histories) == ["conv-x"]


def test_offline_download_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLAB_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(DatasetUnavailableError) as info:
        load_locomo(None)  # sockets are blocked in tests: this is the offline path
    message = str(info.value)
    assert LOCOMO_URL in message
    assert str(tmp_path / "data" / "locomo" / "locomo10.json") in message
    assert not (tmp_path / "data" / "locomo" / "locomo10.json").exists()
    # once the file is where the message says, no download is attempted
    target = tmp_path / "data" / "locomo" / "locomo10.json"
    target.write_text(json.dumps([_sample()]), encoding="utf-8")
    assert download_locomo() == target
    assert load_dataset("locomo").summary()["questions"] == 3


def test_download_rejects_non_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html>captive portal</html>", encoding="utf-8")
    target = tmp_path / "out" / "locomo10.json"
    with pytest.raises(DatasetUnavailableError, match="JSONDecodeError"):
        download_locomo(target, url=page.as_uri())
    assert not target.exists()
    good = tmp_path / "good.json"
    good.write_text(json.dumps([_sample()]), encoding="utf-8")
    assert download_locomo(target, url=good.as_uri()) == target
    assert json.loads(target.read_text(encoding="utf-8"))[0]["sample_id"] == "conv-x"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("10:33 am on 9 April, 2023", datetime(2023, 4, 9, 10, 33)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("next Tuesday", None),
    ],
)
def test_parse_datetime(text: str, expected: datetime | None) -> None:
    assert parse_locomo_datetime(text) == expected


# --------------------------------------------------------------------------- benchmark script
def test_retrieval_benchmark_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_locomo_retrieval.py"
    spec = importlib.util.spec_from_file_location("bench_locomo_retrieval", script)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    data = _write(tmp_path, [_sample()])
    out = tmp_path / "run"
    bench.main(
        [
            "--data",
            str(data),
            "--out",
            str(out),
            "--backends",
            "rag,full_context,no_such_backend",
            "--rag.embedder",
            "hashing",
            "--no-progress",
            "--json",
            str(tmp_path / "table.json"),
        ]
    )
    printed = capsys.readouterr().out
    # 3 questions with evidence; rag's top-10 holds all 3 turns, so every evidence turn is found
    assert "| rag | all | 3 | " in printed and "| rag | all | 3 | 1.000 | 1.000 |" in printed
    assert "| full_context | all | 3 |" in printed
    assert "| no_such_backend | all | - | unavailable | unavailable | unavailable |" in printed
    assert "- no_such_backend: unavailable (UnknownNameError: unknown backend 'no_such_backend'" in printed
    table = json.loads((tmp_path / "table.json").read_text(encoding="utf-8"))
    assert table["results"]["rag"]["single-hop"]["n"] == 1.0
    assert set(table["unavailable"]) == {"no_such_backend"}
