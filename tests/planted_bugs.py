"""A small persistent SQLite backend written from docs/plugins.md, and the 14 data-loss bugs of issue 35
planted in it one at a time, with the conformance check that must catch each and what its message says.

``SqliteTurns`` stores every turn as a row (list, update, delete, persist) and passes the whole
suite; each ``BUGS`` entry is a subclass that changes one thing. ``run_suite`` runs every check of
``MemoryConformance`` in-process (the ``memory`` fixture and ``tmp_path`` built by hand) and returns
the failures, check name -> message, so a test can say which check caught a bug and with what words.
"""

from __future__ import annotations

import inspect
import math
import random
import re
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memlab import Capability, Memory, MemoryItem, Retrieval, Session
from memlab.errors import NotFoundError
from memlab.memory import render_turns, turn_source
from memlab.testing import MemoryConformance

WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


class SqliteTurns(Memory):
    """Turns in one SQLite table, ranked by word overlap with the query (the reference: no bug)."""

    name = "sqlite_turns"
    description = "Turns stored verbatim in SQLite, ranked by word overlap."
    capabilities = frozenset({Capability.LIST, Capability.UPDATE, Capability.DELETE, Capability.PERSIST})

    def __init__(self, config: Any = None, *, data_dir: Any = None, cache_dir: Any = None) -> None:
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        path = str(self.data_dir / "memory.sqlite") if self.data_dir is not None else ":memory:"
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("PRAGMA secure_delete=ON")  # deleted rows are zeroed, not left in free pages
        self.db.executescript(
            "CREATE TABLE IF NOT EXISTS items (seq INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT, id TEXT,"
            " session_id TEXT, turn_index INTEGER, role TEXT, text TEXT);"
            "CREATE TABLE IF NOT EXISTS log (user_id TEXT, id TEXT, text TEXT);"
        )
        self.db.commit()

    # -- helpers the planted bugs override
    def _commit(self) -> None:
        self.db.commit()

    def _item_id(self, session: Session, turn: int) -> str:
        return f"{session.id}#{turn}"

    def _rows(self, user_id: str) -> list[tuple[Any, ...]]:
        return self.db.execute(
            "SELECT id, session_id, turn_index, role, text FROM items WHERE user_id=? ORDER BY seq", (user_id,)
        ).fetchall()

    def _to_item(self, row: tuple[Any, ...], score: float | None = None) -> MemoryItem:
        item_id, session_id, turn_index, role, text = row
        source = {"session_id": session_id, "turn_index": turn_index, "role": role}
        return MemoryItem(id=item_id, text=text, score=score, source=source)

    def _score(self, asked: set[str], text: str) -> float:
        return float(len(asked & words(text)))

    def _searchable(self, user_id: str) -> list[tuple[Any, ...]]:
        return self._rows(user_id)

    # -- the contract
    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        for i, message in enumerate(session.messages):
            source = turn_source(session, first_turn + i, message)
            row = (user_id, self._item_id(session, first_turn + i), session.id, source["turn_index"])
            self.db.execute(
                "INSERT INTO items (user_id, id, session_id, turn_index, role, text) VALUES (?, ?, ?, ?, ?, ?)",
                (*row, message.role, message.content),
            )
        self._commit()

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        asked = words(query)
        hits = [(self._score(asked, row[4]), n, row) for n, row in enumerate(self._searchable(user_id))]
        best = sorted((h for h in hits if not h[0] == 0), key=lambda h: (-h[0], h[1]))[:k]
        items = [self._to_item(row, score) for score, _, row in sorted(best, key=lambda h: h[1])]
        return Retrieval(items=items, context=render_turns(items))

    def _reset(self, user_id: str) -> None:
        self.db.execute("DELETE FROM items WHERE user_id=?", (user_id,))
        self.db.execute("DELETE FROM log WHERE user_id=?", (user_id,))
        self._commit()

    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        row = self.db.execute(
            "SELECT MAX(turn_index) FROM items WHERE user_id=? AND session_id=?", (user_id, session_id)
        ).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def _list(self, user_id: str) -> list[MemoryItem]:
        return [self._to_item(row) for row in self._rows(user_id)]

    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        changed = self.db.execute("UPDATE items SET text=? WHERE user_id=? AND id=?", (text, user_id, item_id))
        if changed.rowcount == 0:
            raise NotFoundError(f"user {user_id!r} has no memory {item_id!r}")
        self._commit()
        return next(i for i in self._list(user_id) if i.id == item_id)

    def _delete(self, item_id: str, *, user_id: str) -> None:
        gone = self.db.execute("DELETE FROM items WHERE user_id=? AND id=?", (user_id, item_id))
        if gone.rowcount == 0:
            raise NotFoundError(f"user {user_id!r} has no memory {item_id!r}")
        self._commit()

    def close(self) -> None:
        self.db.close()


