"""Ingesting sessions into mem0: verbatim, bulk, with mem0's fact extraction, and per speaker.

Every memory carries its session, turn and (when the message has one) timestamp as mem0 metadata.
With inference, the session date also reaches the extraction prompt, so "yesterday" is resolved
against the conversation: mem0's open-source ``add()`` refuses its ``timestamp`` argument
("platform-only") and fills the prompt's "Observation Date" with today, so the date is passed
through ``add(prompt=...)``, the per-call custom instructions mem0 appends to the prompt.

A small or misconfigured model fails in two ways, both counted (``ExtractionStats``), neither fatal:
mem0 cannot read a reply (it logs and stores nothing from it), or the endpoint refuses a window's
request (its prompt is over the model's window): that window is skipped.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from memlab.errors import ShuttingDownError
from memlab.llm.errors import refused_request
from memlab.memory import format_date
from memlab.types import Message, Session

log = logging.getLogger(__name__)
Turns = list[tuple[int, Message]]
# What mem0 logs (it raises nothing, and stores nothing from the reply) when it cannot read an extraction reply.
_UNREADABLE_REPLY = "Error parsing extraction response"
_KEPT_FAILURES = 100
_NAME_PREFIX = re.compile(r"^(?P<name>[^:\n]{1,60}):\s")
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_.@\-]+")


@dataclass(frozen=True)
class Perspective:
    """Whose memories a mem0 user id holds, and how messages are shown to mem0 for it.

    Plain use: one perspective, the memlab user id, roles as given. Preset ``locomo-eval`` (mem0's
    evaluation): one perspective per speaker; that speaker's turns become ``user`` messages and the
    other speaker's ``assistant`` messages, each text starting with its speaker's name.
    """

    mem0_user_id: str
    own_role: str | None = None
    names: dict[str, str] = field(default_factory=dict)  # role -> speaker name (preset only)

    def message(self, message: Message) -> dict[str, str]:
        role = message.role if self.own_role is None else ("user" if message.role == self.own_role else "assistant")
        content = message.content
        name = self.names.get(message.role)
        if name and not content.startswith(f"{name}:"):
            content = f"{name}: {content}"
        return {"role": role, "content": content}


def speaker_name(session: Session, role: str) -> str | None:
    """The name a session's first ``role`` turn starts with ("Caroline: ..."), if any."""
    for message in session.messages:
        if message.role == role:
            match = _NAME_PREFIX.match(message.content)
            return match.group("name").strip() if match else None
    return None


def perspective_user_id(user_id: str, name: str) -> str:
    return f"{user_id}:{_UNSAFE_ID_CHARS.sub('_', name).strip('_') or 'speaker'}"


# The caller's Message.metadata, under one key of mem0's metadata so it cannot collide with mem0's own.
CALLER_METADATA = "memlab_metadata"


def message_metadata(session: Session, turn: int, message: Message) -> dict[str, Any]:
    meta: dict[str, Any] = {"session_id": session.id, "turn_index": turn}
    if message.timestamp is not None:
        meta["timestamp"] = message.timestamp.isoformat()
    if message.metadata:
        meta[CALLER_METADATA] = dict(message.metadata)
    return meta


def observation_note(when: datetime) -> str:
    return (
        f"Observation Date override: these New Messages were exchanged on {when.date().isoformat()} "
        f"({format_date(when)}). Use this date as the Observation Date - not the Observation Date or "
        'Current Date given above - to resolve relative time references ("yesterday", "last week", '
        '"next month"), and write absolute dates in the memories.'
    )


@dataclass
class ExtractionStats:
    """What mem0's fact extraction did in one backend instance: windows sent, skipped, unreadable."""

    windows: int = 0
    failed_windows: int = 0
    unparsed_replies: int = 0
    failures: list[str] = field(default_factory=list)  # the newest reasons a window was skipped

    def skipped(self, reason: str) -> None:
        log.warning("mem0: %s; the window was skipped, its messages are not in memory", reason)
        self.failed_windows += 1
        self.failures = [*self.failures, reason][-_KEPT_FAILURES:]

    def counts(self) -> dict[str, int]:
        return {
            "windows": self.windows,
            "failed_windows": self.failed_windows,
            "unparsed_replies": self.unparsed_replies,
        }


