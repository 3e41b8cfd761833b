"""Deletion in the mem0 backend is real (no byte of the text left under the data directory), unknown
ids are NotFoundError, export returns everything, and k is bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memlab.errors import NotFoundError
from memlab.memory import MAX_K
from memlab.testing import session
from memlab.testing.chat_models import Mem0ExtractionChatModel
from memlab_plugins.mem0_backend import Mem0Memory

SECRET = "SECRET-778899"
CONFIG = {"embedder": "hashing"}


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle`` (SQLite pages, journals, JSON ...)."""
    data = needle.encode()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and data in p.read_bytes())


def test_deleting_an_item_then_the_user_leaves_no_byte_of_the_secret(tmp_path: Path) -> None:
    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    memory.ingest(
        session("s1", ("user", f"My social security number is {SECRET}."), ("user", "I grow tomatoes on the balcony.")),
        user_id="alice",
    )
    memory.ingest(session("s1", ("user", "Bob rides a unicycle to work.")), user_id="bob")
    assert files_holding(tmp_path, SECRET), (
        "the secret must be on disk before the delete (else the grep proves nothing)"
    )

    secret_id = next(i.id for i in memory.list_memories(user_id="alice") if SECRET in i.text)
    memory.delete(secret_id, user_id="alice")
    assert files_holding(tmp_path, SECRET) == []
    assert SECRET not in memory.retrieve("social security number", user_id="alice", k=5).context
    history = memory.history(secret_id, user_id="alice")
    assert [h["event"] for h in history] == ["ADD", "DELETE"], "the events stay, their text goes"
    assert all(h["old_memory"] is None and h["new_memory"] is None for h in history)
    assert SECRET not in str(memory.export("alice"))

    assert files_holding(tmp_path, "tomatoes on the balcony")
    memory.reset("alice")
    assert files_holding(tmp_path, "tomatoes on the balcony") == []
    assert files_holding(tmp_path, "unicycle"), "another user's data stays"
    with pytest.raises(NotFoundError):
        memory.history(secret_id, user_id="alice")
    memory.close()
    reopened = Mem0Memory(CONFIG, data_dir=tmp_path)
    assert reopened.list_memories(user_id="alice") == []
    assert [i.text for i in reopened.list_memories(user_id="bob")] == ["Bob rides a unicycle to work."]
    reopened.close()
    assert files_holding(tmp_path, SECRET) == [] and files_holding(tmp_path, "tomatoes") == []


def test_with_inference_forget_removes_facts_history_and_raw_messages(tmp_path: Path) -> None:
    model = Mem0ExtractionChatModel()
    memory = Mem0Memory(CONFIG, data_dir=tmp_path, chat_model=model)
    memory.ingest(
        session("s1", ("user", f"My social security number is {SECRET}."), ("assistant", "Noted.")), user_id="alice"
    )
    fact = next(i for i in memory.list_memories(user_id="alice") if SECRET in i.text)
    memory.delete(fact.id, user_id="alice")
    assert all(SECRET not in i.text for i in memory.list_memories(user_id="alice"))
    assert all(h["old_memory"] is None and h["new_memory"] is None for h in memory.history(fact.id, user_id="alice"))
    # mem0's short-term context (its last raw messages) still holds the message until the user is forgotten
    assert files_holding(tmp_path, SECRET) == ["history.db"]
    memory.reset("alice")
    assert files_holding(tmp_path, SECRET) == []
    memory.close()


def test_unknown_and_foreign_ids_are_not_found(tmp_path: Path) -> None:
    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "I fish.")), user_id="bob")
    bob_id = memory.list_memories(user_id="bob")[0].id
    calls = {
        "delete unknown": lambda: memory.delete("no-such-id", user_id="bob"),
        "update unknown": lambda: memory.update("no-such-id", "x", user_id="bob"),
        "history unknown": lambda: memory.history("no-such-id", user_id="bob"),
        "delete foreign": lambda: memory.delete(bob_id, user_id="alice"),
        "update foreign": lambda: memory.update(bob_id, "I hunt.", user_id="alice"),
        "history foreign": lambda: memory.history(bob_id, user_id="alice"),
    }
    for call in calls.values():
        with pytest.raises(NotFoundError):
            call()
    assert [i.text for i in memory.list_memories(user_id="bob")] == ["I fish."], "nothing changed"
    memory.close()


def test_export_holds_memories_history_and_sessions(tmp_path: Path) -> None:
    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    memory.ingest(session("s1", ("user", "I sail."), ("assistant", "Ahoy!"), ("user", "My boat is red.")), user_id="u")
    boat = next(i for i in memory.list_memories(user_id="u") if "boat" in i.text)
    memory.update(boat.id, "My boat is blue.", user_id="u")
    sail = next(i for i in memory.list_memories(user_id="u") if "sail" in i.text)
    memory.delete(sail.id, user_id="u")
    document = memory.export("u")
    assert document["backend"] == "mem0" and document["user_id"] == "u"
    assert sorted(i["text"] for i in document["items"]) == ["Ahoy!", "My boat is blue."]
    assert [h["event"] for h in document["history"][boat.id]] == ["ADD", "UPDATE"]
    assert document["history"][boat.id][1]["old_memory"] == "My boat is red."
    assert [h["event"] for h in document["history"][sail.id]] == ["ADD", "DELETE"]
    assert document["sessions"] == {"s1": 3}
    import json

    json.dumps(document)  # one JSON document
    memory.close()


def test_a_huge_k_is_clamped_to_what_the_user_holds(tmp_path: Path) -> None:
    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    memory.ingest(session("s", *[("user", f"note {i} about kayaks") for i in range(4)]), user_id="u")
    memory.ingest(session("s", *[("user", f"other {i} about kayaks") for i in range(7)]), user_id="v")
    asked: list[Any] = []
    search = memory._mem.search

    def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["top_k"])
        return search(*args, **kwargs)

    memory._mem.search = spy
    result = memory.retrieve("kayaks", user_id="u", k=MAX_K)  # the largest k the API accepts
    assert asked == [4]
    assert len(result.items) == 4
    assert memory.retrieve("kayaks", user_id="nobody", k=MAX_K).items == []
    assert asked == [4], "a user with nothing stored is not searched at all"
    with pytest.raises(ValueError, match="k must be an integer from 1 to"):
        memory.retrieve("kayaks", user_id="u", k=10**9)  # refused before any backend work
    memory.close()
