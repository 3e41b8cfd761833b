"""The profile backend on the real PersonaMem dev history (model-free hashing embedder: seconds)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from memlab.datasets import load_dataset
from memlab.eval.retrieval import item_message_indexes
from memlab.registry import create_backend

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def replayed(personamem_dev: Path):  # type: ignore[no-untyped-def]
    dataset = load_dataset(f"personamem:{personamem_dev}")
    (history,) = dataset.histories.values()
    mem = create_backend("profile", {"embedder": "hashing", "aspect_threshold": 0.5})
    for part, _ in history.slices(0, len(history.messages)):
        mem.ingest(part, user_id="kanoa")
    yield mem, dataset, history
    mem.close()


def _chain(mem, word: str):  # type: ignore[no-untyped-def]
    versions = [e for e in mem.get_profile("kanoa", include_closed=True) if word in e.aspect.lower()]
    assert versions, f"no entry about {word!r}"
    ids = Counter(v.id for v in versions)
    return sorted((v for v in versions if v.id == ids.most_common(1)[0][0]), key=lambda v: v.version)


def test_all_operations_occur(replayed) -> None:  # type: ignore[no-untyped-def]
    mem, _, _ = replayed
    ops = Counter(o.op.value for o in mem.operations("kanoa"))
    assert set(ops) == {"ADD", "UPDATE", "DELETE", "NOOP"}, ops
    assert ops["ADD"] > 100


def test_stopping_closes_the_entry_with_its_reason(replayed) -> None:  # type: ignore[no-untyped-def]
    mem, _, history = replayed
    # Session 1: "I participated in a drumming circle ... healing through rhythm";
    # last session: "However, I decided to step back from drumming circles."
    drumming = _chain(mem, "drumming")
    assert drumming[0].valid_from == 0 and drumming[0].stance.value == "likes"
    assert drumming[-1].valid_to == len(history.session_starts) - 1
    assert "step back from drumming circles" in (drumming[-1].closed_reason or "")
    assert mem.retrieve("drumming circles", user_id="kanoa").context.count("no longer") >= 1


def test_a_flip_keeps_the_old_version(replayed) -> None:  # type: ignore[no-untyped-def]
    mem, _, _ = replayed
    # "I found it really challenging to visualize" -> "I've started using guided imagery" -> "abandon guided imagery"
    imagery = _chain(mem, "guided imagery")
    assert [v.stance.value for v in imagery] == ["dislikes", "likes"]
    assert imagery[0].valid_to == imagery[1].valid_from and imagery[1].valid_to is not None


def test_retrievals_map_to_history_messages(replayed) -> None:  # type: ignore[no-untyped-def]
    mem, dataset, history = replayed
    for question in dataset.questions[:20]:
        retrieval = mem.retrieve(question.text, user_id="kanoa")
        assert retrieval.items, question.id
        for item in retrieval.items:
            messages = item_message_indexes(history, item)
            assert messages, f"{question.id}: item {item.id} does not map to history messages"
            assert all(history.messages[m].role == "user" for m in messages)
