"""Full long context: the whole history, newest last, cut from the front to a token budget.

This is what a long-context model sees when memory is "just put everything in the prompt".
``retrieve`` returns the newest turns, at most ``k`` of them (the default ``top_k`` is large, so by
default everything that fits), cut from the front to ``max_tokens``.

With a data directory each user's history is a JSON-lines file ``<user>.jsonl``, one stored turn a
line, held by one process at a time (``memlab.locks.DirectoryLock``):

- appends are fsynced before ``ingest`` returns, so an acknowledged write survives kill -9;
- each ingest ends with a commit line ``{"_sessions": {session: turns}}`` (which also keeps a
  session's turn numbering going past skipped or deleted turns); what an interrupted append left
  after the last commit line (a torn line, or complete turns of an unacknowledged ingest) is cut off
  when the file is opened, keeping every committed turn; a broken line in the middle is an error
  naming the file and line, never its text;
- ``delete`` rewrites the file without the item (write, fsync, rename), so its text leaves the disk.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from memlab.errors import MemlabError, NotFoundError
from memlab.forget import ForgetRequests
from memlab.locks import DirectoryLock
from memlab.memory import BackendConfig, Capability, Memory, MemoryFilter, render_turns, turn_source
from memlab.tokens import count_tokens
from memlab.types import MemoryItem, Retrieval, Session

log = logging.getLogger("memlab.full_context")

_SESSIONS = "_sessions"  # key of a line that records session turn counts, not a turn


class FullContextConfig(BackendConfig):
    top_k: int = Field(
        default=100_000, ge=1, description="newest turns returned when k is not given (default: all that fit)"
    )
    max_tokens: int = Field(default=128_000, ge=1, description="budget; the oldest turns are dropped first")
    include_system: bool = Field(default=True, description="keep system messages (PersonaMem's persona prompts)")
    forget_requests: ForgetRequests = False


class _UserHistory:
    """One user's stored turns, plus turn counts of sessions whose last turns are not stored."""

    def __init__(self) -> None:
        self.turns: list[MemoryItem] = []
        self.session_floor: dict[str, int] = {}


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FullContextMemory(Memory):
    name = "full_context"
    description = "The whole history, newest last, truncated from the front to a token budget."
    concurrent_users = True  # per-user files and lists, no shared mutable state
    Config = FullContextConfig
    capabilities = frozenset({Capability.LIST, Capability.DELETE, Capability.PERSIST, Capability.FILTER})
    # Calls for different users may run at once: per-user state, per-user files, a lock per user.
    concurrent_users = True
    config: FullContextConfig

    @classmethod
    def memory_depends_only_on_turns(cls, config: BackendConfig) -> bool:
        # one item per stored turn, whatever the ingest calls were; a forget request deletes what was
        # stored when its ingest call ends, which depends on the split
        return not cls.parse_config(config).forget_requests  # type: ignore[attr-defined]

    def __init__(self, config=None, *, data_dir=None, cache_dir=None) -> None:
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        self._dir_lock: DirectoryLock | None = None
        if self.data_dir is not None:
            self._dir_lock = DirectoryLock(self.data_dir, purpose="full_context backend").acquire()
        self._turns: dict[str, list[MemoryItem]] = {}
        self._floors: dict[str, dict[str, int]] = {}
        self._guard = threading.Lock()  # guards the two dicts above and the per-user lock table
        self._user_locks: dict[str, threading.RLock] = {}

    # ------------------------------------------------------------------ files
    def _file(self, user_id: str) -> Path | None:
        return self.data_dir / f"{user_id}.jsonl" if self.data_dir else None

    def _lock_of(self, user_id: str) -> threading.RLock:
        with self._guard:
            return self._user_locks.setdefault(user_id, threading.RLock())

    def _read_file(self, path: Path) -> _UserHistory:
        history = _UserHistory()
        raw = path.read_bytes()
        complete, _, torn = raw.rpartition(b"\n")
        keep = len(complete) + 1 if complete else 0  # bytes of the file that stay
        pending: list[MemoryItem] = []  # turns after the last commit line
        committed_at: int | None = None  # end of the last commit line, in bytes
        offset = 0
        for number, line in enumerate(complete.split(b"\n") if complete else [], start=1):
            offset += len(line) + 1
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if isinstance(data, dict) and set(data) == {_SESSIONS}:
                    history.session_floor.update({str(k): int(v) for k, v in data[_SESSIONS].items()})
                    history.turns.extend(pending)
                    pending, committed_at = [], offset
                else:
                    pending.append(MemoryItem.model_validate(data))
            except (ValueError, ValidationError, AttributeError, TypeError):
                # Never quote the line: it holds the user's text.
                raise MemlabError(
                    f"{path}: line {number} is not a stored turn (the file is damaged); "
                    "restore it from a backup or remove that line"
                ) from None
        if pending and committed_at is not None:
            # Turns of an ingest whose commit line never made it (killed mid-append): that ingest was
            # never acknowledged, so none of it is kept (a retry then stores it once, not twice).
            keep = committed_at
            pending = []
        history.turns.extend(pending)  # a file written before commit lines existed: all of it counts
        if keep < len(raw):
            log.warning("%s: dropping %d bytes left by an interrupted write", path, len(raw) - keep)
            with path.open("r+b") as handle:
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())
        return history

    def _load(self, user_id: str) -> list[MemoryItem]:
        turns = self._turns.get(user_id)
        if turns is not None:
            return turns
        with self._lock_of(user_id):
            if user_id not in self._turns:
                path = self._file(user_id)
                history = self._read_file(path) if path is not None and path.exists() else _UserHistory()
                with self._guard:
                    self._floors[user_id] = history.session_floor
                    self._turns[user_id] = history.turns
            return self._turns[user_id]

    def _append(self, path: Path, lines: list[str]) -> None:
        created = not path.exists()
        with path.open("ab") as handle:
            handle.write("".join(lines).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        if created:
            _fsync_dir(path.parent)  # the new file's name must survive a crash too

    def _rewrite(self, user_id: str) -> None:
        path = self._file(user_id)
        if path is None:
            return
        lines = [item.model_dump_json() + "\n" for item in self._turns.get(user_id, [])]
        lines.append(json.dumps({_SESSIONS: self._floors.get(user_id) or {}}) + "\n")  # commits them
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as handle:
            handle.write("".join(lines).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)

    # ------------------------------------------------------------------ Memory
    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        turns = [t.source["turn_index"] + 1 for t in self._load(user_id) if t.source.get("session_id") == session_id]
        return max([*turns, self._floors.get(user_id, {}).get(session_id, 0)])

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        with self._lock_of(user_id):
            turns = self._load(user_id)
            new = [
                MemoryItem(
                    id=f"{session.id}#{first_turn + offset}",
                    text=message.content,
                    source=turn_source(session, first_turn + offset, message),
                )
                for offset, message in enumerate(session.messages)
                if message.role != "system" or self.config.include_system
            ]
            if not session.messages:
                return
            total = first_turn + len(session.messages)
            # The commit line ends the ingest: turns written without one are dropped on open. It also
            # records the session's turn count (skipped system messages and deleted turns still count).
            lines = [item.model_dump_json() + "\n" for item in new]
            lines.append(json.dumps({_SESSIONS: {session.id: total}}) + "\n")
            path = self._file(user_id)
            if path is not None:
                self._append(path, lines)
            self._floors.setdefault(user_id, {})[session.id] = total
            turns.extend(new)

    def _retrieve(self, query: str, *, user_id: str, k: int, filters: MemoryFilter | None = None) -> Retrieval:
        with self._lock_of(user_id):
            history = list(self._load(user_id))
        if filters is not None:
            history = [item for item in history if filters.matches(item)]
        kept: list[MemoryItem] = []
        budget = self.config.max_tokens
        for item in reversed(history):
            if len(kept) >= k:
                break
            cost = count_tokens(f"{item.source.get('role')}: {item.text}")
            if cost > budget:
                break
            budget -= cost
            kept.append(item)
        kept.reverse()
        context = render_turns(kept)
        if kept and any("timestamp" in item.source for item in kept):
            # Date header lines cost tokens too: drop the oldest turns until the whole context fits.
            while kept and count_tokens(context) > self.config.max_tokens:
                kept.pop(0)
                context = render_turns(kept)
        return Retrieval(items=kept, context=context, tokens=count_tokens(context) if kept else 0)

    def _reset(self, user_id: str) -> None:
        with self._lock_of(user_id):
            with self._guard:
                self._turns.pop(user_id, None)
                self._floors.pop(user_id, None)
            path = self._file(user_id)
            if path is not None:
                for stale in (path, path.with_name(path.name + ".tmp")):
                    if stale.exists():
                        stale.unlink()
                _fsync_dir(path.parent)

    def _list(self, user_id: str) -> list[MemoryItem]:
        with self._lock_of(user_id):
            return list(self._load(user_id))

    def _delete(self, item_id: str, *, user_id: str) -> None:
        with self._lock_of(user_id):
            turns = self._load(user_id)
            found = [t for t in turns if t.id == item_id]
            if not found:
                raise NotFoundError(f"user {user_id!r} has no memory with id {item_id!r}")
            session_id = found[0].source["session_id"]
            floors = self._floors.setdefault(user_id, {})
            # Keep the session's numbering: the next turn of this session must not reuse the id.
            floors[session_id] = max(floors.get(session_id, 0), self._next_turn_index(user_id, session_id))
            turns[:] = [t for t in turns if t.id != item_id]
            self._rewrite(user_id)

    def _export(self, user_id: str) -> dict[str, Any]:
        with self._lock_of(user_id):
            turns = self._load(user_id)
            session_ids = {t.source["session_id"] for t in turns} | set(self._floors.get(user_id, {}))
            return {
                "items": [item.model_dump(mode="json") for item in turns],
                "sessions": {sid: self._next_turn_index(user_id, sid) for sid in sorted(session_ids)},
            }

    def release(self, user_id: str) -> None:
        """Drop ``user_id``'s turns from RAM (they are on disk); the next call reloads them."""
        if self.data_dir is None:
            return  # in-process only: RAM is the store
        with self._lock_of(user_id):
            with self._guard:
                self._turns.pop(user_id, None)
                self._floors.pop(user_id, None)

    def close(self) -> None:
        if self._dir_lock is not None:
            self._dir_lock.release()