# ---------------------------------------------------------------------- the planted bugs, one per class
class ResetLeavesTextOnDisk(SqliteTurns):
    """An audit table keeps every turn's text; reset clears the items table only."""

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        for i, message in enumerate(session.messages):
            self.db.execute(
                "INSERT INTO log VALUES (?, ?, ?)", (user_id, self._item_id(session, first_turn + i), message.content)
            )
        super()._ingest(session, user_id=user_id, first_turn=first_turn)

    def _reset(self, user_id: str) -> None:
        self.db.execute("DELETE FROM items WHERE user_id=?", (user_id,))
        self._commit()


class UpdateCrossesUsers(SqliteTurns):
    """update checks the user owns the id, then changes every row with that id (everyone's)."""

    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        if not any(i.id == item_id for i in self._list(user_id)):
            raise NotFoundError(item_id)
        self.db.execute("UPDATE items SET text=? WHERE id=?", (text, item_id))
        self._commit()
        return next(i for i in self._list(user_id) if i.id == item_id)


class RandomListOrder(SqliteTurns):
    """list returns the rows in whatever order a set gives them (here: shuffled)."""

    def _list(self, user_id: str) -> list[MemoryItem]:
        items = super()._list(user_id)
        random.shuffle(items)
        return items


class DuplicateIdsOnReingest(SqliteTurns):
    """Ids and turn numbers from a message's place in its part: a session's second part reuses them."""

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        super()._ingest(session, user_id=user_id, first_turn=0)


class CrossUserRetrieve(SqliteTurns):
    """retrieve searches every user's rows."""

    def _searchable(self, user_id: str) -> list[tuple[Any, ...]]:
        return self.db.execute("SELECT id, session_id, turn_index, role, text FROM items ORDER BY seq").fetchall()


class LostCommit(SqliteTurns):
    """ingest never commits: the connection sees its own rows, a reopen sees nothing."""

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        self._commit = lambda: None  # type: ignore[method-assign]
        super()._ingest(session, user_id=user_id, first_turn=first_turn)
        del self._commit


class UpdateNotSearchable(SqliteTurns):
    """Search reads an index built at ingest; update changes the table, not the index."""

    def __init__(self, config: Any = None, *, data_dir: Any = None, cache_dir: Any = None) -> None:
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        self._index: dict[str, list[tuple[Any, ...]]] = {}

    def _searchable(self, user_id: str) -> list[tuple[Any, ...]]:
        if user_id not in self._index:
            self._index[user_id] = self._rows(user_id)
        return self._index[user_id]

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        super()._ingest(session, user_id=user_id, first_turn=first_turn)
        self._index[user_id] = self._rows(user_id)  # indexed as it is stored

    def _reset(self, user_id: str) -> None:
        super()._reset(user_id)
        self._index.pop(user_id, None)

    def _delete(self, item_id: str, *, user_id: str) -> None:
        super()._delete(item_id, user_id=user_id)
        self._index.pop(user_id, None)


class UnstableIdsAcrossReopen(SqliteTurns):
    """Ids handed out per open (a fresh uuid per row when the instance first reads it)."""

    def __init__(self, config: Any = None, *, data_dir: Any = None, cache_dir: Any = None) -> None:
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        self._ids: dict[tuple[str, str], str] = {}

    def _rows(self, user_id: str) -> list[tuple[Any, ...]]:
        rows = super()._rows(user_id)
        out = []
        for stored_id, *rest in rows:
            public = self._ids.setdefault((user_id, stored_id), uuid.uuid4().hex[:8])
            out.append((public, *rest))
        return out

    def _stored_id(self, user_id: str, public: str) -> str:
        return next((s for (u, s), p in self._ids.items() if u == user_id and p == public), public)

    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        self._rows(user_id)
        super()._update(self._stored_id(user_id, item_id), text, user_id=user_id)
        return next(i for i in self._list(user_id) if i.id == item_id)

    def _delete(self, item_id: str, *, user_id: str) -> None:
        self._rows(user_id)
        super()._delete(self._stored_id(user_id, item_id), user_id=user_id)


class NanScores(SqliteTurns):
    """A score normalised by a norm that is zero: 0/0 is NaN."""

    def _score(self, asked: set[str], text: str) -> float:
        overlap = len(asked & words(text))
        return math.nan if overlap else 0.0


class ItemsWithoutSource(SqliteTurns):
    """Items carry no provenance: retrieval metrics cannot trace them to turns."""

    def _to_item(self, row: tuple[Any, ...], score: float | None = None) -> MemoryItem:
        return MemoryItem(id=row[0], text=row[4], score=score)


class StringsInRetrieval(SqliteTurns):
    """``Retrieval.model_construct`` skips validation: the items are plain strings."""

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        found = super()._retrieve(query, user_id=user_id, k=k)
        return Retrieval.model_construct(items=[i.text for i in found.items], context=found.context)


class DeleteCrossesUsers(SqliteTurns):
    """delete removes every row with the id, whoever owns it."""

    def _delete(self, item_id: str, *, user_id: str) -> None:
        gone = self.db.execute("DELETE FROM items WHERE id=?", (item_id,))
        if gone.rowcount == 0:
            raise NotFoundError(item_id)
        self._commit()


