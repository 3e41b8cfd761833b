"""PersonaMem loader: both layouts, malformed input, questions-only folders, size names, real files."""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from memlab.datasets import load_dataset
from memlab.datasets.personamem import load_personamem
from memlab.datasets.question_types import (
    ACKNOWLEDGE_LATEST,
    GENERALIZE,
    OLDER_128K_TYPES,
    RECALL_FACTS,
    RELEASED_TYPES,
    REVISIT_REASONS,
    canonical_type,
    type_mapping,
)
from memlab.errors import DataFormatError, DatasetUnavailableError, MemlabError

RELEASE_COLUMNS = [
    "persona_id",
    "question_id",
    "question_type",
    "topic",
    "context_length_in_tokens",
    "context_length_in_letters",
    "distance_to_ref_in_blocks",
    "distance_to_ref_in_tokens",
    "num_irrelevant_tokens",
    "distance_to_ref_proportion_in_context",
    "user_question_or_message",
    "correct_answer",
    "all_options",
    "shared_context_id",
    "end_index_in_shared_context",
]
DEV_COLUMNS = [
    "question_id",
    "question_type",
    "topic",
    "context_length_in_tokens",
    "context_length_in_letters",
    "distance_to_ref_in_blocks",
    "distance_to_ref_in_tokens",
    "distance_to_ref_proportion_in_context",
    "question",
    "correct_answer",
    "all_options",
    "shared_context_id",
    "end_index_in_shared_context",
    "num_irrelevant_tokens",
    "stereotypical",
]
OPTIONS = repr(["(a) Pizza.", "(b) Sushi.", "(c) Tacos.", "(d) Soup."])


def conversation(sessions: int = 2, pairs: int = 2) -> list[dict[str, str]]:
    messages = []
    for s in range(sessions):
        messages.append({"role": "system", "content": f"Current user persona: Ana. Session {s}."})
        for p in range(pairs):
            messages.append({"role": "user", "content": f"s{s} user {p}: I like pizza."})
            messages.append({"role": "assistant", "content": f"s{s} assistant {p}: noted."})
    return messages  # 2 sessions x 5 = 10 messages by default


def row(columns: list[str], **values: str) -> dict[str, str]:
    base = {
        "persona_id": "7",
        "question_id": "q1",
        "question_type": "track_full_preference_evolution",
        "topic": "food",
        "context_length_in_tokens": "120",
        "context_length_in_letters": "600",
        "distance_to_ref_in_blocks": "2",
        "distance_to_ref_in_tokens": "80",
        "num_irrelevant_tokens": "0",
        "distance_to_ref_proportion_in_context": "66.7%",
        "user_question_or_message": "What do I like?",
        "question": "What do I like?",
        "correct_answer": "(c)",
        "all_options": OPTIONS,
        "shared_context_id": "ctxA",
        "end_index_in_shared_context": "10",
        "stereotypical": "No",
    }
    base.update(values)
    return {c: base[c] for c in columns}


def write_csv(path: Path, columns: list[str], rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, contexts: dict[str, list]) -> Path:
    path.write_text("".join(json.dumps({k: v}) + "\n" for k, v in contexts.items()), encoding="utf-8")
    return path


@pytest.fixture
def release_folder(tmp_path: Path) -> Path:
    rows = [
        row(RELEASE_COLUMNS, question_id="q1"),
        row(
            RELEASE_COLUMNS,
            question_id="q2",
            question_type="recall_user_shared_facts",
            correct_answer="(a)",
            end_index_in_shared_context="5",
            shared_context_id="ctxB",
        ),
        row(
            RELEASE_COLUMNS,
            question_id="q3",
            question_type="recalling_facts_mentioned_by_the_user",
            correct_answer="(d)",
        ),
    ]
    write_csv(tmp_path / "questions_32k.csv", RELEASE_COLUMNS, rows)
    write_jsonl(tmp_path / "shared_contexts_32k.jsonl", {"ctxA": conversation(), "ctxB": conversation(1, 3)})
    return tmp_path


