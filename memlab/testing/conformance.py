"""A reusable conformance suite for ``Memory`` plugins.

Subclass ``MemoryConformance`` in your plugin's tests and implement ``make_memory``::

    from memlab.testing import MemoryConformance

    class TestMyBackend(MemoryConformance):
        def make_memory(self, data_dir):
            return MyBackend({"top_k": 5}, data_dir=data_dir)

Every built-in backend passes it. Flags a subclass may set (class attributes):

- ``remembers = False``: the backend stores nothing (the ``none`` control); recall checks are skipped.
- ``exact_recall = False``: the backend paraphrases what it stores (facts, profile entries); recall is
  checked by keyword and turn numbers of recalled items are not compared.
- ``returns_everything = True``: the backend returns its newest turns whatever the query
  (``full_context``); the relevance-ranking check is skipped, ``k`` is still enforced.
- ``turn_sources = False``: items do not come from turns (so they need not carry ``session_id`` /
  ``turn_index`` provenance). By default items must trace back to the turns they came from.
- ``stores_in_data_dir = False``: a persistent backend whose state lives in a database server, not
  under ``data_dir`` (it need not write files there; ``make_memory`` should still give two data
  directories two separate stores, e.g. a database each).

Checks that need a capability run for backends declaring it (``list``, ``delete``, ``update``,
``persist``) and are skipped otherwise: deleting exactly the named item (its neighbours and another
user's item with the same id untouched), the deletion and an update surviving a reopen, users with
colliding session and item ids kept apart, ranking across several sessions, and ``reset``
(forget) leaving nothing listable. A fresh memory on a new ``data_dir`` must be empty: a check
that finds another test's data fails at once with a message about shared (class-level) state.

Failing checks show their values when pytest rewrites this module's asserts: memlab registers a
``pytest11`` entry point that does so; without it, add ``pytest.register_assert_rewrite(
"memlab.testing")`` to your ``conftest.py`` before importing the suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memlab.errors import MemlabError, PluginValidationError, UnsupportedCapabilityError
from memlab.memory import Capability, Memory
from memlab.types import MemoryItem, Message, Retrieval, Session

ALICE_FACT = "I adopted a grey cat named Pixel last spring."
BOB_FACT = "I keep bees on the roof of my apartment in Lisbon."


def session(session_id: str, *turns: tuple[str, str]) -> Session:
    # model_validate: the roles are plain strings here, checked against Role by pydantic.
    return Session(id=session_id, messages=[Message.model_validate({"role": r, "content": t}) for r, t in turns])


def ranked(items: list[MemoryItem]) -> list[MemoryItem]:
    """Items best first: by ``score`` when every item has one (a backend may hand items back in
    conversation order for the reader's sake), else in the order given."""
    scored = [(item.score, item) for item in items if item.score is not None]
    if items and len(scored) == len(items):
        return [item for _, item in sorted(scored, key=lambda pair: -float(pair[0]))]
    return list(items)


def _text(retrieval: Retrieval) -> str:
    return (retrieval.context + "\n" + "\n".join(i.text for i in retrieval.items)).lower()


class MemoryConformance:
    """Behaviour every memlab backend must show. Subclasses provide ``make_memory``."""

    remembers: ClassVar[bool] = True
    exact_recall: ClassVar[bool] = True
    returns_everything: ClassVar[bool] = False
    turn_sources: ClassVar[bool] = True
    stores_in_data_dir: ClassVar[bool] = True

    def make_memory(self, data_dir: Path) -> Memory:  # pragma: no cover - abstract
        raise NotImplementedError

    @pytest.fixture
    def memory(self, tmp_path: Path) -> Iterator[Memory]:
        mem = self.make_memory(tmp_path / "data")
        try:
            self._check_fresh(mem)
        except BaseException:
            mem.close()
            raise
        yield mem
        mem.close()

    def _check_fresh(self, memory: Memory) -> None:
        """A memory on a new data_dir holds nothing: data from an earlier check means shared state."""
        found: list[str] = []
        for user in ("alice", "bob"):
            if Capability.LIST in memory.capabilities:
                found += [f"{user}: {i.id} {i.text[:60]!r}" for i in memory.list_memories(user_id=user)]
            found += [f"{user}: {i.id} {i.text[:60]!r}" for i in memory.retrieve("cat named Pixel", user_id=user).items]
        assert not found, (
            "shared state: a new memory on an empty data_dir already holds items stored by another instance "
            f"({'; '.join(found[:4])}); keep all state on the instance and under data_dir, never in a "
            "class attribute or a module global (see test_instances_do_not_share_state)"
        )

    def _retrieve_checked(
        self, memory: Memory, check: str, query: str, *, user_id: str, k: int | None = None
    ) -> Retrieval:
        """``memory.retrieve``; the base class's refusal of more than k items fails naming the check."""
        try:
            return memory.retrieve(query, user_id=user_id, k=k)
        except PluginValidationError as exc:
            refused = str(exc)
        raise AssertionError(f"{check}: {refused}")

    def _reopen(self, memory: Memory, data_dir: Path) -> Memory:
        memory.close()
        return self.make_memory(data_dir)

    def _require_capabilities(self, memory: Memory, *capabilities: Capability) -> None:
        missing = [c.value for c in capabilities if c not in memory.capabilities]
        if missing:
            pytest.skip(f"backend does not declare {', '.join(missing)}")

    def _recalls(self, retrieval: Retrieval, keyword: str) -> bool:
        return keyword.lower() in _text(retrieval)

    def _store_alice_fact_and_close(self, data_dir: Path) -> None:
        """Ingest ALICE_FACT into a memory on ``data_dir`` and close it; skip a backend without PERSIST."""
        memory = self.make_memory(data_dir)
        if Capability.PERSIST not in memory.capabilities:
            memory.close()
            pytest.skip("backend does not declare PERSIST")
        memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
        memory.close()

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
        query = "Fact number: which city did I visit in which year?"
        result = self._retrieve_checked(memory, "k bounds items", query, user_id="alice", k=3)
        assert len(result.items) <= 3, (
            f"k bounds items: retrieve(k=3) returned {len(result.items)} items, expected at most 3"
        )
        if self.remembers:
            assert len(result.items) >= 1

    def test_k_is_the_callers_bound_not_top_k(self, memory: Memory) -> None:
        """Two different ``k`` give two different bounds (a backend that reads config.top_k fails)."""
        turns = [("user", f"Fact number {i}: I visited city {i} in year {2000 + i}.") for i in range(12)]
        memory.ingest(session("s1", *turns), user_id="alice")
        query = "Fact number: which city did I visit in which year?"
        two = self._retrieve_checked(memory, "k is the caller's bound", query, user_id="alice", k=2)
        five = self._retrieve_checked(memory, "k is the caller's bound", query, user_id="alice", k=5)
        assert len(two.items) <= 2
        assert len(five.items) <= 5
        if self.remembers:
            assert len(five.items) > len(two.items), "k=5 returned no more items than k=2"

    # ------------------------------------------------------------------ relevance and provenance
    TOPICS: ClassVar[list[tuple[str, str, str]]] = [
        # (keyword, statement, query sharing words with the statement)
        ("cello", "I play the cello in a jazz quartet every Friday night.", "cello jazz quartet Friday"),
        ("kayak", "My kayak trip on the river Douro starts in July.", "kayak trip river Douro"),
        ("sourdough", "I bake sourdough bread with rye flour on Sundays.", "bake sourdough bread rye flour"),
        ("chess", "I coach the chess club at the public library downtown.", "coach chess club library"),
        ("tulips", "I planted purple tulips along the garden fence.", "planted purple tulips garden fence"),
        ("marathon", "I am training for the Berlin marathon in September.", "training Berlin marathon September"),
    ]

    def test_ranking_puts_the_relevant_item_first(self, memory: Memory) -> None:
        """An inverted or random ranking fails: each topic's own statement must come first."""
        if not self.remembers or self.returns_everything:
            pytest.skip("backend does not rank by relevance")
        memory.ingest(session("s1", *[("user", statement) for _, statement, _ in self.TOPICS]), user_id="alice")
        firsts = {}
        for keyword, _, query in self.TOPICS:
            items = ranked(memory.retrieve(query, user_id="alice", k=3).items)
            firsts[keyword] = items[0].text if items else None
        misses = [k for k, text in firsts.items() if text is None or k not in text.lower()]
        assert len(misses) <= 1, f"top item did not match the query for {misses}: {firsts}"

    def test_items_trace_back_to_turns(self, memory: Memory) -> None:
        """Items carry ``session_id`` + ``turn_index`` (or ``turns``) naming the turn they came from."""
        if not self.remembers or not self.turn_sources:
            pytest.skip("backend's items do not come from turns")
        statements = [statement for _, statement, _ in self.TOPICS]
        memory.ingest(session("s7", *[("user", statement) for statement in statements]), user_id="alice")
        items = memory.retrieve("kayak trip river Douro", user_id="alice", k=3).items
        assert items
        for item in items:
            refs = item.source.get("turns") or [item.source]
            assert all("session_id" in ref and "turn_index" in ref for ref in refs), item.source
            for ref in refs:
                assert ref["session_id"] == "s7", item.source
                assert 0 <= int(ref["turn_index"]) < len(statements), item.source
            if self.exact_recall and "turns" not in item.source:
                turn_text = statements[int(item.source["turn_index"])]
                assert turn_text in item.text or item.text in turn_text, (item.text, turn_text)

    # ------------------------------------------------------------------ instances and data_dir
    def test_instances_do_not_share_state(self, tmp_path: Path) -> None:
        """Two instances with two data directories are two memories (no class-level or global state)."""
        first = self.make_memory(tmp_path / "one")
        second = self.make_memory(tmp_path / "two")
        try:
            first.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
            assert not self._recalls(second.retrieve("cat named Pixel", user_id="alice"), "pixel"), (
                "shared state: a second instance on another data_dir recalled what the first one stored "
                "(state kept in a class attribute or a module global, or outside data_dir)"
            )
        finally:
            first.close()
            second.close()

    def test_persistent_state_lives_in_data_dir(self, tmp_path: Path) -> None:
        self._store_alice_fact_and_close(tmp_path / "here")
        files = [p for p in (tmp_path / "here").rglob("*") if p.is_file() and p.name != ".memlab.lock"]
        if self.stores_in_data_dir:
            assert files, "a persistent backend wrote nothing under its data_dir"
        elsewhere = self.make_memory(tmp_path / "elsewhere")
        try:
            assert not self._recalls(elsewhere.retrieve("cat named Pixel", user_id="alice"), "pixel")
        finally:
            elsewhere.close()

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
        self._store_alice_fact_and_close(tmp_path / "persist")
        second = self.make_memory(tmp_path / "persist")
        try:
            assert self._recalls(second.retrieve("cat named Pixel", user_id="alice"), "pixel")
            assert second.ingest(session("s1", ("user", "More.")), user_id="alice").first_turn == 1
        finally:
            second.close()

    # ------------------------------------------------------------------ ranking across sessions
    def test_ranking_across_sessions(self, memory: Memory) -> None:
        """Each topic in its own session, with a weak mention of it in a later session: the statement wins.

        A backend that ranks well inside one session but orders sessions wrongly (newest or
        oldest session first, one session's hits before another's) fails.
        """
        if not self.remembers or self.returns_everything:
            pytest.skip("backend does not rank by relevance")
        n = len(self.TOPICS)
        for i, (_, statement, _) in enumerate(self.TOPICS):
            weak = self.TOPICS[(i - 1) % n][0]  # a mention of the previous topic: it lives one session later
            memory.ingest(
                session(f"t{i}", ("user", statement), ("user", f"I told a friend about the {weak} yesterday.")),
                user_id="alice",
            )
        firsts: dict[str, tuple[str, Any]] = {}
        for keyword, _, query in self.TOPICS:
            items = ranked(self._retrieve_checked(memory, "ranking across sessions", query, user_id="alice", k=3).items)
            firsts[keyword] = (items[0].text.lower(), items[0].source.get("session_id")) if items else ("", None)
        misses = [
            keyword
            for i, (keyword, _, _) in enumerate(self.TOPICS)
            if keyword not in firsts[keyword][0]
            or "told a friend" in firsts[keyword][0]
            or (self.exact_recall and firsts[keyword][1] not in (None, f"t{i}"))
        ]
        assert len(misses) <= 1, (
            f"ranking across sessions: for {misses} the top item was not the statement from its own session "
            f"(session t<i>) but a weaker mention in another session or nothing: {firsts}"
        )

    # ------------------------------------------------------------------ ids colliding across users
    def test_users_with_colliding_ids_are_isolated(self, memory: Memory) -> None:
        """Alice and Bob use the same session id, so ids like ``s1#0`` collide: ids are unique per user only."""
        memory.ingest(session("s1", ("user", ALICE_FACT), ("assistant", "Nice!")), user_id="alice")
        memory.ingest(session("s1", ("user", BOB_FACT), ("assistant", "Nice!")), user_id="bob")
        if not self.remembers:
            return
        alice = self._retrieve_checked(memory, "colliding ids", "cat named Pixel", user_id="alice")
        bob = self._retrieve_checked(memory, "colliding ids", "bees on the roof in Lisbon", user_id="bob")
        assert self._recalls(alice, "pixel"), (
            "colliding ids: after bob ingested a session with alice's session id, alice no longer recalls her "
            f"own turn (state keyed by item id must be per user): {alice.context!r}"
        )
        assert self._recalls(bob, "bees") and not self._recalls(bob, "pixel"), bob.context
        assert not self._recalls(alice, "bees"), alice.context
        if Capability.LIST not in memory.capabilities:
            return
        listed = {u: memory.list_memories(user_id=u) for u in ("alice", "bob")}
        assert any("pixel" in i.text.lower() for i in listed["alice"]), listed["alice"]
        assert not any("bees" in i.text.lower() for i in listed["alice"]), listed["alice"]
        if Capability.DELETE not in memory.capabilities:
            return
        mine = next(i for i in listed["alice"] if "pixel" in i.text.lower())
        memory.delete(mine.id, user_id="alice")
        after = memory.list_memories(user_id="bob")
        assert [(i.id, i.text) for i in after] == [(i.id, i.text) for i in listed["bob"]], (
            f"colliding ids: deleting alice's {mine.id!r} changed bob's items (ids are unique per user, not globally)"
        )
        assert self._recalls(self._retrieve_checked(memory, "colliding ids", "bees on the roof", user_id="bob"), "bees")

    # ------------------------------------------------------------------ deletion, update, forget
    DELETION_TURNS: ClassVar[list[str]] = [TOPICS[0][1], TOPICS[1][1], TOPICS[2][1]]  # cello, kayak, sourdough

    def _store_for_deletion(self, memory: Memory) -> tuple[MemoryItem, list[MemoryItem], list[MemoryItem]]:
        """Alice's three turns and Bob's (same session id): (alice's kayak item, alice's items, bob's items)."""
        memory.ingest(session("s1", *[("user", t) for t in self.DELETION_TURNS]), user_id="alice")
        memory.ingest(session("s1", ("user", self.TOPICS[1][1]), ("user", BOB_FACT)), user_id="bob")
        alice, bob = memory.list_memories(user_id="alice"), memory.list_memories(user_id="bob")
        victim = next((i for i in alice if "kayak" in i.text.lower()), None)
        assert victim is not None, f"none of alice's listed items mentions the kayak turn: {alice}"
        return victim, alice, bob

    def _check_deleted(
        self, memory: Memory, check: str, victim: MemoryItem, alice: list[MemoryItem], bob: list[MemoryItem]
    ) -> None:
        now = memory.list_memories(user_id="alice")
        ids = [i.id for i in now]
        expected = [i.id for i in alice if i.id != victim.id]
        assert victim.id not in ids, f"{check}: deleted item {victim.id!r} is still listed: {ids}"
        assert sorted(ids) == sorted(expected), (
            f"{check}: deleting {victim.id!r} must remove exactly that item; expected alice's items {expected}, "
            f"listed {ids} (a neighbour deleted or changed?)"
        )
        assert [(i.id, i.text) for i in memory.list_memories(user_id="bob")] == [(i.id, i.text) for i in bob], (
            f"{check}: deleting alice's {victim.id!r} changed bob's items (bob has an item with the same id)"
        )
        found = self._retrieve_checked(memory, check, "kayak trip river Douro", user_id="alice", k=3)
        assert victim.id not in [i.id for i in found.items], f"{check}: retrieve still returns deleted {victim.id!r}"
        if self.exact_recall and not any(i.text == victim.text for i in now):  # no other item holds the same text
            assert victim.text not in found.context, f"{check}: the deleted text is still in the context"

    def test_delete_removes_exactly_that_item(self, memory: Memory) -> None:
        self._require_capabilities(memory, Capability.LIST, Capability.DELETE)
        victim, alice, bob = self._store_for_deletion(memory)
        memory.delete(victim.id, user_id="alice")
        self._check_deleted(memory, "delete removes exactly that item", victim, alice, bob)

    def test_delete_survives_reopen(self, tmp_path: Path) -> None:
        memory = self.make_memory(tmp_path / "data")
        try:
            self._require_capabilities(memory, Capability.LIST, Capability.DELETE, Capability.PERSIST)
            victim, alice, bob = self._store_for_deletion(memory)
            memory.delete(victim.id, user_id="alice")
            memory = self._reopen(memory, tmp_path / "data")
            self._check_deleted(memory, "delete survives a reopen", victim, alice, bob)
        finally:
            memory.close()

    def test_update_survives_reopen(self, tmp_path: Path) -> None:
        memory = self.make_memory(tmp_path / "data")
        try:
            self._require_capabilities(memory, Capability.LIST, Capability.UPDATE, Capability.PERSIST)
            memory.ingest(session("s1", *[("user", t) for t in [*self.DELETION_TURNS, ALICE_FACT]]), user_id="alice")
            changed = None
            for item in memory.list_memories(user_id="alice"):
                try:  # some items may refuse updates (a profile's raw turns): update the first that takes it
                    changed = memory.update(
                        item.id, "My kayak trip on the river Tagus starts in August.", user_id="alice"
                    )
                    break
                except MemlabError:
                    continue
            assert changed is not None, "update survives a reopen: none of alice's listed items accepted an update"
            memory = self._reopen(memory, tmp_path / "data")
            listed = " ".join(i.text for i in memory.list_memories(user_id="alice")).lower()
            assert "tagus" in listed, f"update survives a reopen: the updated text is gone after a reopen: {listed!r}"
            found = self._retrieve_checked(
                memory, "update survives a reopen", "kayak trip river Tagus", user_id="alice"
            )
            assert self._recalls(found, "tagus"), found.context
        finally:
            memory.close()

    def test_forget_leaves_nothing_listable(self, tmp_path: Path) -> None:
        memory = self.make_memory(tmp_path / "data")
        try:
            self._require_capabilities(memory, Capability.LIST)
            memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
            memory.ingest(session("s2", ("user", self.TOPICS[0][1])), user_id="alice")
            memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
            bob = [(i.id, i.text) for i in memory.list_memories(user_id="bob")]
            memory.reset("alice")
            left = memory.list_memories(user_id="alice")
            assert left == [], f"forget: reset('alice') left items listable: {[i.id for i in left]}"
            assert [(i.id, i.text) for i in memory.list_memories(user_id="bob")] == bob, "forget: bob's items changed"
            if Capability.PERSIST in memory.capabilities:
                memory = self._reopen(memory, tmp_path / "data")
                left = memory.list_memories(user_id="alice")
                assert left == [], f"forget: alice's items are back after a reopen: {[i.id for i in left]}"
                assert memory.ingest(session("s1", ("user", "Hello again.")), user_id="alice").first_turn == 0, (
                    "forget: a forgotten user's session numbering must start again at 0"
                )
        finally:
            memory.close()
