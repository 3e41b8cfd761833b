"""A reusable conformance suite for ``Memory`` plugins.

Subclass ``MemoryConformance`` in your plugin's tests and implement ``make_memory``::

    from memlab.testing import MemoryConformance

    class TestMyBackend(MemoryConformance):
        def make_memory(self, data_dir):
            return MyBackend({"top_k": 5}, data_dir=data_dir)

Every built-in backend passes it. Set ``remembers = False`` for a backend that stores nothing
(the ``none`` control), and ``exact_recall = False`` for one that paraphrases what it stores
(the suite then checks recall by keyword instead of verbatim text).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from memlab.errors import MemlabError, UnsupportedCapabilityError
from memlab.memory import Capability, Memory
from memlab.types import Message, Retrieval, Session

ALICE_FACT = "I adopted a grey cat named Pixel last spring."
BOB_FACT = "I keep bees on the roof of my apartment in Lisbon."


def session(session_id: str, *turns: tuple[str, str]) -> Session:
    return Session(id=session_id, messages=[Message(role=role, content=text) for role, text in turns])  # type: ignore[arg-type]


def _text(retrieval: Retrieval) -> str:
    return (retrieval.context + "\n" + "\n".join(i.text for i in retrieval.items)).lower()


class MemoryConformance:
    """Behaviour every memlab backend must show. Subclasses provide ``make_memory``."""

    remembers: ClassVar[bool] = True
    exact_recall: ClassVar[bool] = True

    def make_memory(self, data_dir: Path) -> Memory:  # pragma: no cover - abstract
        raise NotImplementedError

    @pytest.fixture
    def memory(self, tmp_path: Path) -> Memory:
        mem = self.make_memory(tmp_path / "data")
        yield mem
        mem.close()

    def _recalls(self, retrieval: Retrieval, keyword: str) -> bool:
        return keyword.lower() in _text(retrieval)

    # ------------------------------------------------------------------ basics
    def test_declares_identity(self, memory: Memory) -> None:
        assert memory.name and memory.description
        assert all(isinstance(c, Capability) for c in memory.capabilities)

    def test_config_rejects_unknown_keys(self, memory: Memory) -> None:
        with pytest.raises(MemlabError):
            type(memory).parse_config({"definitely_not_a_field": 1})

    def test_retrieve_before_ingest_is_empty(self, memory: Memory) -> None:
        result = memory.retrieve("what pets do I have?", user_id="nobody")
        assert isinstance(result, Retrieval)
        assert result.items == []
        assert result.is_empty

    def test_invalid_user_id_rejected(self, memory: Memory) -> None:
        with pytest.raises(ValueError):
            memory.retrieve("x", user_id="../etc/passwd")
        with pytest.raises(ValueError):
            memory.ingest(session("s1", ("user", "hi")), user_id="")

    def test_empty_session_is_accepted(self, memory: Memory) -> None:
        memory.ingest(Session(id="empty", messages=[]), user_id="alice")
        assert isinstance(memory.retrieve("anything", user_id="alice"), Retrieval)

    def test_ingest_then_recall(self, memory: Memory) -> None:
        memory.ingest(
            session("s1", ("user", ALICE_FACT), ("assistant", "Pixel is a lovely name for a cat!")),
            user_id="alice",
        )
        result = memory.retrieve("What is the name of my cat?", user_id="alice")
        if self.remembers:
            assert self._recalls(result, "pixel"), result.context
            assert result.tokens > 0
        else:
            assert result.is_empty

    def test_k_bounds_items(self, memory: Memory) -> None:
        turns = [("user", f"Fact number {i}: I visited city {i} in year {2000 + i}.") for i in range(12)]
        memory.ingest(session("s1", *turns), user_id="alice")
        result = memory.retrieve("Which cities did I visit?", user_id="alice", k=3)
        if self.remembers and not getattr(self, "returns_everything", False):
            assert 1 <= len(result.items) <= 3

    # ------------------------------------------------------------------ isolation
    def test_users_are_isolated(self, memory: Memory) -> None:
        memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
        memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
        for query in ("cat named Pixel", "bees on the roof", "tell me everything"):
            assert not self._recalls(memory.retrieve(query, user_id="bob"), "pixel")
            assert not self._recalls(memory.retrieve(query, user_id="alice"), "bees")
        assert memory.retrieve("cat named Pixel", user_id="carol").is_empty

    def test_reset_forgets_only_that_user(self, memory: Memory) -> None:
        memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
        memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
        memory.reset("alice")
        assert not self._recalls(memory.retrieve("cat named Pixel", user_id="alice"), "pixel")
        if self.remembers:
            assert self._recalls(memory.retrieve("bees on the roof", user_id="bob"), "bees")

    # ------------------------------------------------------------------ sessions in parts
    def test_session_continuation(self, memory: Memory) -> None:
        first = memory.ingest(session("s1", ("user", ALICE_FACT), ("assistant", "Nice!")), user_id="alice")
        second = memory.ingest(session("s1", ("user", BOB_FACT.replace("I keep", "My aunt keeps"))), user_id="alice")
        assert first.first_turn == 0
        assert second.first_turn == 2, "the second part of a session continues its turn numbering"
        if not self.remembers:
            return
        assert self._recalls(memory.retrieve("cat named Pixel", user_id="alice"), "pixel")
        result = memory.retrieve("Who keeps bees on a roof?", user_id="alice")
        assert self._recalls(result, "bees")
        turn_indexes = [i.source.get("turn_index") for i in result.items if "bees" in i.text.lower()]
        if self.exact_recall and any(t is not None for t in turn_indexes):
            assert 2 in turn_indexes

    # ------------------------------------------------------------------ capabilities
    def test_undeclared_capabilities_refuse(self, memory: Memory) -> None:
        if Capability.LIST not in memory.capabilities:
            with pytest.raises(UnsupportedCapabilityError):
                memory.list_memories(user_id="alice")
        if Capability.DELETE not in memory.capabilities:
            with pytest.raises(UnsupportedCapabilityError):
                memory.delete("x", user_id="alice")
        if Capability.UPDATE not in memory.capabilities:
            with pytest.raises(UnsupportedCapabilityError):
                memory.update("x", "y", user_id="alice")
        if Capability.HISTORY not in memory.capabilities:
            with pytest.raises(UnsupportedCapabilityError):
                memory.history("x", user_id="alice")

    def test_list_is_scoped(self, memory: Memory) -> None:
        if Capability.LIST not in memory.capabilities:
            pytest.skip("backend does not declare LIST")
        memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
        memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
        alice = " ".join(i.text for i in memory.list_memories(user_id="alice")).lower()
        assert "pixel" in alice and "bees" not in alice

    def test_delete_cannot_cross_users(self, memory: Memory) -> None:
        if not {Capability.LIST, Capability.DELETE} <= memory.capabilities:
            pytest.skip("backend does not declare LIST and DELETE")
        memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
        bob_items = memory.list_memories(user_id="bob")
        assert bob_items
        with pytest.raises((KeyError, LookupError, MemlabError)):
            memory.delete(bob_items[0].id, user_id="alice")
        assert len(memory.list_memories(user_id="bob")) == len(bob_items)

    def test_persists_across_reopen(self, tmp_path: Path) -> None:
        first = self.make_memory(tmp_path / "persist")
        if Capability.PERSIST not in first.capabilities:
            first.close()
            pytest.skip("backend does not declare PERSIST")
        first.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
        first.close()
        second = self.make_memory(tmp_path / "persist")
        try:
            assert self._recalls(second.retrieve("cat named Pixel", user_id="alice"), "pixel")
            assert second.ingest(session("s1", ("user", "More.")), user_id="alice").first_turn == 1
        finally:
            second.close()