def test_release_layout(release_folder: Path) -> None:
    dataset = load_personamem(str(release_folder))
    assert dataset.name == "personamem-32k"
    assert dataset.source == str(release_folder / "questions_32k.csv")
    assert dataset.issues == []
    q1, q2, q3 = dataset.questions
    assert (q1.id, q1.type, q1.topic, q1.text) == ("q1", "track_full_preference_evolution", "food", "What do I like?")
    assert q1.options[0] == "(a) Pizza." and q1.answer == 2 and q1.answer_letter == "c"
    assert (q1.context_id, q1.end_index, q1.distance_blocks, q1.distance_tokens) == ("ctxA", 10, 2, 80)
    assert q1.persona_id == "7"
    assert q1.metadata["context_length_in_tokens"] == 120
    assert q1.metadata["distance_to_ref_proportion_in_context"] == pytest.approx(66.7)
    # Released labels are kept as they are: two types of one file are never merged or swapped.
    assert q2.type == "recall_user_shared_facts" == q2.metadata["raw_type"]
    assert q3.type == "recalling_facts_mentioned_by_the_user" == q3.metadata["raw_type"]
    assert q1.metadata["raw_options"].startswith("[") and "(a) Pizza." in q1.metadata["raw_options"]
    history = dataset.histories["ctxA"]
    assert len(history.messages) == 10 and history.session_starts == [0, 5]
    assert dataset.histories["ctxB"].session_starts == [0]
    assert [s.id for s, _ in history.slices(0, 7)] == ["ctxA:s0", "ctxA:s1"]


def test_dev_layout_uses_question_column_and_folder_name(tmp_path: Path) -> None:
    folder = tmp_path / "128k-dev"
    folder.mkdir()
    write_csv(
        folder / "questions.csv",
        DEV_COLUMNS,
        [
            row(
                DEV_COLUMNS,
                question="Dev spelling?",
                question_type="recalling_the_latest_user_preferences",
                stereotypical="Yes",
            ),
        ],
    )
    write_jsonl(folder / "shared_contexts.jsonl", {"ctxA": conversation()})
    dataset = load_personamem(folder)
    assert dataset.name == "personamem-128k-dev"
    (question,) = dataset.questions
    assert question.text == "Dev spelling?"
    assert question.type == "recalling_the_latest_user_preferences"  # the file's own (older) label
    assert question.persona_id is None and question.metadata["stereotypical"] is True
    assert dataset.issues == []


def test_csv_path_and_load_dataset_specs(release_folder: Path) -> None:
    by_csv = load_personamem(str(release_folder / "questions_32k.csv"))
    assert len(by_csv.histories) == 2 and len(by_csv.questions) == 3
    for spec in (
        f"personamem:{release_folder}",
        str(release_folder),
        f"personamem:{release_folder / 'questions_32k.csv'}",
    ):
        dataset = load_dataset(spec)
        assert dataset.name == "personamem-32k" and len(dataset.questions) == 3, spec


