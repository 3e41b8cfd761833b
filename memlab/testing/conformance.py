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
user's item with the same id untouched), the deletion and an update surviving a reopen, an update
visible to list and search at once, users with colliding session and item ids kept apart (in
retrieve, list, delete and update), ids that survive a reopen, a stable list order, ranking across
several sessions, and ``reset`` (forget) leaving nothing listable and none of the user's text in
any file under ``data_dir``. A fresh memory on a new ``data_dir`` must be empty: a check that finds
another test's data fails at once with a message about shared (class-level) state.

The rules the checks hold a backend to (each failure message starts with the rule's name):

- **list order**: ``list_memories`` returns a user's items in a stable order: two calls with no
  write in between list the same items in the same order (the order itself is the backend's
  choice; storage order is the natural one). Everywhere else the suite compares listed items as
  sets of (id, text), so an order change is reported by ``test_list_order_is_stable`` alone, never
  as another user's items changing.
- **stable ids**: an item keeps its id across a reopen (``delete`` and ``update`` name items by id).
- **reset leaves no text on disk**: after ``reset(user)`` no file under ``data_dir`` holds that
  user's text (the suite reads every file's bytes for a distinctive planted string).

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
# Distinctive strings planted in a user's turns: after reset no file under data_dir may hold them.
ALICE_MARK = "Qvintex-7731"
ALICE_SECRET = f"My locker code at the gym is {ALICE_MARK} and my cat is named Pixel."
BOB_MARK = "Zorbalt-2209"
BOB_SECRET = f"My bike lock code is {BOB_MARK} and I keep bees on the roof."
UPDATED_TEXT = "My kayak trip on the river Tagus starts in August."


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


def listed(items: list[MemoryItem]) -> list[tuple[str, str]]:
    """Listed items as sorted (id, text) pairs: what two lists are compared by (list order is checked
    by ``test_list_order_is_stable`` alone)."""
    return sorted((item.id, item.text) for item in items)