class _UnreadableReplies(logging.Handler):
    """Counts the calling thread's "cannot parse the reply" records from mem0 (other threads serve other users)."""

    def __init__(self, stats: ExtractionStats) -> None:
        super().__init__(logging.ERROR)
        self.stats = stats
        self.thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread and record.getMessage().startswith(_UNREADABLE_REPLY):
            self.stats.unparsed_replies += 1


@contextmanager
def counting_unreadable_replies(stats: ExtractionStats) -> Iterator[None]:
    handler = _UnreadableReplies(stats)
    logger = logging.getLogger("mem0.memory.main")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


class IngestInterrupted(ShuttingDownError):
    """The process is shutting down: an ingest stopped between writes and removed what it had stored."""


# Messages embedded per model call, and written per hold of the store's write lock: mem0's embedded
# qdrant commits each point on its own (~20 ms with fsync), so another user's search waits for one
# small batch at most.
EMBED_BATCH = 16
WRITE_BATCH = 4


class IngestMixin:
    """The ``_ingest`` side of ``Mem0Memory``.

    Every write is all or nothing, also across a kill: the ledger records the write (user, session,
    first turn) before anything reaches mem0, and commits the memories' owners together with the new
    turn count when all are stored (``Ledger.commit_write``). A failure removes what was stored; a
    kill leaves the write pending, and the next open removes it (``_recover_pending``). Messages are
    embedded ``EMBED_BATCH`` per model call and written ``WRITE_BATCH`` per hold of the store's write
    lock, so other users' searches get the model and the store in between.
    """

    _mem: Any
    _batcher: Any
    _store: Any
    _stopping: threading.Event
    config: Any
    infer: bool
    extraction: ExtractionStats

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        turns = [
            (first_turn + i, m)
            for i, m in enumerate(session.messages)
            if m.content.strip() and (self.infer or m.role != "system")  # mem0 skips system messages itself
        ]
        if self.config.speaker_perspectives:
            turns = [(t, m) for t, m in turns if m.role != "system"]  # speakers only
        total = first_turn + len(session.messages)
        if not turns:
            return
        perspectives = self._perspectives(session, user_id)
        mem0_ids = [p.mem0_user_id for p in perspectives]
        ledger = self.ledger  # type: ignore[attr-defined]
        ledger.begin_write(user_id, session.id, first_turn, mem0_ids)
        done: list[tuple[str, str]] = []  # (memory id, mem0 user id) stored so far
        try:
            if self.infer:
                self._ingest_inferred(session, turns, perspectives=perspectives, done=done)
            elif self.config.bulk_insert:
                self._ingest_bulk(session, turns, perspectives=perspectives, done=done)
            else:
                self._ingest_verbatim(session, turns, perspectives=perspectives, done=done)
        except BaseException:
            # All or nothing: what this write stored is removed again (text included), so that a
            # retry (the turn count did not advance) stores each message once.
            with self._store.write():
                self._remove_write(user_id, session.id, first_turn, mem0_ids, known=[m for m, _ in done])
            raise
        ledger.commit_write(user_id, session.id, total, done)

    def _check_running(self) -> None:
        if self._stopping.is_set():
            raise IngestInterrupted("the memory service is shutting down: this write was not stored, send it again")

    def _remove_write(
        self, user_id: str, session_id: str, first_turn: int, mem0_ids: list[str], *, known: list[str]
    ) -> None:
        """Erase every memory of an incomplete write: the ids it reported and any memory of its mem0
        users in that session from ``first_turn`` on (a kill can land before an id was reported)."""
        found = set(known)
        for mem0_id in mem0_ids:
            records = self._mem.get_all(filters={"user_id": mem0_id}, top_k=1_000_000).get("results", [])
            for record in records:
                meta = record.get("metadata") or {}
                turn = meta.get("turn_index")
                if meta.get("session_id") == session_id and turn is not None and int(turn) >= first_turn:
                    found.add(str(record["id"]))
        self._erase_memories(sorted(found), user_id=user_id)  # type: ignore[attr-defined]
        self.ledger.abandon_write(user_id, session_id)  # type: ignore[attr-defined]

    def _recover_pending(self) -> list[str]:
        """Remove what writes killed half-way had stored (called when the store opens)."""
        recovered = []
        for user_id, session_id, first_turn, mem0_ids in self.ledger.pending_writes():  # type: ignore[attr-defined]
            self._remove_write(user_id, session_id, first_turn, mem0_ids, known=[])
            recovered.append(f"user {user_id!r} session {session_id!r} from turn {first_turn}")
        if recovered:
            log.warning("mem0: removed %d incomplete write(s) a crash interrupted: %s", len(recovered), recovered)
        return recovered

    def _perspectives(self, session: Session, user_id: str) -> list[Perspective]:
        if not self.config.speaker_perspectives:
            return [Perspective(user_id)]
        known = self.ledger.speakers(user_id)  # type: ignore[attr-defined]
        for role in ("user", "assistant"):
            if role not in known:
                name = speaker_name(session, role) or role
                mem0_id = perspective_user_id(user_id, name)
                if any(mem0_id == other for _, other in known.values()):
                    mem0_id = perspective_user_id(user_id, f"{name}_{role}")
                self.ledger.add_speaker(user_id, role, name, mem0_id)  # type: ignore[attr-defined]
                known[role] = (name, mem0_id)
        names = {role: name for role, (name, _) in known.items()}
        return [Perspective(known[role][1], own_role=role, names=names) for role in ("user", "assistant")]

    def _embed_for_add(self, texts: list[str], *, needed: bool) -> list[Any]:
        """A write's vectors, computed outside the store lock: one model call (``batch_embed``) or one
        per text; ``None`` for each text when not ``needed`` (mem0 embeds inside ``add`` itself)."""
        if self.config.batch_embed:
            return self._batcher.vectors(list(texts))
        if needed:
            return [self._batcher.embed(text, "add") for text in texts]
        return [None] * len(texts)

    def _ingest_verbatim(
        self, session: Session, turns: Turns, *, perspectives: list[Perspective], done: list[tuple[str, str]]
    ) -> None:
        """mem0's own ``add(infer=False)``, one message per call (``bulk_insert: false``)."""
        for perspective in perspectives:
            shown = [(turn, message, perspective.message(message)) for turn, message in turns]
            for start in range(0, len(shown), EMBED_BATCH):
                part = shown[start : start + EMBED_BATCH]
                vectors = self._embed_for_add([m["content"] for _, _, m in part], needed=False)
                for first in range(0, len(part), WRITE_BATCH):
                    self._check_running()
                    with self._store.write():
                        for (turn, message, mem0_message), vector in zip(
                            part[first : first + WRITE_BATCH], vectors[first : first + WRITE_BATCH]
                        ):
                            if vector is not None:  # served to mem0's own embed() call inside add()
                                self._batcher.ready[mem0_message["content"]] = vector
                            try:
                                result = self._mem.add(
                                    [mem0_message],
                                    user_id=perspective.mem0_user_id,
                                    metadata=message_metadata(session, turn, message),
                                    infer=False,
                                )
                            finally:
                                self._batcher.ready.pop(mem0_message["content"], None)
                            done += [(r["id"], perspective.mem0_user_id) for r in result.get("results", [])]

    def _ingest_bulk(
        self, session: Session, turns: Turns, *, perspectives: list[Perspective], done: list[tuple[str, str]]
    ) -> None:
        """What ``add(infer=False)`` stores (the same payload and history row per message), written with
        mem0's batch APIs: one vector-store insert and one history insert per batch."""
        from mem0.utils.lemmatization import lemmatize_for_bm25

        for perspective in perspectives:
            shown = [(turn, message, perspective.message(message)) for turn, message in turns]
            for start in range(0, len(shown), EMBED_BATCH):
                self._check_running()
                part = shown[start : start + EMBED_BATCH]
                # embedded part by part: the model is shared with other users' searches too
                vectors = self._embed_for_add([m["content"] for _, _, m in part], needed=True)
                rows = []
                for (turn, message, mem0_message), vector in zip(part, vectors):
                    text = mem0_message["content"]
                    now = datetime.now(timezone.utc).isoformat()
                    payload = {
                        **message_metadata(session, turn, message),
                        "user_id": perspective.mem0_user_id,
                        "role": mem0_message["role"],
                        "data": text,
                        "hash": hashlib.md5(text.encode()).hexdigest(),
                        "created_at": now,
                        "updated_at": now,
                        "text_lemmatized": lemmatize_for_bm25(text),
                    }
                    history = {
                        "old_memory": None,
                        "new_memory": text,
                        "event": "ADD",
                        "created_at": now,
                        "updated_at": now,
                        "role": mem0_message["role"],
                    }
                    rows.append((str(uuid.uuid4()), vector, payload, history))
                for first in range(0, len(rows), WRITE_BATCH):
                    self._check_running()
                    batch = rows[first : first + WRITE_BATCH]
                    with self._store.write():
                        # reported before the insert: a failure inside it still removes whatever landed
                        done += [(memory_id, perspective.mem0_user_id) for memory_id, _, _, _ in batch]
                        self._mem.vector_store.insert(
                            vectors=[v for _, v, _, _ in batch],
                            ids=[m for m, _, _, _ in batch],
                            payloads=[p for _, _, p, _ in batch],
                        )
                        self._mem.db.batch_add_history([{"memory_id": m, **h} for m, _, _, h in batch])

    def _ingest_inferred(
        self, session: Session, turns: Turns, *, perspectives: list[Perspective], done: list[tuple[str, str]]
    ) -> None:
        """mem0's fact extraction over windows of ``infer_window`` messages (an exchange by default).

        mem0 may also change or delete memories of earlier writes while it extracts (its UPDATE and
        DELETE events); a failed or killed write removes the facts it added, not those changes.
        """
        window = self.config.infer_window
        for perspective in perspectives:
            for start in range(0, len(turns), window):
                self._check_running()
                chunk = turns[start : start + window]
                metadata: dict[str, Any] = {
                    "session_id": session.id,
                    "turn_index": chunk[0][0],
                    "turn_count": chunk[-1][0] - chunk[0][0] + 1,
                }
                when = next((m.timestamp for _, m in chunk if m.timestamp is not None), None)
                if when is not None:
                    metadata["timestamp"] = when.isoformat()
                # A fact drawn from several turns carries the union of their metadata.
                caller = {key: value for _, m in chunk for key, value in m.metadata.items()}
                if caller:
                    metadata[CALLER_METADATA] = caller
                self.extraction.windows += 1
                try:
                    # mem0 reads, calls the LLM and writes inside one add(): it holds the write lock
                    with self._store.write(), counting_unreadable_replies(self.extraction):
                        result = self._mem.add(
                            [perspective.message(m) for _, m in chunk],
                            user_id=perspective.mem0_user_id,
                            metadata=metadata,
                            infer=True,
                            prompt=self._extraction_instructions(when),
                        )
                except Exception as exc:
                    failure = refused_request(exc)
                    if failure is None or self.config.on_extraction_error == "raise":
                        raise
                    self.extraction.skipped(f"session {session.id!r}, turns {chunk[0][0]}-{chunk[-1][0]}: {failure}")
                    continue
                done += [
                    (r["id"], perspective.mem0_user_id)
                    for r in result.get("results", [])
                    if r.get("id") and r.get("event", "ADD") == "ADD"
                ]

    def _extraction_instructions(self, when: datetime | None) -> str | None:
        """Per-call custom instructions: the configured ones plus the session's date, when known."""
        parts = [self.config.custom_instructions, observation_note(when) if when is not None else None]
        text = "\n\n".join(p.strip() for p in parts if p)
        return text or None