def test_malformed_rows_are_reported_and_the_rest_loads(tmp_path: Path) -> None:
    rows = [
        row(RELEASE_COLUMNS, question_id="good1"),  # 1
        row(RELEASE_COLUMNS, question_id="noanswer", correct_answer=""),  # 2 missing field
        row(RELEASE_COLUMNS, question_id="badopts", all_options="['(a) x', '(b) y'"),  # 3 unparseable
        row(RELEASE_COLUMNS, question_id="threeopts", all_options=repr(["(a) x", "(b) y", "(c) z"])),  # 4 count
        row(RELEASE_COLUMNS, question_id="badletter", correct_answer="(e)"),  # 5 answer letter
        row(RELEASE_COLUMNS, question_id="badend", end_index_in_shared_context="ten"),  # 6 end index
        row(RELEASE_COLUMNS, question_id="ghost1", shared_context_id="nope"),  # 7 unknown context
        row(RELEASE_COLUMNS, question_id="toofar", end_index_in_shared_context="11"),  # 8 past the end
        row(RELEASE_COLUMNS, question_id="good2", distance_to_ref_in_tokens="lots"),  # 9 soft issue
        row(RELEASE_COLUMNS, question_id="good1"),  # 10 duplicate id
        row(RELEASE_COLUMNS, question_id="ghost2", shared_context_id="nope"),  # 11 same context
        row(RELEASE_COLUMNS, question_id="atend", end_index_in_shared_context="10"),  # 12 fine (== length)
    ]
    questions = write_csv(tmp_path / "questions_32k.csv", RELEASE_COLUMNS, rows)
    with questions.open("a", newline="", encoding="utf-8") as handle:  # 13: a row with a field too many
        csv.writer(handle).writerow([*row(RELEASE_COLUMNS, question_id="extra").values(), "SURPLUS"])
    write_jsonl(tmp_path / "shared_contexts_32k.jsonl", {"ctxA": conversation()})

    dataset = load_personamem(tmp_path)

    assert [q.id for q in dataset.questions] == ["good1", "ghost1", "good2", "ghost2", "atend"]
    assert dataset.questions[2].distance_tokens is None
    found = {(i.row, i.field) for i in dataset.issues}
    assert found == {
        (2, "correct_answer"),
        (3, "all_options"),
        (4, "all_options"),
        (5, "correct_answer"),
        (6, "end_index_in_shared_context"),
        (7, "shared_context_id"),
        (8, "end_index_in_shared_context"),
        (9, "distance_to_ref_in_tokens"),
        (10, "question_id"),
        (13, None),
    }
    for issue in dataset.issues:
        assert issue.file == str(questions)
        assert "header not counted" in issue.message
    by_row = {i.row: i for i in dataset.issues}
    assert "found 3" in by_row[4].message
    assert "2 question(s)" in by_row[7].message  # the unknown context is reported once, not per question
    assert "past the end" in by_row[8].message and "10 messages" in by_row[8].message
    assert "row 7" in str(by_row[7])


def test_unknown_type_passes_through_with_one_issue(release_folder: Path) -> None:
    rows = [row(RELEASE_COLUMNS, question_id=f"q{i}", question_type="brand_new_type") for i in range(3)]
    write_csv(release_folder / "questions_32k.csv", RELEASE_COLUMNS, rows)
    dataset = load_personamem(release_folder)
    assert {q.type for q in dataset.questions} == {"brand_new_type"}
    (issue,) = dataset.issues
    assert issue.field == "question_type" and issue.row == 1 and "3 rows" in issue.message


def test_type_mapping_is_one_to_one_per_file() -> None:
    # Paper-named file: every label is its own paper type.
    mapping = type_mapping(["recall_user_shared_facts", "acknowledge_latest_user_preferences", "odd"])
    assert mapping == {
        "recall_user_shared_facts": RECALL_FACTS,
        "acknowledge_latest_user_preferences": ACKNOWLEDGE_LATEST,
        "odd": None,
    }
    # The release: both facts labels stay distinct; unshared older names may show as the paper's.
    release = type_mapping(RELEASED_TYPES)
    assert release["recall_user_shared_facts"] == "recall_user_shared_facts"
    assert release["recalling_facts_mentioned_by_the_user"] == "recalling_facts_mentioned_by_the_user"
    assert release["recalling_the_reasons_behind_previous_updates"] == REVISIT_REASONS
    assert release["generalizing_to_new_scenarios"] == GENERALIZE
    assert len(set(release.values())) == len(RELEASED_TYPES)
    # The older 128k file: the authors' own renaming (inference.py question_type_mapping).
    older = type_mapping(OLDER_128K_TYPES)
    assert older["recalling_facts_mentioned_by_the_user"] == RECALL_FACTS
    assert older["recalling_the_latest_user_preferences"] == ACKNOWLEDGE_LATEST
    assert len(set(older.values())) == len(OLDER_128K_TYPES)
    assert canonical_type("identifying_new_things_not_mentioned_by_the_user") == "suggest_new_ideas"
    assert canonical_type("recall_user_shared_facts") == RECALL_FACTS and canonical_type("odd") is None