def files_holding(root: Path, needle: str) -> list[str]:
    """Files under ``root`` whose bytes hold ``needle`` (as written, or lower case), relative paths."""
    if not root.exists():
        return []
    wanted = {needle.encode("utf-8"), needle.lower().encode("utf-8")}
    found = []
    for path in sorted(root.rglob("*")):
        try:
            data = path.read_bytes() if path.is_file() else b""
        except OSError:  # a file removed while scanning (a journal) holds nothing any more
            continue
        if any(w in data for w in wanted):
            found.append(str(path.relative_to(root)))
    return found


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
            fresh = self._retrieve_checked(memory, "fresh memory", "cat named Pixel", user_id=user)
            found += [f"{user}: {i.id} {i.text[:60]!r}" for i in fresh.items]
        assert not found, (
            "shared state: a new memory on an empty data_dir already holds items stored by another instance "
            f"({'; '.join(found[:4])}); keep all state on the instance and under data_dir, never in a "
            "class attribute or a module global (see test_instances_do_not_share_state)"
        )

    def _retrieve_checked(
        self, memory: Memory, check: str, query: str, *, user_id: str, k: int | None = None
    ) -> Retrieval:
        """``memory.retrieve``; the base class's refusal of what ``_retrieve`` returned (more than k
        items, a NaN score, an item that is not a MemoryItem) fails naming the check and the rule."""
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

    def _update_first_accepting(self, memory: Memory, check: str, user_id: str, text: str) -> MemoryItem:
        """Update the first of the user's listed items that takes an update (a profile's raw turns refuse)."""
        for item in memory.list_memories(user_id=user_id):
            try:
                memory.update(item.id, text, user_id=user_id)
            except MemlabError:
                continue
            return item
        raise AssertionError(f"{check}: none of {user_id}'s listed items accepted an update")

    # ------------------------------------------------------------------ basics
    def test_declares_identity(self, memory: Memory) -> None:
        assert memory.name and memory.description, (
            f"identity: a backend sets `name` and `description` (got {memory.name!r}, {memory.description!r})"
        )
        odd = [c for c in memory.capabilities if not isinstance(c, Capability)]
        assert not odd, f"identity: capabilities are memlab.Capability members, got {odd!r}"

    def test_config_rejects_unknown_keys(self, memory: Memory) -> None:
        with pytest.raises(MemlabError):
            type(memory).parse_config({"definitely_not_a_field": 1})

    def test_retrieve_before_ingest_is_empty(self, memory: Memory) -> None:
        result = self._retrieve_checked(memory, "retrieve before ingest", "what pets do I have?", user_id="nobody")
        assert result.items == [] and result.is_empty, (
            f"retrieve before ingest: a user who stored nothing gets an empty Retrieval, got {len(result.items)} "
            f"items and context {result.context[:200]!r}"
        )

    def test_invalid_user_id_rejected(self, memory: Memory) -> None:
        with pytest.raises(ValueError):
            memory.retrieve("x", user_id="../etc/passwd")
        with pytest.raises(ValueError):
            memory.ingest(session("s1", ("user", "hi")), user_id="")

    def test_empty_session_is_accepted(self, memory: Memory) -> None:
        memory.ingest(Session(id="empty", messages=[]), user_id="alice")
        self._retrieve_checked(memory, "empty session", "anything", user_id="alice")

    def test_ingest_then_recall(self, memory: Memory) -> None:
        memory.ingest(
            session("s1", ("user", ALICE_FACT), ("assistant", "Pixel is a lovely name for a cat!")),
            user_id="alice",
        )
        result = self._retrieve_checked(memory, "ingest then recall", "What is the name of my cat?", user_id="alice")
        if self.remembers:
            assert self._recalls(result, "pixel"), (
                f"ingest then recall: after ingesting {ALICE_FACT!r}, retrieve('What is the name of my cat?') "
                f"does not mention Pixel: {result.context[:300]!r}"
            )
            assert result.tokens > 0, "ingest then recall: a non-empty context counts tokens > 0"
        else:
            assert result.is_empty, f"ingest then recall: a backend that remembers nothing returned {result.context!r}"

    def test_k_bounds_items(self, memory: Memory) -> None:
        turns = [("user", f"Fact number {i}: I visited city {i} in year {2000 + i}.") for i in range(12)]
        memory.ingest(session("s1", *turns), user_id="alice")
        query = "Fact number: which city did I visit in which year?"
        result = self._retrieve_checked(memory, "k bounds items", query, user_id="alice", k=3)
        assert len(result.items) <= 3, (
            f"k bounds items: retrieve(k=3) returned {len(result.items)} items, expected at most 3"
        )
        if self.remembers:
            assert len(result.items) >= 1, "k bounds items: retrieve(k=3) over 12 matching turns returned nothing"

    def test_k_is_the_callers_bound_not_top_k(self, memory: Memory) -> None:
        """Two different ``k`` give two different bounds (a backend that reads config.top_k fails)."""
        turns = [("user", f"Fact number {i}: I visited city {i} in year {2000 + i}.") for i in range(12)]
        memory.ingest(session("s1", *turns), user_id="alice")
        query = "Fact number: which city did I visit in which year?"
        two = self._retrieve_checked(memory, "k is the caller's bound", query, user_id="alice", k=2)
        five = self._retrieve_checked(memory, "k is the caller's bound", query, user_id="alice", k=5)
        assert len(two.items) <= 2 and len(five.items) <= 5, (
            f"k is the caller's bound: k=2 gave {len(two.items)} items, k=5 gave {len(five.items)}"
        )
        if self.remembers:
            assert len(five.items) > len(two.items), (
                f"k is the caller's bound: k=5 returned no more items than k=2 ({len(five.items)}); "
                "_retrieve must use its k argument, not config.top_k"
            )

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
            found = self._retrieve_checked(memory, "ranking", query, user_id="alice", k=3)
            items = ranked(found.items)
            firsts[keyword] = items[0].text if items else None
        misses = [k for k, text in firsts.items() if text is None or k not in text.lower()]
        assert len(misses) <= 1, (
            f"ranking: the top item (highest score, or first without scores) did not match the query for "
            f"{misses}: {firsts}"
        )

    def test_items_trace_back_to_turns(self, memory: Memory) -> None:
        """Items carry ``session_id`` + ``turn_index`` (or ``turns``) naming the turn they came from."""
        if not self.remembers or not self.turn_sources:
            pytest.skip("backend's items do not come from turns")
        statements = [statement for _, statement, _ in self.TOPICS]
        memory.ingest(session("s7", *[("user", statement) for statement in statements]), user_id="alice")
        items = self._retrieve_checked(memory, "provenance", "kayak trip river Douro", user_id="alice", k=3).items
        assert items, "provenance: retrieve('kayak trip river Douro') returned no items"
        rule = "items from turns carry source session_id + turn_index (memlab.memory.turn_source) or a 'turns' list"
        for item in items:
            refs = item.source.get("turns") or [item.source]
            assert all(isinstance(r, dict) and "session_id" in r and "turn_index" in r for r in refs), (
                f"provenance: item {item.id!r} is not traceable, its source is {item.source!r}; {rule}"
            )
            for ref in refs:
                assert ref["session_id"] == "s7" and 0 <= int(ref["turn_index"]) < len(statements), (
                    f"provenance: item {item.id!r} names turn {ref['session_id']}#{ref['turn_index']}, but the "
                    f"only session is s7 with turns 0..{len(statements) - 1}"
                )
            if self.exact_recall and "turns" not in item.source:
                turn_text = statements[int(item.source["turn_index"])]
                assert turn_text in item.text or item.text in turn_text, (
                    f"provenance: item {item.id!r} says it is turn {item.source['turn_index']} ({turn_text!r}) "
                    f"but holds {item.text!r}"
                )

    # ------------------------------------------------------------------ instances and data_dir
    def test_instances_do_not_share_state(self, tmp_path: Path) -> None:
        """Two instances with two data directories are two memories (no class-level or global state)."""
        first = self.make_memory(tmp_path / "one")
        second = self.make_memory(tmp_path / "two")
        try:
            first.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
            found = self._retrieve_checked(second, "shared state", "cat named Pixel", user_id="alice")
            assert not self._recalls(found, "pixel"), (
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
            assert files, "state in data_dir: a persistent backend wrote nothing under its data_dir"
        elsewhere = self.make_memory(tmp_path / "elsewhere")
        try:
            found = self._retrieve_checked(elsewhere, "state in data_dir", "cat named Pixel", user_id="alice")
            assert not self._recalls(found, "pixel"), (
                "state in data_dir: a memory on another data_dir recalled what was stored under the first one"
            )
        finally:
            elsewhere.close()

    # ------------------------------------------------------------------ isolation
    def test_users_are_isolated(self, memory: Memory) -> None:
        memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
        memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
        for query in ("cat named Pixel", "bees on the roof", "tell me everything"):
            bob = self._retrieve_checked(memory, "users are isolated", query, user_id="bob")
            assert not self._recalls(bob, "pixel"), (
                f"users are isolated: retrieve({query!r}) for bob returned alice's turn: {bob.context[:300]!r}"
            )
            alice = self._retrieve_checked(memory, "users are isolated", query, user_id="alice")
            assert not self._recalls(alice, "bees"), (
                f"users are isolated: retrieve({query!r}) for alice returned bob's turn: {alice.context[:300]!r}"
            )
        carol = self._retrieve_checked(memory, "users are isolated", "cat named Pixel", user_id="carol")
        assert carol.is_empty, f"users are isolated: carol, who stored nothing, got {carol.context[:300]!r}"

    def test_reset_forgets_only_that_user(self, memory: Memory) -> None:
        memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
        memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
        memory.reset("alice")
        alice = self._retrieve_checked(memory, "reset", "cat named Pixel", user_id="alice")
        assert not self._recalls(alice, "pixel"), f"reset: alice still recalls Pixel after reset: {alice.context!r}"
        if self.remembers:
            bob = self._retrieve_checked(memory, "reset", "bees on the roof", user_id="bob")
            assert self._recalls(bob, "bees"), f"reset: reset('alice') lost bob's memory: {bob.context!r}"

    def test_reset_leaves_no_text_on_disk(self, tmp_path: Path) -> None:
        """After ``reset(user)`` no file under data_dir holds the user's text (every file's bytes are read)."""
        data = tmp_path / "data"
        memory = self.make_memory(data)
        try:
            memory.ingest(session("s1", ("user", ALICE_SECRET), ("assistant", "Noted.")), user_id="alice")
            memory.ingest(session("s2", ("user", f"Again: my code is {ALICE_MARK}.")), user_id="alice")
            memory.ingest(session("s1", ("user", BOB_SECRET)), user_id="bob")
            memory.reset("alice")
            held = files_holding(data, ALICE_MARK)
            assert not held, (
                f"reset leaves no text on disk: after reset('alice') these files under data_dir still hold her "
                f"text {ALICE_MARK!r}: {held} (a second table, a log, a cache or a journal kept it; "
                "nothing of a forgotten user may remain on disk)"
            )
            memory.close()
            held = files_holding(data, ALICE_MARK)
            assert not held, (
                f"reset leaves no text on disk: after reset('alice') and close() these files under data_dir "
                f"hold her text {ALICE_MARK!r}: {held}"
            )
            memory = self.make_memory(data)
            if self.remembers:
                bob = self._retrieve_checked(memory, "reset", "bike lock code bees", user_id="bob")
                assert self._recalls(bob, "bees"), f"reset: reset('alice') lost bob's memory: {bob.context!r}"
        finally:
            memory.close()

    # ------------------------------------------------------------------ sessions in parts
    def test_session_continuation(self, memory: Memory) -> None:
        first = memory.ingest(session("s1", ("user", ALICE_FACT), ("assistant", "Nice!")), user_id="alice")
        second = memory.ingest(session("s1", ("user", BOB_FACT.replace("I keep", "My aunt keeps"))), user_id="alice")
        assert first.first_turn == 0 and second.first_turn == 2, (
            f"session continuation: the parts of a session number their turns on (got first turns "
            f"{first.first_turn} and {second.first_turn}, expected 0 and 2)"
        )
        if Capability.LIST in memory.capabilities:
            ids = [item.id for item in memory.list_memories(user_id="alice")]
            doubled = sorted({i for i in ids if ids.count(i) > 1})
            assert not doubled, (
                f"unique ids: after a session's second part, alice's items {doubled} share an id "
                f"(listed ids {ids}); ids built from a message's place in its part collide with the first part's"
            )
        if not self.remembers:
            return
        pixel = self._retrieve_checked(memory, "session continuation", "cat named Pixel", user_id="alice")
        assert self._recalls(pixel, "pixel"), (
            f"session continuation: the first part was lost after the second was ingested: {pixel.context!r}"
        )
        result = self._retrieve_checked(memory, "session continuation", "Who keeps bees on a roof?", user_id="alice")
        assert self._recalls(result, "bees"), (
            f"session continuation: the second part is not recalled: {result.context!r}"
        )
        turn_indexes = [i.source.get("turn_index") for i in result.items if "bees" in i.text.lower()]
        if self.exact_recall and any(t is not None for t in turn_indexes):
            assert 2 in turn_indexes, (
                f"session continuation: the second part's message was stored as turn {turn_indexes}, expected 2 "
                "(message i of a part is turn first_turn + i)"
            )

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
        self._require_capabilities(memory, Capability.LIST)
        memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
        memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
        alice = " ".join(i.text for i in memory.list_memories(user_id="alice")).lower()
        assert "pixel" in alice and "bees" not in alice, (
            f"list is scoped: list_memories('alice') lists her items and nobody else's, got {alice[:300]!r}"
        )

    def test_list_order_is_stable(self, memory: Memory) -> None:
        """Rule "list order": with no write in between, two lists give the same items in the same order."""
        self._require_capabilities(memory, Capability.LIST)
        memory.ingest(session("s1", *[("user", statement) for _, statement, _ in self.TOPICS]), user_id="alice")
        orders = [[item.id for item in memory.list_memories(user_id="alice")] for _ in range(5)]
        changed = [order for order in orders[1:] if order != orders[0]]
        assert not changed, (
            f"list order: five calls of list_memories('alice') with no write in between returned her items in "
            f"different orders ({orders[0]} then {changed[0]}); the order is the backend's choice but must be "
            "stable (storage order is the natural one)"
        )

    def test_delete_cannot_cross_users(self, memory: Memory) -> None:
        self._require_capabilities(memory, Capability.LIST, Capability.DELETE)
        memory.ingest(session("b1", ("user", BOB_FACT)), user_id="bob")
        bob_items = memory.list_memories(user_id="bob")
        assert bob_items, "delete cannot cross users: bob's ingested turn is not listed"
        try:
            memory.delete(bob_items[0].id, user_id="alice")
        except (KeyError, LookupError, MemlabError):
            pass
        else:
            raise AssertionError(
                f"delete cannot cross users: alice's delete of bob's item {bob_items[0].id!r} did not raise "
                "NotFoundError (an id the user does not have is unknown to her)"
            )
        after = memory.list_memories(user_id="bob")
        assert listed(after) == listed(bob_items), (
            f"delete cannot cross users: alice's delete of bob's {bob_items[0].id!r} changed bob's items: "
            f"{listed(bob_items)} -> {listed(after)}"
        )

    def test_persists_across_reopen(self, tmp_path: Path) -> None:
        self._store_alice_fact_and_close(tmp_path / "persist")
        second = self.make_memory(tmp_path / "persist")
        try:
            found = self._retrieve_checked(second, "persistence", "cat named Pixel", user_id="alice")
            assert self._recalls(found, "pixel"), (
                f"persistence: after close() and a reopen on the same data_dir, alice no longer recalls what was "
                f"ingested (a write not committed or not flushed before ingest returned?): got {found.context!r}"
            )
            next_turn = second.ingest(session("s1", ("user", "More.")), user_id="alice").first_turn
            assert next_turn == 1, (
                f"persistence: after a reopen, session s1 (1 turn stored) continues at turn {next_turn}, expected 1 "
                "(override _next_turn_index to ask the store)"
            )
        finally:
            second.close()

    def test_ids_are_stable_across_reopen(self, tmp_path: Path) -> None:
        """Rule "stable ids": an item keeps its id across a reopen (delete and update name items by id)."""
        memory = self.make_memory(tmp_path / "data")
        try:
            self._require_capabilities(memory, Capability.LIST, Capability.PERSIST)
            memory.ingest(session("s1", *[("user", t) for _, t, _ in self.TOPICS[:3]]), user_id="alice")
            memory.ingest(session("s2", ("user", ALICE_FACT)), user_id="alice")
            before = listed(memory.list_memories(user_id="alice"))
            memory = self._reopen(memory, tmp_path / "data")
            after = listed(memory.list_memories(user_id="alice"))
            assert after == before, (
                f"stable ids: after a reopen alice's items changed ids or text: before {before}, after {after}; "
                "an item keeps its id for good (ids derived from positions or row numbers shift)"
            )
        finally:
            memory.close()

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
        assert self._recalls(bob, "bees") and not self._recalls(bob, "pixel"), (
            f"colliding ids: bob's retrieve must return his turn and not alice's with the same id: {bob.context!r}"
        )
        assert not self._recalls(alice, "bees"), (
            f"colliding ids: alice's retrieve returned bob's turn with her item's id: {alice.context!r}"
        )
        if Capability.LIST not in memory.capabilities:
            return
        lists = {u: memory.list_memories(user_id=u) for u in ("alice", "bob")}
        texts = " ".join(i.text for i in lists["alice"]).lower()
        assert "pixel" in texts and "bees" not in texts, (
            f"colliding ids: list_memories('alice') must hold her turn and not bob's: {listed(lists['alice'])}"
        )
        if Capability.DELETE not in memory.capabilities:
            return
        mine = next(i for i in lists["alice"] if "pixel" in i.text.lower())
        memory.delete(mine.id, user_id="alice")
        after = memory.list_memories(user_id="bob")
        assert listed(after) == listed(lists["bob"]), (
            f"colliding ids: deleting alice's {mine.id!r} changed bob's items (ids are unique per user, not "
            f"globally): {listed(lists['bob'])} -> {listed(after)}"
        )
        bob = self._retrieve_checked(memory, "colliding ids", "bees on the roof", user_id="bob")
        assert self._recalls(bob, "bees"), f"colliding ids: deleting alice's {mine.id!r} lost bob's turn"

    def test_update_cannot_cross_users(self, memory: Memory) -> None:
        """Alice updates an item whose id bob's item shares: bob's items stay exactly as they were."""
        self._require_capabilities(memory, Capability.LIST, Capability.UPDATE)
        memory.ingest(session("s1", ("user", ALICE_FACT), ("user", self.TOPICS[0][1])), user_id="alice")
        memory.ingest(session("s1", ("user", BOB_FACT), ("user", self.TOPICS[2][1])), user_id="bob")
        bob_before = listed(memory.list_memories(user_id="bob"))
        changed = self._update_first_accepting(memory, "update cannot cross users", "alice", UPDATED_TEXT)
        bob_after = listed(memory.list_memories(user_id="bob"))
        assert bob_after == bob_before, (
            f"update cannot cross users: alice's update of {changed.id!r} changed bob's items (ids are unique per "
            f"user: an update names the user and the id): {bob_before} -> {bob_after}"
        )
        mine = " ".join(i.text for i in memory.list_memories(user_id="alice")).lower()
        assert "tagus" in mine, f"update cannot cross users: alice's own item did not change: {mine[:300]!r}"
        if self.remembers:
            bob = self._retrieve_checked(memory, "update cannot cross users", "kayak trip river Tagus", user_id="bob")
            assert not self._recalls(bob, "tagus"), (
                f"update cannot cross users: bob's retrieve returns alice's updated text: {bob.context[:300]!r}"
            )

    # ------------------------------------------------------------------ deletion, update, forget
    DELETION_TURNS: ClassVar[list[str]] = [TOPICS[0][1], TOPICS[1][1], TOPICS[2][1]]  # cello, kayak, sourdough

    def _store_for_deletion(self, memory: Memory) -> tuple[MemoryItem, list[MemoryItem], list[MemoryItem]]:
        """Alice's three turns and Bob's (same session id): (alice's kayak item, alice's items, bob's items)."""
        memory.ingest(session("s1", *[("user", t) for t in self.DELETION_TURNS]), user_id="alice")
        memory.ingest(session("s1", ("user", self.TOPICS[1][1]), ("user", BOB_FACT)), user_id="bob")
        alice, bob = memory.list_memories(user_id="alice"), memory.list_memories(user_id="bob")
        victim = next((i for i in alice if "kayak" in i.text.lower()), None)
        assert victim is not None, f"delete: none of alice's listed items mentions the kayak turn: {listed(alice)}"
        return victim, alice, bob

    def _check_deleted(
        self, memory: Memory, check: str, victim: MemoryItem, alice: list[MemoryItem], bob: list[MemoryItem]
    ) -> None:
        now = memory.list_memories(user_id="alice")
        ids = sorted(i.id for i in now)
        expected = sorted(i.id for i in alice if i.id != victim.id)
        assert victim.id not in ids, f"{check}: deleted item {victim.id!r} is still listed: {ids}"
        assert ids == expected, (
            f"{check}: deleting {victim.id!r} must remove exactly that item; expected alice's items {expected}, "
            f"listed {ids} ({'a neighbour was deleted too' if len(ids) < len(expected) else 'ids changed'})"
        )
        assert listed(memory.list_memories(user_id="bob")) == listed(bob), (
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

    def test_update_is_visible_to_list_and_search(self, memory: Memory) -> None:
        """After ``update`` returns, list and retrieve show the new text, not the old one."""
        self._require_capabilities(memory, Capability.LIST, Capability.UPDATE)
        memory.ingest(session("s1", *[("user", t) for t in [*self.DELETION_TURNS, ALICE_FACT]]), user_id="alice")
        self._retrieve_checked(memory, "update is visible", "cello jazz quartet", user_id="alice")  # searched before
        changed = self._update_first_accepting(memory, "update is visible", "alice", UPDATED_TEXT)
        now = {item.id: item.text for item in memory.list_memories(user_id="alice")}
        assert any("tagus" in text.lower() for text in now.values()), (
            f"update is visible: after update({changed.id!r}) no listed item holds the new text: {now}"
        )
        if self.remembers:
            found = self._retrieve_checked(memory, "update is visible", "kayak trip river Tagus", user_id="alice")
            assert self._recalls(found, "tagus"), (
                f"update is visible: after update({changed.id!r}) retrieve('kayak trip river Tagus') does not find "
                f"the new text (a search index not updated with the item?): got {found.context[:300]!r}"
            )
            if self.exact_recall and changed.text not in now.values():
                old = self._retrieve_checked(memory, "update is visible", changed.text, user_id="alice")
                assert changed.text not in [i.text for i in old.items], (
                    f"update is visible: retrieve still returns {changed.id!r}'s old text {changed.text!r}"
                )

    def test_update_survives_reopen(self, tmp_path: Path) -> None:
        memory = self.make_memory(tmp_path / "data")
        try:
            self._require_capabilities(memory, Capability.LIST, Capability.UPDATE, Capability.PERSIST)
            memory.ingest(session("s1", *[("user", t) for t in [*self.DELETION_TURNS, ALICE_FACT]]), user_id="alice")
            self._update_first_accepting(memory, "update survives a reopen", "alice", UPDATED_TEXT)
            memory = self._reopen(memory, tmp_path / "data")
            texts = " ".join(i.text for i in memory.list_memories(user_id="alice")).lower()
            assert "tagus" in texts, f"update survives a reopen: the updated text is gone after a reopen: {texts!r}"
            found = self._retrieve_checked(
                memory, "update survives a reopen", "kayak trip river Tagus", user_id="alice"
            )
            assert self._recalls(found, "tagus"), (
                f"update survives a reopen: retrieve does not find the updated text after a reopen: {found.context!r}"
            )
        finally:
            memory.close()

    def test_forget_leaves_nothing_listable(self, tmp_path: Path) -> None:
        memory = self.make_memory(tmp_path / "data")
        try:
            self._require_capabilities(memory, Capability.LIST)
            memory.ingest(session("s1", ("user", ALICE_FACT)), user_id="alice")
            memory.ingest(session("s2", ("user", self.TOPICS[0][1])), user_id="alice")
            memory.ingest(session("s1", ("user", BOB_FACT)), user_id="bob")
            bob = listed(memory.list_memories(user_id="bob"))
            memory.reset("alice")
            left = memory.list_memories(user_id="alice")
            assert left == [], f"forget: reset('alice') left items listable: {[i.id for i in left]}"
            now = listed(memory.list_memories(user_id="bob"))
            assert now == bob, f"forget: reset('alice') changed bob's items: {bob} -> {now}"
            if Capability.PERSIST in memory.capabilities:
                memory = self._reopen(memory, tmp_path / "data")
                left = memory.list_memories(user_id="alice")
                assert left == [], f"forget: alice's items are back after a reopen: {[i.id for i in left]}"
                first = memory.ingest(session("s1", ("user", "Hello again.")), user_id="alice").first_turn
                assert first == 0, f"forget: a forgotten user's session numbering must start again at 0, got {first}"
        finally:
            memory.close()
