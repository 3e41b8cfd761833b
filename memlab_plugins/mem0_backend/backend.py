"""The ``mem0`` backend: the real ``mem0ai`` library (2.x) behind the memlab ``Memory`` interface.

mem0 is built with ``mem0.Memory.from_config`` (see ``wiring``): its ``huggingface`` embedder on the
packaged all-MiniLM-L6-v2 (or a memlab embedder through its ``langchain`` provider), its ``qdrant``
vector store in embedded mode (SQLite on disk, crash-safe) and its SQLite history database, all
inside ``data_dir``. Without an LLM, messages are stored as they are (``add(infer=False)``: one
message, one memory, carrying its session, turn and timestamp); with an LLM, mem0 runs its own fact
extraction (``infer=True``) through its ``langchain`` LLM provider (see ``ingest``).

Offline and private by default: mem0 reads ``MEM0_TELEMETRY`` and ``MEM0_DIR`` once, when it is
first imported, so mem0 is imported only when a backend is built, after setting telemetry off
(unless the config opts in) and ``MEM0_DIR`` inside the data directory (unless the user set it).
One process at a time owns a data directory (``memlab.locks.DirectoryLock``); deletion removes a
memory's text from every file mem0 keeps (see ``erasure``).
"""

from __future__ import annotations

import tempfile
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memlab.errors import MemlabError, NotFoundError
from memlab.locks import DirectoryLock, ReadWriteLock
from memlab.memory import (
    BackendConfig,
    Capability,
    FilterLike,
    IngestReport,
    Memory,
    MemoryFilter,
    format_date,
    render_turns,
)
from memlab.types import MemoryItem, Retrieval, Session

from . import erasure
from .config import Mem0Config
from .ingest import CALLER_METADATA, ExtractionStats, IngestMixin
from .ledger import LEDGER_FILE, Ledger
from .user_index import UserPartitionedStore
from .wiring import (
    UNUSED_LLM,
    UsageRecordingModel,
    chat_model_for,
    check_chat_model,
    embedder_config,
    import_mem0,
    session_batch_embedding,
    vector_store_config,
)

LOCK_PURPOSE = "memlab mem0 backend"


class Mem0StoreError(MemlabError):
    """The mem0 store in a data directory cannot be opened, or opened without the memories it held."""


def _rows(listed: Any) -> list[Any]:
    """mem0 vector stores return ``list()`` as ``[rows]`` or ``(rows, next_offset)``."""
    if isinstance(listed, (list, tuple)) and listed and isinstance(listed[0], list):
        return list(listed[0])
    return list(listed or [])