def test_bad_messages_are_dropped_and_end_indexes_shifted(tmp_path: Path) -> None:
    messages = conversation()
    messages[2] = {"role": "tool", "content": "weird"}
    messages[7] = {"role": "user", "content": None}
    write_csv(
        tmp_path / "questions.csv",
        RELEASE_COLUMNS,
        [
            row(RELEASE_COLUMNS, question_id="early", end_index_in_shared_context="2"),
            row(RELEASE_COLUMNS, question_id="mid", end_index_in_shared_context="5"),
            row(RELEASE_COLUMNS, question_id="end", end_index_in_shared_context="10"),
        ],
    )
    contexts = tmp_path / "shared_contexts.jsonl"
    contexts.write_text(
        "this is not json\n"
        + json.dumps({"ctxA": messages})
        + "\n"
        + json.dumps({"ctxA": []})
        + "\n"
        + json.dumps(["not", "an", "object"])
        + "\n",
        encoding="utf-8",
    )
    dataset = load_personamem(tmp_path)
    history = dataset.histories["ctxA"]
    assert len(history.messages) == 8 and history.metadata["dropped_messages"] == [2, 7]
    assert [m.content for m in history.messages][:3] == [
        messages[0]["content"],
        messages[1]["content"],
        messages[3]["content"],
    ]
    assert {q.id: q.end_index for q in dataset.questions} == {"early": 2, "mid": 4, "end": 8}
    assert dataset.questions[1].metadata["raw_end_index"] == 5
    issues = {(i.row, i.field): i for i in dataset.issues}
    assert set(issues) == {(1, None), (2, "role"), (2, "content"), (3, None), (4, None)}
    assert all(i.file == str(contexts) and "line number" in i.message for i in dataset.issues)
    assert "message 2" in issues[(2, "role")].message and "'tool'" in issues[(2, "role")].message
    assert "already defined on line 2" in issues[(3, None)].message


def test_files_that_cannot_be_read_raise(tmp_path: Path) -> None:
    write_csv(tmp_path / "questions.csv", ["question_id", "question"], [{"question_id": "x", "question": "y"}])
    with pytest.raises(DataFormatError, match="questions.csv lacks column"):
        load_personamem(tmp_path)
    (tmp_path / "questions.csv").write_bytes(b"question_id,question\n\xff\xfe\xfa broken\n")
    with pytest.raises(DataFormatError, match="questions.csv"):
        load_personamem(tmp_path)
    (tmp_path / "questions.csv").write_text("", encoding="utf-8")
    with pytest.raises(DataFormatError, match="empty"):
        load_personamem(tmp_path)
    write_csv(tmp_path / "questions.csv", RELEASE_COLUMNS, [row(RELEASE_COLUMNS)])
    (tmp_path / "shared_contexts.jsonl").write_bytes(b'{"ctxA": [\xff]}\n')
    with pytest.raises(DataFormatError, match="shared_contexts.jsonl"):
        load_personamem(tmp_path)
    with pytest.raises(DatasetUnavailableError, match="neither a size name"):
        load_personamem(str(tmp_path / "missing"))


def test_questions_only_folder(tmp_path: Path) -> None:
    rows = [row(RELEASE_COLUMNS, question_id=f"q{i}", shared_context_id=f"ctx{i % 2}") for i in range(5)]
    write_csv(tmp_path / "questions_32k.csv", RELEASE_COLUMNS, rows)
    dataset = load_personamem(tmp_path)
    assert dataset.histories == {} and len(dataset.questions) == 5
    assert [(i.row, i.field) for i in dataset.issues] == [(1, "shared_context_id"), (2, "shared_context_id")]
    assert "shared_contexts_32k.jsonl not found" in dataset.issues[0].message
    assert "3 question(s)" in dataset.issues[0].message
    with pytest.raises(DatasetUnavailableError, match="shared_contexts_32k.jsonl"):
        load_personamem(tmp_path, require_histories=True)


def test_folder_with_several_sizes_needs_a_choice(release_folder: Path) -> None:
    write_csv(release_folder / "questions_128k.csv", RELEASE_COLUMNS, [row(RELEASE_COLUMNS, question_id="big")])
    with pytest.raises(MemlabError, match="several PersonaMem question files"):
        load_personamem(release_folder)
    dataset = load_personamem(release_folder, size="128k")
    assert dataset.name == "personamem-128k" and [q.id for q in dataset.questions] == ["big"]
    assert len(load_personamem(release_folder, size="32K").questions) == 3


def test_size_name_reads_the_cache_dir(release_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "personamem").symlink_to(release_folder)  # $MEMLAB_DATA_DIR/personamem
    monkeypatch.setenv("MEMLAB_DATA_DIR", str(tmp_path / "data"))
    dataset = load_dataset("personamem:32k")
    assert dataset.name == "personamem-32k" and len(dataset.questions) == 3 and len(dataset.histories) == 2