class DeleteNotDurable(SqliteTurns):
    """delete is never committed: gone for this connection, back after a reopen."""

    def _delete(self, item_id: str, *, user_id: str) -> None:
        gone = self.db.execute("DELETE FROM items WHERE user_id=? AND id=?", (user_id, item_id))
        if gone.rowcount == 0:
            raise NotFoundError(item_id)


class NumberingRestartsAfterReopen(SqliteTurns):
    """Turn numbers come from RAM: after a reopen a session starts again at 0 and its ids collide."""

    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        return Memory._next_turn_index(self, user_id, session_id)


@dataclass(frozen=True)
class PlantedBug:
    backend: type[SqliteTurns]
    check: str  # the conformance check that must fail
    message: str  # a regex its failure message must match: the rule's name first


BUGS: dict[str, PlantedBug] = {
    "reset leaves text on disk": PlantedBug(
        ResetLeavesTextOnDisk,
        "test_reset_leaves_no_text_on_disk",
        r"reset leaves no text on disk: after reset\('alice'\) these files under data_dir still hold her text "
        r"'Qvintex-7731': \['memory.sqlite'\]",
    ),
    "update crosses users": PlantedBug(
        UpdateCrossesUsers,
        "test_update_cannot_cross_users",
        r"update cannot cross users: alice's update of 's1#0' changed bob's items",
    ),
    "random list order": PlantedBug(
        RandomListOrder, "test_list_order_is_stable", r"list order: five calls of list_memories\('alice'\)"
    ),
    "duplicate ids on re-ingest": PlantedBug(
        DuplicateIdsOnReingest,
        "test_session_continuation",
        r"unique ids: after a session's second part, alice's items \['s1#0'\] share an id",
    ),
    "cross-user retrieve": PlantedBug(
        CrossUserRetrieve,
        "test_users_are_isolated",
        r"users are isolated: retrieve\('cat named Pixel'\) for bob returned alice's turn",
    ),
    "lost commit": PlantedBug(
        LostCommit,
        "test_persists_across_reopen",
        r"persistence: after close\(\) and a reopen on the same data_dir, alice no longer recalls",
    ),
    "update not visible to search": PlantedBug(
        UpdateNotSearchable,
        "test_update_is_visible_to_list_and_search",
        r"update is visible: after update\('s1#0'\) retrieve\('kayak trip river Tagus'\) does not find the new text",
    ),
    "unstable ids across reopen": PlantedBug(
        UnstableIdsAcrossReopen, "test_ids_are_stable_across_reopen", r"stable ids: after a reopen alice's items"
    ),
    "NaN scores": PlantedBug(
        NanScores,
        "test_ingest_then_recall",
        r"ingest then recall: backend 'sqlite_turns' \(planted_bugs.NanScores\): _retrieve returned item 's1#0' "
        r"with score nan; a score is a finite number",
    ),
    "items without a source": PlantedBug(
        ItemsWithoutSource,
        "test_items_trace_back_to_turns",
        r"provenance: item 's7#1' is not traceable, its source is \{\}",
    ),
    "strings in a Retrieval": PlantedBug(
        StringsInRetrieval,
        "test_ingest_then_recall",
        r"ingest then recall: backend 'sqlite_turns' \(planted_bugs.StringsInRetrieval\): _retrieve returned item 0 "
        r"as str .*expected memlab.MemoryItem",
    ),
    "delete crosses users": PlantedBug(
        DeleteCrossesUsers,
        "test_delete_cannot_cross_users",
        r"delete cannot cross users: alice's delete of bob's item 'b1#0' did not raise NotFoundError",
    ),
    "delete not durable": PlantedBug(
        DeleteNotDurable,
        "test_delete_survives_reopen",
        r"delete survives a reopen: deleted item 's1#1' is still listed",
    ),
    "numbering restarts after reopen": PlantedBug(
        NumberingRestartsAfterReopen,
        "test_persists_across_reopen",
        r"persistence: after a reopen, session s1 \(1 turn stored\) continues at turn 0, expected 1",
    ),
}


def run_suite(make_memory: Callable[[Path], Memory], root: Path) -> dict[str, str]:
    """Every check of ``MemoryConformance`` on ``make_memory``: check name -> failure message (passed
    and skipped checks are left out)."""
    suite_class = type("Suite", (MemoryConformance,), {"make_memory": lambda self, data_dir: make_memory(data_dir)})
    suite = suite_class()
    failures: dict[str, str] = {}
    for name in sorted(n for n in dir(suite_class) if n.startswith("test_")):
        method = getattr(suite, name)
        wanted = inspect.signature(method).parameters
        tmp = root / name
        tmp.mkdir(parents=True)
        memory = None
        try:
            kwargs: dict[str, Any] = {}
            if "memory" in wanted:
                memory = make_memory(tmp / "data")
                suite._check_fresh(memory)
                kwargs["memory"] = memory
            if "tmp_path" in wanted:
                kwargs["tmp_path"] = tmp
            method(**kwargs)
        except pytest.skip.Exception:
            pass
        except (Exception, pytest.fail.Exception) as exc:
            failures[name] = f"{type(exc).__name__}: {exc}"
        finally:
            if memory is not None:
                memory.close()
    return failures
