"""Queries on the profile store: versioned entries, the operation log, sessions and raw user turns.

Every statement comes from ``self.sql`` (``statements``): the SQLite spelling here, the PostgreSQL
one in ``pg_store.PgProfileStore``; the queries' logic is written once, here.

The schema, its migrations and the connection settings are in ``schema``. ``apply_session`` writes
a session's operations, its turns and its progress in one transaction, so a crash mid-session
leaves the store exactly as it was after the previous session.

Deletion is real: ``erase_entry`` keeps an entry's version chain (ids, versions, sessions) but
overwrites every text of it (aspect, value, reasons, evidence quotes, the quotes in its operation
log) and drops its vectors; ``delete_turn`` removes a raw turn and the quotes taken from it;
``reset`` removes a user's rows. Each ends with ``purge``: ``secure_delete`` has zeroed the freed
cells, and a WAL checkpoint(TRUNCATE) empties the write-ahead log that still held the old pages.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from memlab_plugins.profile.models import Evidence, Operation, OperationRecord, OpType, ProfileEntry, Stance
from memlab_plugins.profile.schema import SCHEMA_VERSION, Database, ProfileStoreError, connect, schema_version
from memlab_plugins.profile.statements import SQLITE, Statements

__all__ = ["SCHEMA_VERSION", "ProfileStore", "ProfileStoreError"]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


Vectorizer = Callable[[list[str]], np.ndarray]


class ProfileStore:
    """All profile data of one backend instance. Thread-safe through one lock (SQLite serialises anyway)."""

    sql: Statements = SQLITE  # the statements of this store's dialect (pg_store: POSTGRES)

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.RLock()
        self.db: Database = connect(self.path)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    # The storage interface the backend holds every call in (``pg_store.PgProfileStore`` fills them):
    @contextmanager
    def user_scope(self, user_id: str) -> Iterator[None]:
        """One user's read-resolve-write, serialised against that user's other writers.

        SQLite: one process owns the file (the directory lock) and callers already serialise one
        user's calls (``Memory.concurrent_users``), and each write is its own transaction: nothing to do.
        """
        yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Several reads that see one state (SQLite: writes are single transactions under one lock)."""
        yield

    @property
    def schema_version(self) -> int:
        return schema_version(self.db)

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute(self.sql.get_meta, (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction():
            self.db.execute(self.sql.set_meta, (key, value))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _entry(row: sqlite3.Row) -> ProfileEntry:
        return ProfileEntry(
            id=row["entry_id"],
            version=row["version"],
            user_id=row["user_id"],
            aspect=row["aspect"],
            value=row["value"],
            stance=Stance(row["stance"]),
            evidence=[Evidence.model_validate(e) for e in json.loads(row["evidence"])],
            valid_from=row["valid_from"],
            valid_from_time=_dt(row["valid_from_time"]),
            valid_to=row["valid_to"],
            valid_to_time=_dt(row["valid_to_time"]),
            reason=row["reason"],
            closed_reason=row["closed_reason"],
            op=OpType(row["op"]),
            kind=row["kind"],
            erased_at=_dt(row["erased_at"]),
        )

    def entries(self, user_id: str, *, current_only: bool = True) -> list[ProfileEntry]:
        """A user's entries (every version unless ``current_only``); erased entries are not among them."""
        sql = self.sql.current_entries if current_only else self.sql.all_entries
        rows = self.db.execute(sql, (user_id,)).fetchall()
        return [self._entry(r) for r in rows]

    def versions(self, user_id: str, entry_id: str) -> list[ProfileEntry]:
        """All versions of an entry, oldest first, erased ones included (empty when the user has no such entry)."""
        rows = self.db.execute(self.sql.versions, (user_id, entry_id)).fetchall()
        return [self._entry(r) for r in rows]

    def vectors(self, user_id: str, column: str) -> tuple[list[tuple[str, int]], np.ndarray | None]:
        """(entry_id, version) keys and the stored vectors of ``column`` for all of a user's versions."""
        statements = {"aspect_vector": self.sql.aspect_vectors, "text_vector": self.sql.text_vectors}
        if column not in statements:
            raise ValueError(column)
        rows = self.db.execute(statements[column], (user_id,)).fetchall()
        if not rows or any(r[2] is None for r in rows):
            return [(r[0], r[1]) for r in rows], None
        return [(r[0], r[1]) for r in rows], np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows])

    def operations(self, user_id: str, entry_id: str | None = None, *, since: int = 0) -> list[OperationRecord]:
        if entry_id is None:
            rows = self.db.execute(self.sql.operations, (user_id, since)).fetchall()
        else:
            rows = self.db.execute(self.sql.entry_operations, (user_id, since, entry_id)).fetchall()
        return [
            OperationRecord(
                seq=r["seq"],
                user_id=r["user_id"],
                session_id=r["session_id"],
                session_order=r["session_order"],
                op=OpType(r["op"]),
                entry_id=r["entry_id"],
                version=r["version"],
                reason=r["reason"],
                evidence=[Evidence.model_validate(e) for e in json.loads(r["evidence"])],
                source=r["source"],
                created_at=datetime.fromisoformat(r["created_at"]),
            )
            for r in rows
        ]

    def session_turns(self, user_id: str, session_id: str) -> int:
        row = self.db.execute(self.sql.session_turns, (user_id, session_id)).fetchone()
        return int(row[0]) if row else 0

    def session_order(self, user_id: str, session_id: str) -> int:
        """Order of a session among the user's sessions (a new session gets the next number)."""
        row = self.db.execute(self.sql.session_order, (user_id, session_id)).fetchone()
        if row:
            return int(row[0])
        row = self.db.execute(self.sql.last_session_order, (user_id,)).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def turns(self, user_id: str) -> tuple[list[dict[str, Any]], np.ndarray | None]:
        """The user's raw turns in session order (dicts with ``timestamp`` when the message had one) and their vectors."""
        rows = self.db.execute(self.sql.turns, (user_id,)).fetchall()
        items = [
            {
                "session_id": r[0],
                "turn_index": r[1],
                "role": r[2],
                "content": r[3],
                **({"timestamp": r[4]} if r[4] else {}),
            }
            for r in rows
        ]
        if not rows or any(r[5] is None for r in rows):
            return items, None
        return items, np.stack([np.frombuffer(r[5], dtype=np.float32) for r in rows])

    def turn(self, user_id: str, session_id: str, turn_index: int) -> dict[str, Any] | None:
        row = self.db.execute(self.sql.turn, (user_id, session_id, turn_index)).fetchone()
        if row is None:
            return None
        return {
            "session_id": row[0],
            "turn_index": row[1],
            "role": row[2],
            "content": row[3],
            **({"timestamp": row[4]} if row[4] else {}),
        }

    # ------------------------------------------------------------------ writing
    def apply_session(
        self,
        user_id: str,
        session_id: str | None,
        operations: Iterable[Operation],
        *,
        vectorize: Vectorizer,
        source: str,
        session_time: datetime | None = None,
        turn_times: dict[int, datetime] | None = None,
        turns_total: int | None = None,
        new_turns: Iterable[tuple[int, str, str, str | None, np.ndarray | None]] = (),
    ) -> list[OperationRecord]:
        """Apply a session's operations, store its turns and progress: all in one transaction.

        If any operation is invalid nothing is written and ``ProfileStoreError`` says which one.
        ``session_id`` None means an API call outside any session (``update``/``delete``).
        ``new_turns`` holds (turn index, role, text, ISO timestamp or None, vector or None). A version
        is dated by the timestamp of the turn that stated it (``turn_times``), else ``session_time``:
        never by where an ingest call happened to start, so a session split in parts dates alike.
        """
        ops = list(operations)
        vectorize = self._batched(user_id, ops, vectorize)
        with self._transaction():
            order = self.session_order(user_id, session_id) if session_id is not None else self._api_order(user_id)
            times = turn_times or {}
            seqs = [
                self._apply(
                    user_id,
                    session_id,
                    order,
                    op,
                    vectorize,
                    source,
                    (times.get(op.evidence[0].turn_index) if op.evidence else None) or session_time,
                )
                for op in ops
            ]
            for turn_index, role, content, timestamp, vector in new_turns:
                self.db.execute(
                    self.sql.upsert_turn,
                    (
                        user_id,
                        session_id,
                        turn_index,
                        role,
                        content,
                        None if vector is None else vector.tobytes(),
                        timestamp,
                    ),
                )
            if session_id is not None and turns_total is not None:
                self.db.execute(self.sql.upsert_session, (user_id, session_id, order, turns_total))
        return self.operations(user_id, since=min(seqs)) if seqs else []

    def _batched(self, user_id: str, ops: list[Operation], vectorize: Vectorizer) -> Vectorizer:
        """Embed every text the batch will need in one call (a model call costs far more than a text)."""
        texts: list[str] = []
        for op in ops:
            if op.op in (OpType.ADD, OpType.UPDATE):
                latest = self._current(user_id, op.entry_id) if op.entry_id else None
                aspect = op.aspect or (latest["aspect"] if latest else "")
                value = op.value or (latest["value"] if latest else "")
                texts += [aspect, f"{aspect}: {value}"]
        if not texts:
            return vectorize
        cache = dict(zip(texts, vectorize(texts)))

        def lookup(wanted: list[str]) -> np.ndarray:
            missing = [t for t in wanted if t not in cache]
            if missing:
                cache.update(zip(missing, vectorize(missing)))
            return np.stack([cache[t] for t in wanted])

        return lookup

    def _api_order(self, user_id: str) -> int:
        # Changes made through the API happen "now": after the latest session seen.
        row = self.db.execute(self.sql.last_session_order, (user_id,)).fetchone()
        return 0 if row[0] is None else int(row[0])

    def _current(self, user_id: str, entry_id: str) -> sqlite3.Row | None:
        # An erased entry is gone for every operation but ``history``.
        return self.db.execute(self.sql.current_version, (user_id, entry_id)).fetchone()

    def _apply(
        self,
        user_id: str,
        session_id: str | None,
        order: int,
        op: Operation,
        vectorize: Vectorizer,
        source: str,
        when: datetime | None,
    ) -> int:
        latest = self._current(user_id, op.entry_id) if op.entry_id else None
        if op.entry_id and latest is None and op.op is not OpType.ADD:
            raise ProfileStoreError(f"{op.op.value}: user {user_id!r} has no profile entry {op.entry_id!r}")
        version: int | None = None
        entry_id = op.entry_id
        if op.op is OpType.ADD:
            if latest is not None and latest["valid_to"] is None:
                raise ProfileStoreError(f"ADD: entry {op.entry_id!r} is current; use UPDATE to change it")
            # Entry ids are unique across users (the table's key): another user's id cannot be reused.
            if latest is None and entry_id is not None and self._id_taken(entry_id):
                raise ProfileStoreError(
                    f"ADD: entry id {entry_id!r} is already in use; leave entry_id empty or pick another"
                )
            if entry_id is None:
                entry_id = self._new_id()
            version = 1 if latest is None else latest["version"] + 1
            self._insert(
                user_id,
                entry_id,
                version,
                op.aspect,
                op.value,
                op.stance,
                op.kind or "statement",
                op,
                order,
                when,
                vectorize,
            )
        elif op.op in (OpType.UPDATE, OpType.DELETE):
            # ``latest`` is looked up only when ``op.entry_id`` is set (and checked above for these ops).
            assert latest is not None and entry_id is not None
            if latest["valid_to"] is not None:
                raise ProfileStoreError(f"{op.op.value}: entry {op.entry_id!r} is already closed")
            # A DELETE's evidence (the "I stopped X" turn) stays with the closed version.
            evidence = json.loads(latest["evidence"]) + (
                [e.model_dump() for e in op.evidence] if op.op is OpType.DELETE else []
            )
            self.db.execute(
                self.sql.close_version,
                (order, _iso(when), op.reason, json.dumps(evidence), entry_id, latest["version"]),
            )
            if op.op is OpType.UPDATE:
                version = latest["version"] + 1
                self._insert(
                    user_id,
                    entry_id,
                    version,
                    op.aspect or latest["aspect"],
                    op.value or latest["value"],
                    op.stance or Stance(latest["stance"]),
                    op.kind or latest["kind"],
                    op,
                    order,
                    when,
                    vectorize,
                )
            else:
                version = latest["version"]
        elif latest is not None:
            version = latest["version"]
        cursor = self.db.execute(
            self.sql.insert_operation,
            (
                user_id,
                session_id,
                order,
                op.op.value,
                entry_id,
                version,
                op.reason,
                json.dumps([e.model_dump() for e in op.evidence]),
                source,
                _now(),
            ),
        )
        return int(cursor.fetchall()[0][0])  # RETURNING seq

    def _insert(
        self,
        user_id: str,
        entry_id: str,
        version: int,
        aspect: str | None,
        value: str | None,
        stance: Stance | None,
        kind: str,
        op: Operation,
        order: int,
        when: datetime | None,
        vectorize: Vectorizer,
    ) -> None:
        assert aspect and value and stance
        vectors = vectorize([aspect, f"{aspect}: {value}"])
        self.db.execute(
            self.sql.insert_entry,
            (
                entry_id,
                version,
                user_id,
                aspect,
                value,
                Stance(stance).value,
                json.dumps([e.model_dump() for e in op.evidence]),
                order,
                _iso(when),
                op.reason,
                op.op.value,
                _now(),
                vectors[0].tobytes(),
                vectors[1].tobytes(),
                kind,
            ),
        )

    def _new_id(self) -> str:
        return "p_" + uuid.uuid4().hex[:12]

    def _id_taken(self, entry_id: str) -> bool:
        return self.db.execute(self.sql.id_taken, (entry_id,)).fetchone() is not None

    def revectorize(self, vectorize: Vectorizer) -> None:
        """Recompute stored vectors of entries and turns (the embedder changed since they were written).

        Every user's rows, in one transaction: each row is read and written back by its key, locked
        against other writers in between where the dialect has row locks (PostgreSQL's FOR UPDATE).
        """
        with self._transaction():
            rows = self.db.execute(self.sql.live_entry_texts).fetchall()
            for r in rows:
                v = vectorize([r["aspect"], f"{r['aspect']}: {r['value']}"])
                self.db.execute(
                    self.sql.set_entry_vectors, (v[0].tobytes(), v[1].tobytes(), r["entry_id"], r["version"])
                )
            turns = self.db.execute(self.sql.all_turn_texts).fetchall()
            if turns:
                for t, v in zip(turns, vectorize([t[3] for t in turns])):
                    self.db.execute(self.sql.set_turn_vector, (v.tobytes(), t[0], t[1], t[2]))

    # ------------------------------------------------------------------ deletion
    def erase_entry(self, user_id: str, entry_id: str, *, reason: str, vectorize: Vectorizer) -> None:
        """Delete an entry for real: its chain keeps its shape, every text of it is overwritten.

        The operation log keeps a DELETE (with ``reason``, which must not quote the user), and the
        earlier operations of the entry keep their type and version but lose reason and quotes. The
        raw turns the entry was taken from keep their other sentences: the quoted ones become
        ``[deleted]`` (and the turn is embedded again).
        """
        with self._transaction():
            latest = self._current(user_id, entry_id)
            if latest is None:
                raise ProfileStoreError(f"user {user_id!r} has no profile entry {entry_id!r}")
            self._redact_turns(user_id, self.versions(user_id, entry_id), vectorize)
            order = self._api_order(user_id)
            if latest["valid_to"] is None:
                self.db.execute(self.sql.end_version, (order, entry_id, latest["version"]))
            self.db.execute(self.sql.erase_entry_texts, (_now(), user_id, entry_id))
            self.db.execute(self.sql.redact_operations, (user_id, entry_id))
            self.db.execute(
                self.sql.insert_delete_operation, (user_id, order, entry_id, latest["version"], reason, _now())
            )
        self.purge()

    def _redact_turns(self, user_id: str, versions: list[ProfileEntry], vectorize: Vectorizer) -> None:
        said = {v.value for v in versions} | {e.quote for v in versions for e in v.evidence}
        quotes = sorted((q.strip() for q in said if len(q.strip()) >= 3), key=len, reverse=True)
        for session_id, turn_index in {(e.session_id, e.turn_index) for v in versions for e in v.evidence}:
            turn = self.turn(user_id, session_id, turn_index)
            if turn is None:
                continue
            content = turn["content"]
            for quote in quotes:
                content = content.replace(quote, "[deleted]")
            if content != turn["content"]:
                self.db.execute(
                    self.sql.set_turn_content,
                    (content, vectorize([content])[0].tobytes(), user_id, session_id, turn_index),
                )

    def delete_turn(self, user_id: str, session_id: str, turn_index: int) -> None:
        """Remove a raw turn and every quote taken from it (evidence of entries and operations).

        The session's turn count stays, so later parts of the session keep their numbering.
        """
        with self._transaction():
            cursor = self.db.execute(self.sql.delete_turn, (user_id, session_id, turn_index))
            if cursor.rowcount == 0:
                raise ProfileStoreError(f"user {user_id!r} has no turn {session_id}#{turn_index}")
            for select, update in (
                (self.sql.entry_evidence, self.sql.set_entry_evidence),
                (self.sql.operation_evidence, self.sql.set_operation_evidence),
            ):
                for row in self.db.execute(select, (user_id,)).fetchall():
                    evidence = json.loads(row["evidence"])
                    kept = [
                        {**e, "quote": ""} if (e["session_id"], e["turn_index"]) == (session_id, turn_index) else e
                        for e in evidence
                    ]
                    if kept != evidence:  # the row's key columns come first, its evidence last
                        self.db.execute(update, (json.dumps(kept), *tuple(row)[:-1]))
        self.purge()

    def _delete_user_rows(self, user_id: str) -> None:
        for statement in (
            self.sql.delete_user_entries,
            self.sql.delete_user_operations,
            self.sql.delete_user_sessions,
            self.sql.delete_user_turns,
        ):
            self.db.execute(statement, (user_id,))

    def reset(self, user_id: str) -> None:
        with self._transaction():
            self._delete_user_rows(user_id)
        self.purge()

    def purge(self) -> None:
        """Leave no deleted text in the files: freed cells are zeroed (secure_delete), the WAL is emptied."""
        if self.path is None or self.sql.purge is None:
            return
        with self._lock:
            busy = self.db.execute(self.sql.purge).fetchone()[0]
            if busy:  # another connection still reads old pages; a later purge finishes the job
                raise ProfileStoreError(f"{self.path}: could not empty the write-ahead log (store busy)")

    def export_user(self, user_id: str) -> dict[str, Any]:
        return {
            "format": "memlab-profile",
            "schema_version": SCHEMA_VERSION,
            "user_id": user_id,
            "entries": [e.model_dump(mode="json") for e in self.entries(user_id, current_only=False)],
            "operations": [o.model_dump(mode="json") for o in self.operations(user_id)],
            "erased_entries": [
                {"id": e.id, "versions": e.version, "erased_at": e.erased_at.isoformat() if e.erased_at else None}
                for e in self._erased(user_id)
            ],
            "sessions": [dict(r) for r in self.db.execute(self.sql.user_sessions, (user_id,))],
            "turns": self.turns(user_id)[0],
        }

    def _erased(self, user_id: str) -> list[ProfileEntry]:
        """The latest version of each erased entry (no text left: ids, versions and dates only)."""
        rows = self.db.execute(self.sql.erased_entries, (user_id,)).fetchall()
        return [self._entry(r) for r in rows]

    def import_user(self, user_id: str, data: dict[str, Any], *, vectorize: Vectorizer) -> int:
        """Replace ``user_id``'s profile with an export (possibly of another user id). Atomic.

        Entry ids are unique across the store's users, so an entry whose id another user of this
        store holds (an export copied from one user to another) gets a new id, in its operations too.
        """
        if data.get("format") != "memlab-profile":
            raise ProfileStoreError("import: not a memlab profile export (field 'format')")
        entries = [ProfileEntry.model_validate({**e, "user_id": user_id}) for e in data.get("entries", [])]
        ops = [OperationRecord.model_validate({**o, "user_id": user_id}) for o in data.get("operations", [])]
        with self._transaction():
            self._delete_user_rows(user_id)
            renamed: dict[str, str] = {}
            for e in entries:
                if e.id not in renamed and self._id_taken(e.id):
                    renamed[e.id] = self._new_id()
            entries = [e.model_copy(update={"id": renamed.get(e.id, e.id)}) for e in entries]
            ops = [
                o.model_copy(update={"entry_id": renamed.get(o.entry_id, o.entry_id)}) if o.entry_id else o for o in ops
            ]
            for e in entries:
                v = vectorize([e.aspect, e.text])
                self.db.execute(
                    self.sql.import_entry,
                    (
                        e.id,
                        e.version,
                        user_id,
                        e.aspect,
                        e.value,
                        e.stance.value,
                        json.dumps([x.model_dump() for x in e.evidence]),
                        e.valid_from,
                        _iso(e.valid_from_time),
                        e.valid_to,
                        _iso(e.valid_to_time),
                        e.reason,
                        e.closed_reason,
                        e.op.value,
                        _now(),
                        v[0].tobytes(),
                        v[1].tobytes(),
                        e.kind,
                    ),
                )
            for o in ops:
                self.db.execute(
                    self.sql.insert_operation,
                    (
                        user_id,
                        o.session_id,
                        o.session_order,
                        o.op.value,
                        o.entry_id,
                        o.version,
                        o.reason,
                        json.dumps([x.model_dump() for x in o.evidence]),
                        o.source,
                        _iso(o.created_at),
                    ),
                )
            for s in data.get("sessions", []):
                self.db.execute(
                    self.sql.insert_session, (user_id, s["session_id"], int(s["session_order"]), int(s["turns"]))
                )
            turns = list(data.get("turns", []))
            vectors: np.ndarray | list[np.ndarray] = vectorize([t["content"] for t in turns]) if turns else []
            for t, v in zip(turns, vectors):
                self.db.execute(
                    self.sql.upsert_turn,
                    (
                        user_id,
                        t["session_id"],
                        int(t["turn_index"]),
                        t["role"],
                        t["content"],
                        v.tobytes(),
                        t.get("timestamp"),
                    ),
                )
        return len(entries)