@pytest.mark.timeout(60)
def test_size_name_offline_says_what_to_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    monkeypatch.setenv("MEMLAB_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetUnavailableError) as caught:
        load_personamem("128k")
    message = str(caught.value)
    for needle in (
        "questions_128k.csv",
        "shared_contexts_128k.jsonl",
        "huggingface.co/datasets/bowen-upenn/PersonaMem",
        str(tmp_path),
        "MEMLAB_DATA_DIR",
        "HF_HUB_OFFLINE",
    ):
        assert needle in message


@pytest.mark.timeout(60)
def test_size_name_with_unreachable_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Online mode, but the test network guard refuses the connection: must fail fast, not hang.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("MEMLAB_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetUnavailableError, match="questions_1M.csv and shared_contexts_1M.jsonl"):
        load_personamem("1M")


@pytest.mark.data
def test_real_dev_history(personamem_dev: Path) -> None:
    dataset = load_personamem(personamem_dev)
    assert dataset.name == "personamem-128k-dev"
    assert dataset.issues == []
    assert len(dataset.questions) == 135
    (history,) = dataset.histories.values()
    assert len(history.messages) == 698 and len(history.session_starts) == 20
    assert all(history.messages[i].role == "system" for i in history.session_starts)
    assert {q.end_index for q in dataset.questions} == {697}
    assert Counter(q.type for q in dataset.questions) == Counter(
        {
            "recalling_facts_mentioned_by_the_user": 35,
            "recalling_the_latest_user_preferences": 35,
            "recommendation_aligned_with_users_latest_preferences": 35,
            "identifying_new_things_not_mentioned_by_the_user": 16,
            "generalizing_past_reasons_in_memory_to_new_scenarios": 10,
            "recalling_the_reasons_behind_previous_updates": 4,
        }
    )
    assert {q.type for q in dataset.questions} <= set(OLDER_128K_TYPES)
    assert all(q.options[i].startswith(f"({letter})") for q in dataset.questions for i, letter in enumerate("abcd"))


@pytest.mark.data
def test_real_32k_questions_only(shared_data: Path) -> None:
    path = shared_data / "personamem" / "32k-questions-only" / "questions_32k.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    dataset = load_personamem(path)
    assert dataset.name == "personamem-32k"
    assert len(dataset.questions) == 589 and dataset.histories == {}
    # The released labels, counted as the file has them (129 recall_user_shared_facts kept as such).
    assert Counter(q.type for q in dataset.questions) == Counter(
        {
            "track_full_preference_evolution": 139,
            "recall_user_shared_facts": 129,
            "recalling_the_reasons_behind_previous_updates": 99,
            "suggest_new_ideas": 93,
            "generalizing_to_new_scenarios": 57,
            "provide_preference_aligned_recommendations": 55,
            "recalling_facts_mentioned_by_the_user": 17,
        }
    )
    assert set(RELEASED_TYPES) == {q.type for q in dataset.questions}
    contexts = {q.context_id for q in dataset.questions}
    assert len(contexts) == 37
    assert len(dataset.issues) == 37 and all(i.field == "shared_context_id" for i in dataset.issues)
    assert len({q.persona_id for q in dataset.questions}) == 20
    assert Counter(q.answer for q in dataset.questions) == Counter({2: 158, 1: 146, 0: 143, 3: 142})


def test_contexts_line_with_a_bad_key_escape_is_an_issue_not_a_crash(tmp_path: Path) -> None:
    # The fast key pre-filter must not crash on a key that is not valid JSON; the line is reported.
    from memlab.datasets.personamem import read_contexts

    path = tmp_path / "shared_contexts.jsonl"
    path.write_text('{"bad\\q": []}\n' + json.dumps({"c1": [{"role": "user", "content": "hi"}]}) + "\n")
    histories, issues = read_contexts(path, {"c1"})
    assert list(histories) == ["c1"] and len(histories["c1"].messages) == 1
    assert len(issues) == 1 and issues[0].row == 1 and "not valid JSON" in issues[0].message
