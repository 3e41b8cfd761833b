"""Synthetic PersonaMem-format generator: determinism, question coverage, balance and ground truth."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from memlab.datasets import load_dataset
from memlab.datasets.base import Dataset
from memlab.datasets.question_types import ACKNOWLEDGE_LATEST, CANONICAL_TYPES, RECALL_FACTS, REVISIT_REASONS
from memlab.datasets.synthetic import ACK_FAMILIES, generate
from memlab.embedders import get_embedder
from memlab.readers.base import strip_option_label
from memlab.readers.controls import LongestOptionReader
from memlab.tokens import count_tokens
from memlab.types import Retrieval


def fingerprint(dataset: Dataset) -> str:
    payload = {
        "histories": {k: [m.model_dump(mode="json") for m in h.messages] for k, h in dataset.histories.items()},
        "questions": [q.model_dump(mode="json") for q in dataset.questions],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@pytest.fixture(scope="module")
def default() -> Dataset:
    return generate()


@pytest.fixture(scope="module")
def large() -> Dataset:
    return generate(personas=12, seed=11)


def test_default_size_and_shape(default: Dataset) -> None:
    assert len(default.histories) == 2 and default.issues == []
    assert 40 <= len(default.questions) <= 60
    for history in default.histories.values():
        assert len(history.session_starts) == 8
        assert all(history.messages[i].role == "system" for i in history.session_starts)
        assert "Current user persona" in history.messages[0].content
        assert {m.role for m in history.messages} == {"system", "user", "assistant"}
        assert 150 <= len(history.messages) <= 200
    for question in default.questions:
        assert question.context_id in default.histories
        assert len(question.options) == 4 and question.answer in range(4)
        assert [o[:4] for o in question.options] == ["(a) ", "(b) ", "(c) ", "(d) "]
        assert len(set(question.options)) == 4
        assert question.metadata["option_kinds"][question.answer] == "correct"
        assert question.metadata["option_kinds"].count("correct") == 1
    assert len({q.id for q in default.questions}) == len(default.questions)


def test_all_seven_types_for_every_persona(default: Dataset) -> None:
    for context_id in default.histories:
        assert {q.type for q in default.questions_for(context_id)} == set(CANONICAL_TYPES)


def test_deterministic_by_seed(default: Dataset) -> None:
    assert fingerprint(generate()) == fingerprint(default)
    assert fingerprint(generate(seed=1)) != fingerprint(default)
    assert fingerprint(load_dataset("synthetic")) == fingerprint(default)
    assert fingerprint(load_dataset("synthetic:personas=1,seed=3")) == fingerprint(generate(personas=1, seed=3))


def test_deterministic_across_processes(default: Dataset) -> None:
    # String hashing is randomised per process: no set or dict order may leak into the output.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from tests.test_datasets_synthetic import fingerprint; "
        "from memlab.datasets.synthetic import generate; print(fingerprint(generate()))"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, root], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == fingerprint(default)


def test_answer_positions_are_shuffled(large: Dataset) -> None:
    positions = Counter(q.answer for q in large.questions)
    assert set(positions) == {0, 1, 2, 3}
    assert max(positions.values()) < 0.35 * len(large.questions)


def test_longest_option_control_stays_near_chance(large: Dataset) -> None:
    reader = LongestOptionReader()
    picks = [reader.answer(q, Retrieval()).choice == q.answer for q in large.questions]
    longest = sum(picks) / len(picks)
    shortest = sum(
        min(range(4), key=lambda i: len(strip_option_label(q.options[i]))) == q.answer for q in large.questions
    ) / len(large.questions)
    assert len(picks) >= 250
    assert 0.1 < longest < 0.45, longest
    assert 0.1 < shortest < 0.45, shortest


def test_evidence_precedes_the_question_and_holds_the_key(large: Dataset) -> None:
    for q in large.questions:
        history = large.histories[q.context_id]
        indexes = [int(e[1:]) for e in q.evidence]
        assert q.evidence == [f"m{i}" for i in indexes] and indexes == q.metadata["evidence_messages"]
        assert indexes and all(0 < i < q.end_index <= len(history.messages) for i in indexes), q.id
        assert all(history.messages[i].role == "user" for i in indexes)
        assert any(q.metadata["key"].lower() in history.messages[i].content.lower() for i in indexes), q.id
        first = min(indexes)
        assert q.distance_tokens == sum(count_tokens(m.content) for m in history.messages[first : q.end_index])
        assert q.distance_blocks == history.session_number_of(q.end_index - 1) - history.session_number_of(first) + 1
        assert q.distance_blocks >= 1


def test_questions_at_boundaries_and_mid_session(large: Dataset) -> None:
    at_boundary = mid_session = 0
    for q in large.questions:
        history = large.histories[q.context_id]
        if q.end_index in history.session_starts[1:] + [len(history.messages)]:
            at_boundary += 1
        else:
            mid_session += 1
            assert history.messages[q.end_index - 1].role == "assistant"
    assert at_boundary > 30 and mid_session > 30


def test_answers_follow_the_state_at_end_index(large: Dataset) -> None:
    """Ground truth in history.metadata: the correct option is the stance/reason current at end_index."""
    latest_by_aspect: dict[tuple[str, str], set[str]] = {}
    for q in large.questions:
        if q.type not in (ACKNOWLEDGE_LATEST, REVISIT_REASONS):
            continue
        steps = large.histories[q.context_id].metadata["persona"]["preferences"][q.topic]
        known = [s for s in steps if s["message"] < q.end_index]
        correct = strip_option_label(q.options[q.answer])
        if q.type == ACKNOWLEDGE_LATEST:
            stance = known[-1]["stance"]
            # The correct option is the current stance in one family's words (plus, at times, a closing remark).
            assert any(correct.startswith(family[stance].format(item=q.topic)) for family in ACK_FAMILIES), q.id
            latest_by_aspect.setdefault((q.context_id, q.topic), set()).add(stance)
        else:
            reason = [s for s in known if s["reason"]][-1]["reason"]
            said_back = re.sub(r"\b(I|me)\b", "you", re.sub(r"\bmy\b", "your", reason))
            assert said_back in correct, (q.id, said_back, correct)
    changed_answers = sum(1 for stances in latest_by_aspect.values() if len(stances) > 1)
    assert changed_answers >= 1  # the same aspect has different correct stances at different times


def test_distractor_kinds(large: Dataset) -> None:
    kinds = Counter(k for q in large.questions for k in q.metadata["option_kinds"])
    for kind in ("stale", "wrong_item", "generic", "reversed", "other_reason", "already_done", "other_motive"):
        assert kinds[kind] > 0, kind


def test_memory_helps_on_fact_and_reason_questions(large: Dataset) -> None:
    """With the evidence turn in hand even the model-free hashing embedder finds the answer,
    while the question alone does not: the answer is in memory, not in the options."""
    embedder = get_embedder("hashing")
    with_evidence = blind = total = 0
    for q in large.questions:
        if q.type not in (RECALL_FACTS, REVISIT_REASONS):
            continue
        history = large.histories[q.context_id]
        options = embedder.embed([strip_option_label(o) for o in q.options])
        evidence = embedder.embed_one(" ".join(history.messages[int(e[1:])].content for e in q.evidence))
        question = embedder.embed_one(q.text)
        with_evidence += int(np.argmax(options @ evidence)) == q.answer
        blind += int(np.argmax(options @ question)) == q.answer
        total += 1
    assert total >= 60
    assert with_evidence / total > 0.8, with_evidence / total
    assert blind / total < 0.4, blind / total


def test_parameters_scale_the_dataset() -> None:
    dataset = generate(personas=3, seed=5, sessions=12, turns=30, aspects=8, questions=30)
    assert len(dataset.histories) == 3 and len(dataset.questions) == 90
    for history in dataset.histories.values():
        assert len(history.session_starts) == 12
        assert len(history.messages) >= 12 * 31
        assert len(history.metadata["persona"]["preferences"]) == 8
    small = generate(personas=1, sessions=3, turns=4, aspects=4, questions=7)
    assert {q.type for q in small.questions} == set(CANONICAL_TYPES)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"personas": 0}, "personas"),
        ({"sessions": 2}, "sessions"),
        ({"aspects": 13}, "aspects"),
        ({"turns": 1}, "turns"),
    ],
)
def test_bad_parameters_are_named(kwargs: dict[str, int], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        generate(**kwargs)


def test_phrase_tables_are_package_data() -> None:
    """The text lives in phrases.json next to the code (shipped via package-data), not in Python."""
    from importlib import resources

    from memlab.datasets.synthetic import phrases

    data = json.loads(resources.files("memlab.datasets.synthetic").joinpath("phrases.json").read_text("utf-8"))
    assert [a["item"] for a in data["aspects"]] == [a.item for a in phrases.ASPECTS]
    assert set(data["ack_families"][0]) == {"like", "dislike", "indifferent", "generic"}


def test_fact_recall_options_share_one_template(large: Dataset) -> None:
    """Calibration: the four options differ only in the fact value, so no option is the 'generic' one."""
    from memlab.datasets.synthetic.phrases import FACT_POOLS

    for q in large.questions:
        if q.type != RECALL_FACTS:
            continue
        assert q.metadata["option_kinds"].count("wrong_item") == 3
        values = [v for v in FACT_POOLS[q.topic] if any(v in o for o in q.options)]
        assert len(values) >= 4, q.options
