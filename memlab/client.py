"""The memory layer a chatbot embeds: open any registered backend by name and talk to it per user.

``MemoryClient`` wraps one backend instance with a persistent data directory and adds what an
application needs around the raw ``Memory`` interface: plain-Python arguments (dicts, tuples or
``Message`` objects), per-user locking so many threads can share one client, ownership checks
before anything is done to a memory by id, a bounded ``k``, a bounded set of users kept in RAM,
and a clear statement of whether the data survives a restart.

Concurrency: each user has a reader-writer lock. Searches (of one user or of many) run at the same
time; a write (remember, update, delete, forget) of a user waits only for that user's calls. The
first call for a user since it was loaded into RAM runs alone for that user, so backends may load
per-user state lazily without racing. Backends that do not declare ``concurrent_users = True``
(and are not among the audited built-ins) additionally share one lock across users.

Persistence policy: with a ``data_dir`` and a backend that declares ``Capability.PERSIST`` the
memory survives restarts. With a ``data_dir`` and a backend that does not persist (``none``), the
client warns with ``EphemeralMemoryWarning``, or refuses with ``PersistenceError`` when
``require_persistence=True`` (the REST service always requires it unless told otherwise).
Without a ``data_dir`` the memory is in-process only, which is the caller's explicit choice, so
there is no warning unless persistence is required.

Metadata, filters, pages, idempotency: ``remember(..., metadata=...)`` stores a JSON object with
each turn; ``recall``, ``memories`` and ``export`` take ``filters`` (``memlab.memory.MemoryFilter``:
session id, time range, metadata keys); ``memories_page``, ``history_page`` and ``export(limit=...)``
page with opaque cursors (``memlab.pagination``); ``remember(..., idempotency_key=...)`` stores a
write once however often it is retried, also across a restart (``memlab.idempotency``). Each
method has an ``a``-prefixed async twin (``await client.arecall(...)``) that runs it in a worker
thread, so an event loop is never blocked by a backend.

``MemoryChat`` shows the chatbot loop: recall, call the LLM with the recalled context, store the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import shutil
import threading
import time
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlab import data_subject
from memlab.errors import MemlabError, NotFoundError
from memlab.forget_ledger import DEFAULT_UNDO_HOURS, ForgetLedger, HidingFilter, open_ledger
from memlab.idempotency import open_log
from memlab.locks import ReadWriteLock
from memlab.memory import Capability, FilterLike, IngestReport, Memory, MemoryFilter, as_filter, validate_user_id
from memlab.pagination import Page, page_by_id, page_by_position
from memlab.pg import is_database_url
from memlab.registry import create_backend
from memlab.tokens import truncate_front
from memlab.types import MemoryItem, Message, Retrieval, Session

__all__ = [
    "MemoryClient",
    "MemoryChat",
    "ChatReply",
    "EphemeralMemoryWarning",
    "PersistenceError",
    "MemoryNotFoundError",
    "MessageLike",
    "DEFAULT_MAX_K",
    "DEFAULT_USER_CACHE_SIZE",
]

# What remember() accepts for one message.
MessageLike = Message | Mapping[str, Any] | tuple[str, str]

DEFAULT_SESSION_ID = "default"
DEFAULT_MAX_K = 100  # the same bound as the REST service's max_k
DEFAULT_USER_CACHE_SIZE = 1024  # users whose state a backend may keep in RAM at once

# Built-in backends audited for calls of different users at the same time (per-user state, or an
# internal lock of their own: mem0 serialises its shared store itself, profile's SQLite store has one).


class EphemeralMemoryWarning(UserWarning):
    """The backend keeps its state in process memory: it is lost when the process ends."""


class PersistenceError(MemlabError):
    """Persistence was required but the backend (or the missing data_dir) cannot provide it."""


# One not-found error for the whole stack: what backends raise is what callers catch (and 404).
MemoryNotFoundError = NotFoundError


def to_message(value: MessageLike, metadata: Mapping[str, Any] | None = None) -> Message:
    """Accept a Message, a ``{"role", "content"}`` mapping or a ``(role, content)`` pair.

    ``metadata`` (the write's) is merged under the message's own metadata (its keys win)."""
    if metadata:
        message = to_message(value)
        return Message.model_validate({**message.model_dump(), "metadata": {**metadata, **message.metadata}})
    if isinstance(value, Message):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        # model_validate: the role is any value here, checked against Role by pydantic.
        return Message.model_validate({"role": value[0], "content": value[1]})
    if isinstance(value, Mapping):
        return Message.model_validate(dict(value))
    raise TypeError(f"cannot read a message from {type(value).__name__}: use Message, a dict or (role, content)")


@dataclass
class _UserSlot:
    lock: ReadWriteLock = field(default_factory=ReadWriteLock)
    pins: int = 0  # calls using (or waiting for) this slot; a pinned user is never evicted
    loaded: bool = False  # the backend has seen this user since it was last released


class UserTable:
    """Per-user locks plus an LRU of the users a backend keeps in RAM (``capacity`` of them).

    When more users than ``capacity`` are loaded, the least recently used idle one is released:
    ``release(user_id)`` runs under that user's write lock, and its next call reloads it.
    """

    def __init__(self, capacity: int, release: Callable[[str], None] | None) -> None:
        if capacity < 1:
            raise ValueError(f"user cache size must be >= 1, got {capacity}")
        self.capacity = capacity
        self._release = release
        self._mutex = threading.Lock()
        self._slots: OrderedDict[str, _UserSlot] = OrderedDict()

    def __len__(self) -> int:
        return len(self._slots)

    @contextlib.contextmanager
    def use(self, user_id: str, *, write: bool) -> Iterator[None]:
        with self._mutex:
            slot = self._slots.get(user_id)
            if slot is None:
                slot = self._slots[user_id] = _UserSlot()
            self._slots.move_to_end(user_id)
            slot.pins += 1
            exclusive = write or not slot.loaded
        try:
            with slot.lock.write() if exclusive else slot.lock.read():
                yield
                slot.loaded = True
        finally:
            with self._mutex:
                slot.pins -= 1
            self._evict()

    def _evict(self) -> None:
        while True:
            with self._mutex:
                if len(self._slots) <= self.capacity:
                    return
                victim = next(((u, s) for u, s in self._slots.items() if not s.pins), None)
                if victim is None:
                    return  # every cached user is in use: over capacity until one finishes
                user_id, slot = victim
                slot.pins += 1
                slot.loaded = False  # a call arriving now runs exclusively, after the release
            try:
                if self._release is not None:
                    with slot.lock.write():
                        self._release(user_id)
            finally:
                with self._mutex:
                    slot.pins -= 1
                    if not slot.pins and not slot.loaded and self._slots.get(user_id) is slot:
                        del self._slots[user_id]


class MemoryClient:
    """Thread-safe, per-user access to one memory backend.

    >>> client = MemoryClient("full_context", data_dir="memdata")       # doctest: +SKIP
    >>> client.remember("alice", [("user", "I adopted a cat named Pixel.")])  # doctest: +SKIP
    >>> client.recall("alice", "what is my cat called?").context        # doctest: +SKIP

    ``max_k`` bounds ``recall``'s ``k`` (a larger k is a ``ValueError``, as the REST service
    answers 422). ``user_cache_size`` bounds how many users' state the backend keeps in RAM (LRU;
    only for persistent memories, whose evicted users are reloaded from the data directory).
    ``batch_queries=True`` lets concurrent searches share one embedding call (backends that keep
    an ``embedder``: rag, profile); the REST service turns it on.
    """

    def __init__(
        self,
        backend: str | Memory,
        config: Mapping[str, Any] | None = None,
        *,
        data_dir: str | Path | None = None,
        require_persistence: bool = False,
        max_k: int = DEFAULT_MAX_K,
        user_cache_size: int = DEFAULT_USER_CACHE_SIZE,
        batch_queries: bool = False,
        forget_undo_hours: float = DEFAULT_UNDO_HOURS,
        **backend_kwargs: Any,
    ) -> None:
        if max_k < 1:
            raise ValueError(f"max_k must be >= 1, got {max_k}")
        if user_cache_size < 1:  # before the backend opens (and locks) its data directory
            raise ValueError(f"user cache size must be >= 1, got {user_cache_size}")
        if isinstance(backend, Memory):
            if config is not None or data_dir is not None or backend_kwargs:
                raise ValueError("pass config/data_dir when opening a backend by name, not with an instance")
            self.memory = backend
        else:
            from memlab.registry import backends

            # A chatbot's memory honours "please forget ..." unless told otherwise (memlab.forget).
            settings = dict(config or {})
            if "forget_requests" in backends.get(backend).Config.model_fields:
                settings.setdefault("forget_requests", True)
            self.memory = create_backend(
                backend, settings, data_dir=Path(data_dir) if data_dir else None, **backend_kwargs
            )
        self.data_dir = self.memory.data_dir
        self.max_k = max_k
        self._closed = False
        try:
            self._check_persistence(require_persistence)
        except BaseException:
            self.memory.close()  # release the backend's directory lock: nothing was served
            raise
        concurrent = type(self.memory).concurrent_users
        # A backend not declared safe for concurrent calls of different users gets one lock across users.
        self._backend_lock: contextlib.AbstractContextManager[Any] = (
            contextlib.nullcontext() if concurrent else threading.RLock()
        )
        # Only a persistent memory can drop a user from RAM: the data directory holds it.
        release = self.memory.release if self.persistent else None
        self._users = UserTable(user_cache_size, self._releaser(release) if release is not None else None)
        self._lifecycle = ReadWriteLock()  # close() waits for calls in flight
        # Idempotency keys of writes live where the memory does (its database, else its data
        # directory), so they survive a restart and every worker sharing the memory sees them.
        store = getattr(self.memory.config, "store", None)
        self._writes = open_log(
            data_dir=self.data_dir if self.persistent else None,
            database_url=store if self.persistent and is_database_url(store) else None,
        )
        self._pending = self._open_forget_ledger(forget_undo_hours)
        if self.persistent:
            self._writes.recover(self._turns_stored)
        self._forget_lock = threading.Lock()
        self._forgotten: dict[str, int] = {}
        self._user_dirs: set[Path] = set()
        if batch_queries:
            self._coalesce_query_embeddings()
        self._purge_due()  # undo windows that ended while no process held this data directory

    # ------------------------------------------------------------------ identity
    @property
    def backend(self) -> str:
        return self.memory.name

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.memory.capabilities

    @property
    def persistent(self) -> bool:
        """True when what is stored survives a restart of the process (a data directory, or a
        database store, which needs none)."""
        from memlab.pg import config_uses_database

        stored = self.data_dir is not None or config_uses_database(self.memory.config)
        return stored and self.memory.supports(Capability.PERSIST)

    @property
    def user_cache_size(self) -> int:
        return self._users.capacity

    def supports(self, capability: Capability | str) -> bool:
        return self.memory.supports(capability)

    def _check_persistence(self, required: bool) -> None:
        if self.persistent:
            return
        if self.data_dir is None:
            reason = "no data_dir was given, so memories live only in this process"
        else:
            reason = (
                f"backend {self.backend!r} does not declare the 'persist' capability: memories live only in "
                f"this process and nothing is written to {self.data_dir}"
            )
        if required:
            raise PersistenceError(f"persistent memory required, but {reason} (they would not survive a restart)")
        if self.data_dir is not None:
            warnings.warn(f"{reason}; they will not survive a restart", EphemeralMemoryWarning, stacklevel=3)

    def _open_forget_ledger(self, undo_hours: float) -> ForgetLedger:
        """Items removed by forget requests stay restorable for ``undo_hours`` (``memlab.forget_ledger``):
        with a database store in that database (every worker hides, restores and purges the same
        items; nothing is written to the data directory), else in the data directory, else in
        process memory for an in-process memory."""
        store = getattr(self.memory.config, "store", None)
        uses_database = self.persistent and is_database_url(store)
        ledger = open_ledger(
            data_dir=self.data_dir if self.persistent and not uses_database else None,
            database_url=store if uses_database else None,
            undo_hours=undo_hours,
        )
        self.memory.forget_remover = ledger
        return ledger

    def _purge_due(self) -> None:
        """Delete for good what forget requests removed once its undo window has ended."""
        due_at = self._pending.next_due()
        if due_at is None or due_at > time.time():
            return
        for user_id, item_ids in self._pending.due().items():
            with self._users.use(user_id, write=True), self._backend_lock:
                self._pending.purge(self.memory, user_id, item_ids)
                data_subject.forget(user_id)  # cache entries cannot be told apart per item: the user's go

    def _visible(self, user_id: str, filters: FilterLike) -> MemoryFilter | None:
        """``filters`` plus leaving out what is pending deletion (nothing added when nothing is)."""
        selected = as_filter(filters)
        hidden = self._pending.hidden(user_id)
        return HidingFilter.around(selected, hidden) if hidden else selected

    def _coalesce_query_embeddings(self) -> None:
        """Concurrent searches share model calls (see ``memlab.embedders.coalescing``)."""
        from memlab.embedders import Embedder
        from memlab.embedders.coalescing import CoalescingEmbedder

        embedder = getattr(self.memory, "embedder", None)  # rag and profile keep theirs here
        if isinstance(embedder, Embedder) and not isinstance(embedder, CoalescingEmbedder):
            # Only backends that keep an embedder attribute get here (getattr above); Memory declares none.
            self.memory.embedder = CoalescingEmbedder(embedder)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ locking
    def _releaser(self, release: Callable[[str], None]) -> Callable[[str], None]:
        def locked(user_id: str) -> None:
            with self._backend_lock:
                release(user_id)

        return locked

    @contextlib.contextmanager
    def _user(self, user_id: str, *, write: bool) -> Iterator[None]:
        validate_user_id(user_id)
        with self._lifecycle.read():
            if self._closed:
                raise MemlabError("this MemoryClient is closed")
            self._purge_due()
            with self._users.use(user_id, write=write), self._backend_lock:
                yield

    def _turns_stored(self, user_id: str, session_id: str) -> int:
        with self._user(user_id, write=True):
            return self.memory._next_turn_index(user_id, session_id)

    # ------------------------------------------------------------------ core operations
    def remember(
        self,
        user_id: str,
        messages: Iterable[MessageLike],
        *,
        session_id: str = DEFAULT_SESSION_ID,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> IngestReport:
        """Append ``messages`` to session ``session_id`` of ``user_id``'s memory.

        ``metadata`` is stored with every message (a message's own metadata keys win). With an
        ``idempotency_key`` a repeated call (same key, same messages) returns the first call's
        report and stores nothing; the same key with other messages is a ``ConflictError``.
        """
        parsed = [to_message(m, metadata) for m in messages]
        session = Session(id=session_id, messages=parsed)
        with self._user(user_id, write=True):
            if idempotency_key is None:
                return self.memory.ingest(session, user_id=user_id)
            request = {"session_id": session_id, "messages": [m.model_dump(mode="json") for m in parsed]}
            intent = {
                "session_id": session_id,
                "first_turn": self.memory._next_turn_index(user_id, session_id),
                "messages": len(parsed),
            }
            return self._writes.run(
                user_id,
                idempotency_key,
                request,
                intent,
                lambda: self.memory.ingest(session, user_id=user_id),
                turns_stored=self.memory._next_turn_index,  # this user's lock is held here
            )

    def recall(self, user_id: str, query: str, k: int | None = None, *, filters: FilterLike = None) -> Retrieval:
        """What ``user_id``'s memory holds that is relevant to ``query`` (at most ``k`` items, among
        those ``filters`` selects)."""
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, int):
                raise TypeError(f"k must be an integer, got {type(k).__name__}")
            if not 1 <= k <= self.max_k:
                raise ValueError(f"k must be between 1 and {self.max_k} (max_k), got {k}")
        with self._user(user_id, write=False):
            selected = self._visible(user_id, filters)
            return self.memory.retrieve(query, user_id=user_id, k=k, filters=selected)

    def forget(self, user_id: str) -> None:
        """Delete everything stored about ``user_id``: the backend's store, its idempotency keys, the
        cache entries memlab wrote for them (``memlab.data_subject``) and their files in registered
        directories (LangChain transcripts, see ``register_user_files``)."""
        with self._user(user_id, write=True):
            self.memory.reset(user_id)
            self._writes.forget_user(user_id)
            self._pending.forget_user(user_id)
            data_subject.forget(user_id)
            for directory in self.user_file_dirs():
                target = directory / user_id
                if target.exists():
                    shutil.rmtree(target)
            with self._forget_lock:
                self._forgotten[user_id] = self._forgotten.get(user_id, 0) + 1

    # ------------------------------------------------------------------ files kept beside the memory
    USER_FILE_DIRS = "user_file_dirs.json"

    def register_user_files(self, directory: str | Path) -> None:
        """``directory/<user_id>/`` holds files about a user that ``forget`` must delete too (the
        LangChain history's transcripts register themselves). With a data directory the list is kept
        in it, so a later process forgets them as well."""
        path = Path(directory).resolve()
        with self._forget_lock:
            known = self.user_file_dirs()
            if path in known:
                return
            self._user_dirs.add(path)
            if self.data_dir is not None:
                listing = self.data_dir / self.USER_FILE_DIRS
                tmp = listing.with_suffix(".tmp")
                tmp.write_text(json.dumps(sorted(str(p) for p in {*known, path}), indent=1))
                tmp.replace(listing)

    def user_file_dirs(self) -> list[Path]:
        """The directories registered with ``register_user_files`` (this process's and the data directory's)."""
        dirs = set(self._user_dirs)
        if self.data_dir is not None and (self.data_dir / self.USER_FILE_DIRS).exists():
            dirs |= {Path(p) for p in json.loads((self.data_dir / self.USER_FILE_DIRS).read_text())}
        return sorted(dirs)

    def forget_count(self, user_id: str) -> int:
        """How often ``user_id`` was forgotten through this client (a history compares it to drop its copy)."""
        with self._forget_lock:
            return self._forgotten.get(user_id, 0)

    def export(
        self, user_id: str, *, filters: FilterLike = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """Everything stored about ``user_id``, as one JSON-serialisable document.

        With ``filters`` only the matching ``items``. With ``limit``/``cursor`` the ``items`` come a
        page at a time (``next_cursor`` names the next page; the document's other parts come with
        the first page only).
        """
        with self._user(user_id, write=False):
            pending = self._pending.pending(user_id)
            hidden = {entry["item"]["id"] for entry in pending}
            document = self.memory.export(user_id, filters=as_filter(filters))
        if pending:
            # Still held, shown apart with their purge time; never among the memories in use.
            if isinstance(document.get("items"), list):
                document["items"] = [raw for raw in document["items"] if raw.get("id") not in hidden]
            document["pending_deletion"] = pending
        if limit is None and cursor is None:
            return document
        items = document.get("items")
        if items is None:  # a document of the backend's own shape (profile): page its memories
            items = [item.model_dump(mode="json") for item in self.memories(user_id)] if self.supports("list") else []
        page = page_by_id(items, lambda raw: str(raw.get("id", "")), limit=limit, cursor=cursor)
        head = {"backend": document["backend"], "user_id": document["user_id"]}
        rest = document if cursor is None else head
        return {**rest, "items": page.items, "next_cursor": page.next_cursor}

    # ------------------------------------------------------------------ capability operations
    def memories(self, user_id: str, *, filters: FilterLike = None) -> list[MemoryItem]:
        """All of ``user_id``'s memories that ``filters`` selects (needs the 'list' capability)."""
        with self._user(user_id, write=False):
            return self.memory.list_memories(user_id=user_id, filters=self._visible(user_id, filters))

    def memories_page(
        self, user_id: str, *, filters: FilterLike = None, limit: int | None = None, cursor: str | None = None
    ) -> Page[MemoryItem]:
        """One page of ``memories`` (id order; see ``memlab.pagination``)."""
        return page_by_id(self.memories(user_id, filters=filters), lambda item: item.id, limit=limit, cursor=cursor)

    def get(self, user_id: str, item_id: str) -> MemoryItem:
        """One memory by id, only if it belongs to ``user_id`` (needs 'list')."""
        self.memory._require(Capability.LIST)
        with self._user(user_id, write=False):
            item = self._owned(user_id, item_id)
            assert item is not None  # LIST is supported, so _owned found it or raised
            return item

    def update(self, user_id: str, item_id: str, text: str) -> MemoryItem:
        """Replace the text of one of ``user_id``'s memories (needs 'update')."""
        self.memory._require(Capability.UPDATE)
        with self._user(user_id, write=True):
            self._owned(user_id, item_id)
            return self._by_id(lambda: self.memory.update(item_id, text, user_id=user_id), user_id, item_id)

    def delete(self, user_id: str, item_id: str) -> None:
        """Delete one of ``user_id``'s memories (needs 'delete')."""
        self.memory._require(Capability.DELETE)
        with self._user(user_id, write=True):
            if self._pending.is_pending(user_id, item_id):  # removed by a forget request: final now
                self._pending.purge(self.memory, user_id, [item_id])
            else:
                self._owned(user_id, item_id)
                self._by_id(lambda: self.memory.delete(item_id, user_id=user_id), user_id, item_id)
                self._pending.scrub(user_id, item_id)
            data_subject.forget(user_id)  # cache entries cannot be told apart per item: the user's go

    def restore(self, user_id: str, item_id: str) -> MemoryItem:
        """Bring back a memory a forget request removed, within its undo window (``forget_undo_hours``);
        ``NotFoundError`` for any other id, or once the window has ended."""
        with self._user(user_id, write=True):
            restored = self._pending.restore(user_id, item_id)
            if self.memory.supports(Capability.LIST):
                for item in self.memory.list_memories(user_id=user_id):
                    if item.id == item_id:
                        return item
            return restored

    def history(self, user_id: str, item_id: str) -> list[dict[str, Any]]:
        """The change history of one of ``user_id``'s memories (needs 'history').

        Deleted memories keep their history, so there is no 'list' check here: the backend's own
        per-user scoping decides, and an id it does not know for this user is ``NotFoundError``.
        """
        with self._user(user_id, write=False):
            removals = self._pending.events(user_id, item_id)  # what forget requests did to it
            if removals and not self.memory.supports(Capability.HISTORY):
                return removals
            self.memory._require(Capability.HISTORY)
            try:
                events = self._by_id(lambda: self.memory.history(item_id, user_id=user_id), user_id, item_id)
            except NotFoundError:
                if removals:
                    return removals
                raise
            return [*events, *removals]

    def history_page(
        self, user_id: str, item_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[dict[str, Any]]:
        """One page of ``history`` (events oldest first; the cursor is a position: history only grows)."""
        return page_by_position(self.history(user_id, item_id), limit=limit, cursor=cursor)

    def _owned(self, user_id: str, item_id: str) -> MemoryItem | None:
        """Check that ``item_id`` is one of ``user_id``'s memories.

        The backends scope ids by user themselves; this second check means a backend bug cannot
        let one user reach another's memory. Without 'list' the backend's own scoping is all there is.
        """
        if not self.memory.supports(Capability.LIST):
            return None
        if self._pending.is_pending(user_id, item_id):
            raise NotFoundError(f"user {user_id!r} has no memory with id {item_id!r} (it is pending deletion)")
        for item in self.memory.list_memories(user_id=user_id):
            if item.id == item_id:
                return item
        raise NotFoundError(f"user {user_id!r} has no memory with id {item_id!r}")

    @staticmethod
    def _by_id(call: Callable[[], Any], user_id: str, item_id: str) -> Any:
        try:
            return call()
        except LookupError as exc:  # NotFoundError, or a plugin's KeyError for an unknown id
            # A fresh message: a backend's own message might quote stored text.
            raise NotFoundError(f"user {user_id!r} has no memory with id {item_id!r}") from exc

    # ------------------------------------------------------------------ lifecycle
    def check_ready(self) -> None:
        """Raise when the backend's store cannot serve a read (see ``Memory.check_ready``)."""
        with self._lifecycle.read():
            if self._closed:
                raise MemlabError("this MemoryClient is closed")
            self.memory.check_ready()

    def close(self) -> None:
        """Flush and release the backend (after the calls in flight). Safe to call twice."""
        with self._lifecycle.write():
            if not self._closed:
                self._closed = True
                self.memory.close()
                self._writes.close()
                self._pending.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.data_dir) if self.data_dir else "in-process"
        return f"MemoryClient(backend={self.backend!r}, data_dir={where!r}, persistent={self.persistent})"

    # ------------------------------------------------------------------ async twins
    # ``await client.arecall(...)`` runs ``recall`` in a worker thread: the per-user locks above
    # make that safe, and one definition per operation serves both worlds.
    async def _in_thread(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(functools.partial(method, *args, **kwargs))

    async def aremember(self, user_id: str, messages: Iterable[MessageLike], **kwargs: Any) -> IngestReport:
        return await self._in_thread(self.remember, user_id, list(messages), **kwargs)

    async def arecall(self, user_id: str, query: str, k: int | None = None, **kwargs: Any) -> Retrieval:
        return await self._in_thread(self.recall, user_id, query, k, **kwargs)

    async def aforget(self, user_id: str) -> None:
        await self._in_thread(self.forget, user_id)

    async def aexport(self, user_id: str, **kwargs: Any) -> dict[str, Any]:
        return await self._in_thread(self.export, user_id, **kwargs)

    async def amemories(self, user_id: str, **kwargs: Any) -> list[MemoryItem]:
        return await self._in_thread(self.memories, user_id, **kwargs)

    async def amemories_page(self, user_id: str, **kwargs: Any) -> Page[MemoryItem]:
        return await self._in_thread(self.memories_page, user_id, **kwargs)

    async def aget(self, user_id: str, item_id: str) -> MemoryItem:
        return await self._in_thread(self.get, user_id, item_id)

    async def aupdate(self, user_id: str, item_id: str, text: str) -> MemoryItem:
        return await self._in_thread(self.update, user_id, item_id, text)

    async def adelete(self, user_id: str, item_id: str) -> None:
        await self._in_thread(self.delete, user_id, item_id)

    async def arestore(self, user_id: str, item_id: str) -> MemoryItem:
        return await self._in_thread(self.restore, user_id, item_id)

    async def ahistory(self, user_id: str, item_id: str) -> list[dict[str, Any]]:
        return await self._in_thread(self.history, user_id, item_id)

    async def ahistory_page(self, user_id: str, item_id: str, **kwargs: Any) -> Page[dict[str, Any]]:
        return await self._in_thread(self.history_page, user_id, item_id, **kwargs)


# ---------------------------------------------------------------------- the chatbot loop
ChatFunction = Callable[[list[dict[str, str]]], str]

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant with a long-term memory of this user. Use what you remember when it "
    "is relevant, prefer the most recent information when facts changed, and never invent memories."
)


@dataclass
class ChatReply:
    """One turn of ``MemoryChat``: the answer, what was recalled and the exact prompt sent."""

    text: str
    retrieval: Retrieval
    prompt: list[dict[str, str]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


class MemoryChat:
    """Recall, answer with the recalled context, store the turn.

    ``llm`` is either a ``memlab.llm.LLM`` (anything with ``chat(messages) -> LLMResponse``) or a
    plain function taking OpenAI-style ``[{"role", "content"}]`` messages and returning the reply text.
    The last ``window`` messages of this conversation are sent verbatim; older ones reach the model
    only through recall. The recalled context is cut from the front to ``max_context_tokens``.
    """

    def __init__(
        self,
        client: MemoryClient,
        llm: Any,
        *,
        user_id: str,
        session_id: str | None = None,
        k: int = 5,
        window: int = 10,
        max_context_tokens: int = 2000,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    ) -> None:
        self.client = client
        self.llm = llm
        self.user_id = validate_user_id(user_id)
        # A fresh session per chat object: the memory sees each conversation as its own session.
        self.session_id = session_id or f"chat-{uuid.uuid4().hex[:12]}"
        self.k = k
        self.window = window
        self.max_context_tokens = max_context_tokens
        self.system_prompt = system_prompt
        self.turns: list[dict[str, str]] = []

    def build_prompt(self, text: str, retrieval: Retrieval) -> list[dict[str, str]]:
        system = self.system_prompt
        context = truncate_front(retrieval.context, self.max_context_tokens).strip()
        if context:
            system += f"\n\nWhat you remember about this user:\n{context}"
        recent = self.turns[-self.window :] if self.window > 0 else []
        return [{"role": "system", "content": system}, *recent, {"role": "user", "content": text}]

    def send(self, text: str) -> ChatReply:
        if not text.strip():
            raise ValueError("message must not be empty")
        retrieval = self.client.recall(self.user_id, text, k=self.k)
        prompt = self.build_prompt(text, retrieval)
        reply, prompt_tokens, completion_tokens = self._call(prompt)
        turn = [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
        # Stored only after the model answered, so a failed call leaves no half turn behind.
        self.client.remember(self.user_id, turn, session_id=self.session_id)
        self.turns.extend(turn)
        return ChatReply(reply, retrieval, prompt, prompt_tokens, completion_tokens)

    def _call(self, prompt: Sequence[dict[str, str]]) -> tuple[str, int, int]:
        chat = getattr(self.llm, "chat", None)
        if callable(chat):
            response = chat(list(prompt))
            return response.text, response.prompt_tokens, response.completion_tokens
        if callable(self.llm):
            text = self.llm(list(prompt))
            if not isinstance(text, str):
                raise TypeError(f"the llm function must return a string, got {type(text).__name__}")
            return text, 0, 0
        raise TypeError("llm must be a memlab.llm.LLM or a function(messages) -> str")