class _UserLocks:
    """One lock per user, created on first use (a user's writes run one at a time)."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()

    def hold(self, user_id: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(user_id, threading.RLock())


class Mem0Memory(IngestMixin, Memory):
    name = "mem0"
    description = (
        "The mem0ai library (2.x): embedded qdrant + SQLite history in the data dir; messages as memories, "
        "or mem0's LLM fact extraction when an LLM is configured."
    )
    concurrent_users = True  # the backend's own store lock orders calls into mem0 (see __init__)
    Config = Mem0Config
    config: Mem0Config
    capabilities = frozenset(
        {
            Capability.LIST,
            Capability.UPDATE,
            Capability.DELETE,
            Capability.HISTORY,
            Capability.PERSIST,
            Capability.FILTER,
        }
    )

    @classmethod
    def display_name(cls, config: BackendConfig) -> str:
        """Without an LLM mem0 is a plain MiniLM retriever over one memory per message: say so."""
        parsed = cls.parse_config(config)
        assert isinstance(parsed, Mem0Config)
        label = "mem0" if parsed.uses_llm else "mem0 (no LLM)"
        return f"{label} [{parsed.preset}]" if parsed.preset else label

    @classmethod
    def llm_problem(cls, config: BackendConfig) -> str | None:
        """infer true (preset personamem-baseline included) with no ``llm``: only a Python chat_model could serve it."""
        parsed = cls.parse_config(config)
        assert isinstance(parsed, Mem0Config)
        if not parsed.infer or parsed.llm is not None:
            return None
        preset = f" (preset {parsed.preset})" if parsed.preset else ""
        return (
            f"mem0 with infer true{preset} extracts facts with an LLM and none is configured: pass "
            "--mem0.llm.base-url URL --mem0.llm.model NAME (any OpenAI-compatible endpoint), or set 'llm' in its "
            "config; without an LLM leave infer unset and messages are stored verbatim (docs/mem0.md)"
        )

    @classmethod
    def memory_depends_only_on_turns(cls, config: BackendConfig) -> bool:
        """True without inference: each stored message is one memory, whatever ingest call brought it.

        With an LLM, mem0 extracts facts per window of an ingest call and sees the memories
        extracted before, so how sessions are split changes what it remembers.
        """
        parsed = cls.parse_config(config)
        assert isinstance(parsed, Mem0Config)
        return not parsed.uses_llm and not parsed.forget_requests  # a forget request acts per ingest call

    def __init__(
        self,
        config: Mem0Config | dict[str, Any] | None = None,
        *,
        data_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        chat_model: Any | None = None,
    ) -> None:
        """``chat_model``: a LangChain ``BaseChatModel`` for mem0's fact extraction (overrides ``llm``)."""
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        cfg = self.config
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if self.data_dir is None:  # no data dir: everything lives in a private temp dir until close()
            self._tmp = tempfile.TemporaryDirectory(prefix="memlab-mem0-")
            root = Path(self._tmp.name)
        else:
            root = self.data_dir.resolve()
        self.root = root
        self._owned_llm: Any = None
        self._closed = False
        self._mem: Any = None
        self.infer = cfg.infer if cfg.infer is not None else (chat_model is not None or cfg.llm is not None)
        self._ledger: Ledger | None = None
        self.extraction = ExtractionStats()  # counted, never fatal: see ingest.py
        # mem0's embedded store is not safe for a write beside other calls: searches and reads share
        # it, a write holds it alone, one batch of messages at a time (see ingest.py), so one user's
        # long ingest never holds up another user's search for more than a batch. A user's own writes
        # run one at a time (turn numbering). interrupt() stops ingests between batches at shutdown.
        self._store = ReadWriteLock()
        self._users = _UserLocks()
        self._stopping = threading.Event()
        self._lock = DirectoryLock(root, purpose=LOCK_PURPOSE)
        try:
            self._lock.acquire()  # first: a second process is refused before it touches any file
            self._mem = self._build(chat_model)
            actual = getattr(self._mem.embedding_model.config, "embedding_dims", None)
            if actual and int(actual) != self._dims:
                raise MemlabError(
                    f"mem0 embedder produces {actual}-d vectors but the vector store was sized {self._dims}"
                )
            # One lock-guarded model for every embedding (see wiring.session_batch_embedding).
            self._batcher = session_batch_embedding(self._mem.embedding_model)
            self._mem.embedding_model = self._batcher
            self._entity_store()  # created now, not lazily by the first of two concurrent searches
            self.recovered_writes = self._recover_pending()
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------ locking
    def ingest(self, session: Session | Mapping[str, Any], *, user_id: str) -> IngestReport:
        with self._users.hold(user_id):  # the store lock is taken per batch inside
            return super().ingest(session, user_id=user_id)

    def retrieve(self, query: str, *, user_id: str, k: int | None = None, filters: FilterLike = None) -> Retrieval:
        with self._store.read():
            return super().retrieve(query, user_id=user_id, k=k, filters=filters)

    def reset(self, user_id: str) -> None:
        with self._users.hold(user_id), self._store.write():
            super().reset(user_id)

    def list_memories(self, *, user_id: str, filters: FilterLike = None) -> list[MemoryItem]:
        with self._store.read():
            return super().list_memories(user_id=user_id, filters=filters)

    def update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        with self._users.hold(user_id), self._store.write():
            return super().update(item_id, text, user_id=user_id)

    def delete(self, item_id: str, *, user_id: str) -> None:
        with self._users.hold(user_id), self._store.write():
            super().delete(item_id, user_id=user_id)

    def history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        with self._store.read():
            return super().history(item_id, user_id=user_id)

    def export(self, user_id: str, *, filters: FilterLike = None) -> dict[str, Any]:
        with self._store.read():
            return super().export(user_id, filters=filters)

    def check_ready(self) -> None:
        """A real read of both stores: the ledger and mem0's vector store."""
        super().check_ready()
        with self._store.read():
            self.ledger.live_total()
            self._mem.vector_store.list(top_k=1)

    def interrupt(self) -> None:
        """Shutting down: ingests in flight stop before their next batch and remove what they stored
        (they were not acknowledged); acknowledged writes are committed already."""
        self._stopping.set()

    @property
    def extraction_failures(self) -> list[str]:
        """Why windows were skipped (the newest 100, oldest first), named as the profile backend names its list."""
        return self.extraction.failures

    def extraction_stats(self) -> dict[str, int]:
        """What mem0's fact extraction did in this process: windows sent, skipped (refused), replies mem0 could not read."""
        return self.extraction.counts()

    # ------------------------------------------------------------------ building mem0
    def _build(self, chat_model: Any | None) -> Any:
        cfg = self.config
        if self.infer and chat_model is None and cfg.llm is None:
            raise MemlabError("mem0 config: infer=true needs an LLM (set 'llm', or pass chat_model=)")
        if self.infer and cfg.bulk_insert and "bulk_insert" in cfg.model_fields_set:
            raise MemlabError("mem0 config: bulk_insert stores messages verbatim; it cannot be used with infer=true")
        if cfg.vector_store is None and (self.root / "faiss").is_dir():
            raise Mem0StoreError(
                f"{self.root} holds a mem0 FAISS store written by an earlier memlab, which the default "
                "(embedded qdrant) cannot read. Open it with vector_store={'provider': 'faiss', 'config': "
                f"{{'collection_name': {cfg.collection!r}, 'path': '{self.root / 'faiss'}', 'embedding_model_dims': N}}}} "
                "(not crash-safe), or re-ingest into a new data directory."
            )
        mem0 = import_mem0(self.root / "mem0_home", telemetry=cfg.telemetry)
        self._ledger = Ledger(self.root / LEDGER_FILE)
        embedder, dims, identity = embedder_config(cfg, self.cache_dir)
        self._ledger.check_meta("embedder", identity, "mem0 embedder")
        self._dims = dims
        store = vector_store_config(cfg, self.root, dims)
        self._ledger.check_meta("vector_store", str(store["provider"]), "mem0 vector store")
        if self.infer:
            if chat_model is None:
                chat_model, self._owned_llm = chat_model_for(cfg.llm, self.cache_dir)
            check_chat_model(chat_model)
            llm: dict[str, Any] = {"provider": "langchain", "config": {"model": chat_model}}
        else:
            llm = UNUSED_LLM
        mem0_config: dict[str, Any] = {
            "embedder": embedder,
            "vector_store": store,
            "llm": llm,
            "history_db_path": str(self.root / "history.db"),
        }
        if cfg.custom_instructions:
            mem0_config["custom_instructions"] = cfg.custom_instructions
        try:
            memory = mem0.Memory.from_config(mem0_config)
        except MemlabError:
            raise
        except Exception as exc:
            raise Mem0StoreError(f"cannot open the mem0 store in {self.root}: {type(exc).__name__}: {exc}") from exc
        self._check_store(memory)
        from mem0.vector_stores.qdrant import Qdrant

        if isinstance(memory.vector_store, Qdrant) and memory.vector_store.is_local:
            memory.vector_store = UserPartitionedStore(memory.vector_store)  # embedded qdrant: see user_index.py
        if self.infer:
            # mem0 reads only the reply text; the recorder hands each reply's tokens and cost to memlab.
            memory.llm.langchain_model = UsageRecordingModel(memory.llm.langchain_model, self.record_llm_usage)
        return memory

    def _check_store(self, memory: Any) -> None:
        """A store that opens empty although the ledger lists live memories lost its files: refuse it."""
        live = self.ledger.live_total()
        if live and not _rows(memory.vector_store.list(top_k=1)):
            self._mem = memory  # closed by _release
            raise Mem0StoreError(
                f"the mem0 vector store in {self.root} opened empty, but memlab's ledger "
                f"({LEDGER_FILE}) lists {live} stored memories: its files are missing or damaged. "
                "Restore them from a backup or move the directory away and re-ingest."
            )

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            raise MemlabError("the mem0 backend is closed")
        return self._ledger

    def _mem0_ids(self, user_id: str) -> list[str]:
        """The mem0 user ids holding ``user_id``'s memories (locomo-eval: one per speaker)."""
        if not self.config.speaker_perspectives:
            return [user_id]
        speakers = self.ledger.speakers(user_id)
        return [speakers[role][1] for role in ("user", "assistant") if role in speakers]

    def _scopes(self, user_id: str) -> list[str]:
        from mem0.memory.main import _build_session_scope

        return [_build_session_scope({"user_id": uid}) for uid in self._mem0_ids(user_id)]

    # ------------------------------------------------------------------ retrieve
    def _retrieve(self, query: str, *, user_id: str, k: int, filters: MemoryFilter | None = None) -> Retrieval:
        if not query.strip():
            return Retrieval()
        found: list[tuple[str, list[MemoryItem]]] = []
        mem0_ids = self._mem0_ids(user_id)
        for position, mem0_id in enumerate(mem0_ids):
            # preset: k is shared by the speakers (k=60: mem0's top_k 30 for each), so items <= k.
            share = k // len(mem0_ids) + (1 if position < k % len(mem0_ids) else 0)
            # mem0 over-fetches max(4k, 60) candidates: clamp k to what this user holds (k=10**9 would
            # otherwise ask the vector store for billions of slots).
            live = self.ledger.live_count(mem0_id)
            limit = min(share, live)
            if limit < 1:
                found.append((mem0_id, []))
                continue
            # Filtered: rank all of this user's memories, keep the best ``limit`` that match.
            fetch = live if filters is not None else limit
            result = self._mem.search(query, top_k=fetch, filters={"user_id": mem0_id}, threshold=self.config.threshold)
            candidates = [self._item(r) for r in result.get("results", [])[:fetch]]
            if filters is not None:
                candidates = [item for item in candidates if filters.matches(item)]
            found.append((mem0_id, candidates[:limit]))
        if not self.config.speaker_perspectives:
            items = found[0][1] if found else []
            return Retrieval(items=items, context=render_turns(items))
        return self._speaker_retrieval(user_id, found)

    def _speaker_retrieval(self, user_id: str, found: list[tuple[str, list[MemoryItem]]]) -> Retrieval:
        """mem0's evaluation context: each speaker's memories as ``timestamp: memory`` lines.

        mem0's ANSWER_PROMPT (mem0ai/mem0 evaluation/prompts.py) shows "Memories for user <name>:"
        then the list of ``f"{timestamp}: {memory}"`` (evaluation/src/memzero/search.py); ``k`` is
        shared between the speakers.
        """
        names = {mem0_id: name for name, mem0_id in self.ledger.speakers(user_id).values()}
        blocks, items = [], []
        for mem0_id, speaker_items in found:
            lines = [f"Memories for user {names.get(mem0_id, mem0_id)}:"]
            for item in speaker_items:
                stamp = item.source.get("timestamp")
                lines.append(f"{format_date(stamp)}: {item.text}" if stamp else item.text)
                items.append(item.model_copy(update={"metadata": {**item.metadata, "speaker": names.get(mem0_id)}}))
            blocks.append("\n".join(lines))
        return Retrieval(items=items, context="\n\n".join(blocks) if items else "")

    def _item(self, record: dict[str, Any]) -> MemoryItem:
        meta = dict(record.get("metadata") or {})
        source: dict[str, Any] = {}
        session_id = meta.pop("session_id", None)
        turn = meta.pop("turn_index", None)
        count = meta.pop("turn_count", None)
        stamp = meta.pop("timestamp", None)
        caller = meta.pop(CALLER_METADATA, None)
        if session_id is not None and turn is not None:
            source["session_id"] = session_id
            if count is None:  # one message, one memory
                source["turn_index"] = int(turn)
            else:  # a fact extracted from a window of turns
                source["turns"] = [{"session_id": session_id, "turn_index": int(turn) + i} for i in range(int(count))]
        if record.get("role"):
            source["role"] = record["role"]
        if stamp:
            source["timestamp"] = stamp
        if caller:
            source["metadata"] = dict(caller)
        for key in ("created_at", "updated_at", "attributed_to", "actor_id"):
            if record.get(key):
                meta[key] = record[key]
        return MemoryItem(
            id=str(record["id"]), text=record.get("memory", ""), score=record.get("score"), source=source, metadata=meta
        )

    def forget_matcher(self) -> Any:
        """With fact extraction on, the extraction LLM decides what a forget request refers to (memlab.forget)."""
        if not self.infer or self._owned_llm is None:
            return None
        from memlab.forget import embedder_for, llm_matcher, semantic_matcher

        fallback = semantic_matcher(embedder_for(self))  # an unreadable reply: resolve by meaning and words
        return llm_matcher(self._owned_llm, on_usage=self.record_llm_usage, fallback=fallback)

    # ------------------------------------------------------------------ capabilities
    def _owned(self, item_id: str, user_id: str) -> dict[str, Any]:
        record = self._mem.get(item_id) if isinstance(item_id, str) and item_id else None
        if record is None or record.get("user_id") not in self._mem0_ids(user_id):
            raise NotFoundError(f"no memory {item_id!r} for user {user_id!r}")
        return record

    def _list(self, user_id: str) -> list[MemoryItem]:
        items: list[MemoryItem] = []
        for mem0_id in self._mem0_ids(user_id):
            # the ledger knows how many there are; a margin covers memories it could not record
            limit = self.ledger.live_count(mem0_id) + 100
            records = self._mem.get_all(filters={"user_id": mem0_id}, top_k=limit).get("results", [])
            items += [self._item(r) for r in records]
        items.sort(key=lambda i: (i.metadata.get("created_at") or "", i.source.get("turn_index", 0)))
        return items

    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        self._owned(item_id, user_id)
        self._mem.update(item_id, text=text)
        return self._item(self._owned(item_id, user_id))

    def _delete(self, item_id: str, *, user_id: str) -> None:
        self._owned(item_id, user_id)
        self._erase_memory(item_id, user_id=user_id)

    def _erase_memory(self, memory_id: str, *, user_id: str) -> None:
        self._erase_memories([memory_id], user_id=user_id)

    def _erase_memories(self, memory_ids: list[str], *, user_id: str) -> None:
        """Delete memories and every copy of their text (history, raw messages, free SQLite pages)."""
        if not memory_ids:
            return
        self._entity_store()  # opened, so mem0's delete also unlinks the memory's entities
        for memory_id in memory_ids:
            record = self._mem.get(memory_id)
            self.ledger.mark_deleted(memory_id)  # first: a kill after it never reports a deleted memory as lost
            if record is None:
                continue
            self._mem.delete(memory_id)
            erasure.blank_history(self._mem.db, [memory_id])
            erasure.drop_messages(self._mem.db, self._scopes(user_id), content=record.get("memory"))
        erasure.vacuum_all(self.root)

    def _entity_store(self) -> Any:
        """mem0's entity collection (opened lazily by mem0, and only then cleaned on delete)."""
        with warnings.catch_warnings():
            # mem0 asks the shared embedded qdrant client for payload indexes, which it does not need
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            return self._mem.entity_store

    def _history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        owner = self.ledger.owner(item_id) if isinstance(item_id, str) else None
        if owner is None:  # stored before the ledger knew it (another writer): ask the store
            self._owned(item_id, user_id)
        elif owner != user_id:
            raise NotFoundError(f"no memory {item_id!r} for user {user_id!r}")
        return [dict(h) for h in self._mem.history(item_id)]

    def _reset(self, user_id: str) -> None:
        mem0_ids = self._mem0_ids(user_id)
        memory_ids = set(self.ledger.memory_ids(user_id))
        entities = self._entity_store()  # opened, so mem0's deletes also unlink entities
        for mem0_id in mem0_ids:
            memory_ids |= {
                str(r["id"])
                for r in self._mem.get_all(
                    filters={"user_id": mem0_id}, top_k=self.ledger.live_count(mem0_id) + 100
                ).get("results", [])
            }
            if self._mem.get_all(filters={"user_id": mem0_id}, top_k=1).get("results"):
                self._mem.delete_all(user_id=mem0_id)
            for row in _rows(entities.list(filters={"user_id": mem0_id}, top_k=100_000)):
                entities.delete(vector_id=row.id)
        erasure.drop_history(self._mem.db, sorted(memory_ids))
        erasure.drop_messages(self._mem.db, self._scopes(user_id))
        self.ledger.forget_user(user_id)
        erasure.vacuum_all(self.root)

    def _export(self, user_id: str) -> dict[str, Any]:
        """Everything stored about ``user_id``: memories, the history of each (deleted ones included,
        without their text), mem0's recent raw messages, session turn counts and speakers."""
        items = self._list(user_id)
        memory_ids = list(dict.fromkeys([*(i.id for i in items), *self.ledger.memory_ids(user_id)]))
        return {
            "items": [item.model_dump(mode="json") for item in items],
            "history": {memory_id: [dict(h) for h in self._mem.history(memory_id)] for memory_id in memory_ids},
            "recent_messages": erasure.messages_of(self._mem.db, self._scopes(user_id)),
            "sessions": self.ledger.sessions(user_id),
            "speakers": {
                role: {"name": name, "mem0_user_id": mem0_id}
                for role, (name, mem0_id) in self.ledger.speakers(user_id).items()
            },
            "extraction_stats": self.extraction_stats(),
        }

    # ------------------------------------------------------------------ turns and lifetime
    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        return self.ledger.turns(user_id, session_id)

    def _record_turns(self, user_id: str, session_id: str, total: int) -> None:
        self.ledger.set_turns(user_id, session_id, total)

    def close(self) -> None:
        self._stopping.set()  # an ingest in flight stops at its next batch instead of holding close up
        with self._store.write():
            if self._closed:
                return
            self._closed = True
            self._release()

    def _release(self) -> None:
        if self._mem is not None:
            self._mem.close()
            client = getattr(self._mem.vector_store, "client", None)
            if client is not None and hasattr(client, "close"):
                client.close()  # embedded qdrant: closes its SQLite files and its folder lock
            self._mem = None
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None
        if self._owned_llm is not None:
            self._owned_llm.close()
            self._owned_llm = None
        self._lock.release()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
