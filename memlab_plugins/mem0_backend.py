"""The ``mem0`` backend: the real ``mem0ai`` library (2.x) behind the memlab ``Memory`` interface.

mem0 is built with ``mem0.Memory.from_config``: its ``huggingface`` embedder on the packaged
all-MiniLM-L6-v2 (or a memlab embedder through its ``langchain`` provider), its ``faiss`` vector
store and its SQLite history database, both inside ``data_dir``. Without an LLM, messages are
stored as they are (``add(infer=False)``: one message, one memory, carrying its session and turn);
with an LLM, mem0 runs its own fact extraction (``infer=True``) through its ``langchain`` LLM
provider, fed by a memlab LLM (``llm`` config) or any LangChain chat model (``chat_model=``).

Offline and private by default: mem0 reads ``MEM0_TELEMETRY`` and ``MEM0_DIR`` once, when it is
first imported (telemetry to PostHog, a notice file fetched from GitHub, a ``config.json`` written
to ``~/.mem0``), so this module imports mem0 only when a backend is built, after setting telemetry
off (unless the config opts in) and ``MEM0_DIR`` inside the data directory (unless the user set it).

Cost: mem0 embeds every message on its own and rewrites the FAISS index and its JSON docstore on
every insert. Without patching mem0, ``batch_embed`` embeds each ingested session in one batch
before handing the messages to ``add()`` (the embedding model is wrapped by a prefetch cache), and
``bulk_insert`` (off by default) writes a session's records with one vector-store insert and one
history batch, exactly as mem0's own ``add(infer=False)`` would store them.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import tempfile
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from memlab.errors import MemlabError, MissingDependencyError
from memlab.memory import BackendConfig, Capability, Memory, render_turns
from memlab.types import MemoryItem, Retrieval, Session


DEFAULT_EMBEDDER = "huggingface"
MINILM_DIMS = 384
# memlab embedders that can be served to mem0 through its ``langchain`` embedder provider.
MEMLAB_EMBEDDERS = ("minilm", "sentence-transformers", "hashing", "bge-m3")
LEDGER_FILE = "memlab_mem0.sqlite"


class Mem0MemoryNotFoundError(MemlabError, KeyError):
    """A memory id that does not exist for this user (ids of other users are reported the same way)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Mem0Config(BackendConfig):
    embedder: str | dict[str, Any] = Field(
        default=DEFAULT_EMBEDDER,
        description="'huggingface': mem0's own huggingface provider on the packaged all-MiniLM-L6-v2; "
        "'minilm' | 'sentence-transformers' | 'hashing' | 'bge-m3': a memlab embedder served through mem0's "
        "langchain provider (shares the process-wide model and the run's embedding cache); or a full mem0 "
        "embedder config {'provider': ..., 'config': {..., 'embedding_dims': N}}",
    )
    embedder_model: str | None = Field(
        default=None, description="model id or local path for 'huggingface' or the memlab embedder"
    )
    vector_store: dict[str, Any] | None = Field(
        default=None,
        description="a full mem0 vector_store config; default: faiss under <data_dir>/faiss",
    )
    collection: str = Field(default="memlab", pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    llm: dict[str, Any] | None = Field(
        default=None,
        description="a memlab LLM config (memlab.llm.LLMConfig: OpenAI-compatible endpoint, LangChain class, "
        "local model) that mem0 uses for fact extraction; none: messages are stored verbatim",
    )
    infer: bool | None = Field(
        default=None, description="run mem0's LLM fact extraction (default: when an LLM is configured)"
    )
    infer_window: int = Field(
        default=2, ge=1, description="messages per add() call when inferring (2: one user/assistant exchange)"
    )
    custom_instructions: str | None = Field(default=None, description="mem0's custom extraction instructions")
    threshold: float = Field(default=0.1, ge=0.0, le=1.0, description="mem0 search: minimum semantic score")
    batch_embed: bool = Field(default=True, description="embed each ingested session in one batch")
    bulk_insert: bool = Field(
        default=False,
        description="infer=False only: one vector-store insert per session instead of one per message",
    )
    telemetry: bool = Field(
        default=False,
        description="allow mem0's anonymous telemetry (PostHog); decided once per process, at mem0's first import",
    )

    @model_validator(mode="after")
    def _check(self) -> "Mem0Config":
        if isinstance(self.embedder, str) and self.embedder not in (DEFAULT_EMBEDDER, *MEMLAB_EMBEDDERS):
            raise ValueError(
                f"embedder {self.embedder!r}: use 'huggingface', one of {', '.join(MEMLAB_EMBEDDERS)}, "
                "or a mem0 embedder config dict"
            )
        if isinstance(self.embedder, dict):
            config = self.embedder.get("config") or {}
            if "provider" not in self.embedder or not isinstance(config, dict) or not config.get("embedding_dims"):
                raise ValueError(
                    "a mem0 embedder config needs 'provider' and config.embedding_dims "
                    "(the vector store is sized from it)"
                )
        if self.vector_store is not None and "provider" not in self.vector_store:
            raise ValueError("vector_store needs a 'provider' (a mem0 vector_store config)")
        return self


# ----------------------------------------------------------------------------- importing mem0
_import_lock = threading.Lock()


def import_mem0(mem0_home: Path, *, telemetry: bool = False) -> Any:
    """Import mem0 with telemetry off (unless opted in) and its home directory in ``mem0_home``.

    mem0 reads both variables once, at import: a user's explicit ``MEM0_DIR`` wins; telemetry
    follows the config only. If mem0 was already imported by someone else in another state, say so
    instead of silently running with telemetry on.
    """
    with _import_lock:
        if "mem0" not in sys.modules:  # importing any part of mem0 runs its whole package __init__
            if not os.environ.get("MEM0_DIR"):
                mem0_home.mkdir(parents=True, exist_ok=True)
                os.environ["MEM0_DIR"] = str(mem0_home)
            os.environ["MEM0_TELEMETRY"] = "True" if telemetry else "False"
        try:
            import mem0
            from mem0.memory import telemetry as mem0_telemetry
        except ImportError as exc:  # pragma: no cover - mem0ai is a core dependency
            raise MissingDependencyError("mem0ai", "the mem0 backend needs it: pip install 'mem0ai>=2,<3'") from exc
    if bool(mem0_telemetry.MEM0_TELEMETRY) != telemetry:
        state = "on" if mem0_telemetry.MEM0_TELEMETRY else "off"
        raise MemlabError(
            f"mem0 was already imported in this process with telemetry {state}, but the mem0 backend config "
            f"asks for telemetry={telemetry}; mem0 reads MEM0_TELEMETRY only at its first import. "
            "Set MEM0_TELEMETRY=False (or True to opt in) before anything imports mem0."
        )
    return mem0


# ----------------------------------------------------------------------------- embedding helpers
class _MemlabEmbeddings:
    """Builds a langchain-core ``Embeddings`` over a memlab embedder (mem0's ``langchain`` provider)."""

    @staticmethod
    def create(embedder: Any) -> Any:
        from langchain_core.embeddings import Embeddings

        class MemlabEmbeddings(Embeddings):
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return self.inner.embed(list(texts)).tolist()

            def embed_query(self, text: str) -> list[float]:
                return self.inner.embed([text], query=True)[0].tolist()

        return MemlabEmbeddings(embedder)


def _session_batch_embedding(inner: Any) -> Any:
    """Wrap mem0's embedding model so the messages of one session are embedded in one batch.

    ``prefetch`` computes the vectors of a session's texts at once; mem0's own per-message
    ``embed(text, "add")`` calls inside ``add()`` are then served from that batch. Every other call
    goes to the wrapped model unchanged. mem0's code is untouched: the wrapper is an
    ``EmbeddingBase`` set as this backend's ``embedding_model``.
    """
    from mem0.embeddings.base import EmbeddingBase

    class SessionBatchEmbedding(EmbeddingBase):
        def __init__(self, wrapped: Any) -> None:
            super().__init__(wrapped.config)
            self.wrapped = wrapped
            self.ready: dict[str, Any] = {}
            self.model_calls = 0  # calls that reached the model (benchmarks compare them)

        def prefetch(self, texts: list[str]) -> None:
            todo = [t for t in dict.fromkeys(texts) if t not in self.ready]
            if not todo:
                return
            lc_model = getattr(self.wrapped, "langchain_model", None)
            if lc_model is not None and hasattr(lc_model, "embed_documents"):
                vectors = lc_model.embed_documents(todo)
            else:
                vectors = self.wrapped.embed_batch(todo, "add")
            self.model_calls += 1
            if len(vectors) != len(todo):
                raise MemlabError(f"mem0 embedder returned {len(vectors)} vectors for {len(todo)} texts")
            self.ready.update(zip(todo, vectors))

        def clear(self) -> None:
            self.ready.clear()

        def embed(self, text: Any, memory_action: Any = None) -> Any:
            if memory_action == "add" and isinstance(text, str) and text in self.ready:
                return self.ready[text]
            self.model_calls += 1
            return self.wrapped.embed(text, memory_action)

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> Any:
            self.model_calls += 1
            return self.wrapped.embed_batch(texts, memory_action)

    return SessionBatchEmbedding(inner)


# ----------------------------------------------------------------------------- memlab's own ledger
class _Ledger:
    """What mem0 does not keep: turns per (user, session), and which user owns each memory id.

    Turn counts let a session continue across restarts (system messages and facts extracted from
    nothing leave no memory to count); owners let ``history`` refuse other users' ids, also after a
    delete. One SQLite file in the data directory.
    """

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS turns (user_id TEXT, session_id TEXT, total INTEGER NOT NULL,"
            " PRIMARY KEY (user_id, session_id));"
            "CREATE TABLE IF NOT EXISTS owners (memory_id TEXT PRIMARY KEY, user_id TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        )
        self._db.commit()

    def turns(self, user_id: str, session_id: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT total FROM turns WHERE user_id = ? AND session_id = ?", (user_id, session_id)
            ).fetchone()
        return int(row[0]) if row else 0

    def set_turns(self, user_id: str, session_id: str, total: int) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO turns VALUES (?, ?, ?)", (user_id, session_id, total))
            self._db.commit()

    def add_owner(self, memory_ids: list[str], user_id: str) -> None:
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO owners VALUES (?, ?)", [(m, user_id) for m in memory_ids])
            self._db.commit()

    def owner(self, memory_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT user_id FROM owners WHERE memory_id = ?", (memory_id,)).fetchone()
        return row[0] if row else None

    def forget_user(self, user_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM turns WHERE user_id = ?", (user_id,))
            self._db.execute("DELETE FROM owners WHERE user_id = ?", (user_id,))
            self._db.commit()

    def check_meta(self, key: str, value: str, what: str) -> None:
        """Remember ``value`` under ``key``; a store reopened with another value is refused."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
                self._db.commit()
                return
        if row[0] != value:
            raise MemlabError(f"{what}: this data directory was written with {row[0]!r}, not {value!r}")

    def close(self) -> None:
        with self._lock:
            self._db.close()


# ----------------------------------------------------------------------------- the backend
class Mem0Memory(Memory):
    name = "mem0"
    description = (
        "The mem0ai library (2.x): FAISS + SQLite history in the data dir; messages as memories, "
        "or mem0's LLM fact extraction when an LLM is configured."
    )
    Config = Mem0Config
    config: Mem0Config
    capabilities = frozenset(
        {Capability.LIST, Capability.UPDATE, Capability.DELETE, Capability.HISTORY, Capability.PERSIST}
    )

    def __init__(self, config=None, *, data_dir=None, chat_model: Any | None = None) -> None:  # type: ignore[no-untyped-def]
        """``chat_model``: a LangChain ``BaseChatModel`` for mem0's fact extraction (overrides ``llm``)."""
        super().__init__(config, data_dir=data_dir)
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
        self.infer = cfg.infer if cfg.infer is not None else (chat_model is not None or cfg.llm is not None)
        self._ledger: _Ledger | None = None
        try:
            self._mem = self._build(chat_model)
        except BaseException:
            self._release()
            raise
        actual = getattr(self._mem.embedding_model.config, "embedding_dims", None)
        if actual and int(actual) != self._dims:
            self.close()
            raise MemlabError(f"mem0 embedder produces {actual}-d vectors but the vector store was sized {self._dims}")
        self._batcher = _session_batch_embedding(self._mem.embedding_model) if cfg.batch_embed else None
        if self._batcher is not None:
            self._mem.embedding_model = self._batcher

    def _build(self, chat_model: Any | None) -> Any:
        cfg = self.config
        if self.infer and chat_model is None and cfg.llm is None:
            raise MemlabError("mem0 config: infer=true needs an LLM (set 'llm', or pass chat_model=)")
        if self.infer and cfg.bulk_insert:
            raise MemlabError("mem0 config: bulk_insert stores messages verbatim; it cannot be used with infer=true")
        mem0 = import_mem0(self.root / "mem0_home", telemetry=cfg.telemetry)
        self._ledger = _Ledger(self.root / LEDGER_FILE)
        embedder, dims, identity = self._embedder_config()
        self._ledger.check_meta("embedder", identity, "mem0 embedder")
        self._dims = dims
        mem0_config: dict[str, Any] = {
            "embedder": embedder,
            "vector_store": cfg.vector_store
            or {
                "provider": "faiss",
                "config": {"collection_name": cfg.collection, "path": str(self.root / "faiss"), "embedding_model_dims": dims},
            },
            "llm": self._llm_config(chat_model),
            "history_db_path": str(self.root / "history.db"),
        }
        if cfg.custom_instructions:
            mem0_config["custom_instructions"] = cfg.custom_instructions
        return mem0.Memory.from_config(mem0_config)

    # ------------------------------------------------------------------ building mem0's config
    def _embedder_config(self) -> tuple[dict[str, Any], int, str]:
        """mem0 embedder config, its vector size, and an identity string stored with the data."""
        cfg = self.config
        if isinstance(cfg.embedder, dict):
            dims = int(cfg.embedder["config"]["embedding_dims"])
            ident = f"{cfg.embedder['provider']}:{cfg.embedder['config'].get('model')}:{dims}"
            return dict(cfg.embedder), dims, ident
        if cfg.embedder == DEFAULT_EMBEDDER:
            from memlab.embedders.sentence_transformer import resolve_model

            model = resolve_model(cfg.embedder_model or "minilm")
            dims = MINILM_DIMS if cfg.embedder_model in (None, "minilm") else 0
            config: dict[str, Any] = {"model": model}
            if not dims:  # another model: ask it (mem0 fills embedding_dims when it loads the model)
                from sentence_transformers import SentenceTransformer

                probe = SentenceTransformer(model, device="cpu")
                dim_of = getattr(probe, "get_embedding_dimension", None) or probe.get_sentence_embedding_dimension
                dims = int(dim_of())
                del probe
            ident = f"huggingface:{Path(model).name}:{dims}"
            return {"provider": "huggingface", "config": config}, dims, ident
        try:
            import langchain.embeddings.base  # noqa: F401  (mem0's langchain provider imports it)
        except ImportError as exc:
            raise MissingDependencyError(
                "langchain", f"mem0 embedder {cfg.embedder!r} goes through mem0's langchain provider: pip install langchain"
            ) from exc
        from memlab.embedders import get_embedder

        inner = get_embedder(cfg.embedder, cfg.embedder_model)
        config = {"model": _MemlabEmbeddings.create(inner), "embedding_dims": inner.dim}
        return {"provider": "langchain", "config": config}, inner.dim, f"memlab:{inner.name}:{inner.dim}"

    def _llm_config(self, chat_model: Any | None) -> dict[str, Any]:
        if not self.infer:
            # mem0 always builds an LLM; this OpenAI client object is never called (see _NoLLM) and
            # points at the local machine, so even a stray call could not leave it.
            return {"provider": "openai", "config": {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}}
        try:
            from langchain_core.language_models.chat_models import BaseChatModel
            import langchain.chat_models.base  # noqa: F401  (mem0's langchain provider imports it)
        except ImportError as exc:
            raise MissingDependencyError(
                "langchain", "mem0 fact extraction (infer=true) goes through mem0's langchain provider: pip install langchain"
            ) from exc
        if chat_model is None:
            from memlab.llm import make_llm
            from memlab.llm.langchain_adapter import MemlabChatModel

            self._owned_llm = make_llm(self.config.llm)
            chat_model = MemlabChatModel(llm=self._owned_llm, json_mode=True)
        if not isinstance(chat_model, BaseChatModel):
            raise MemlabError(f"chat_model must be a LangChain BaseChatModel, got {type(chat_model).__name__}")
        return {"provider": "langchain", "config": {"model": chat_model}}

    # ------------------------------------------------------------------ ingest
    @property
    def ledger(self) -> _Ledger:
        if self._ledger is None:
            raise MemlabError("the mem0 backend is closed")
        return self._ledger

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        turns = [
            (first_turn + i, m)
            for i, m in enumerate(session.messages)
            if m.content.strip() and (self.infer or m.role != "system")  # mem0 skips system messages itself
        ]
        if not turns:
            return
        if self.infer:
            self._ingest_inferred(session, turns, user_id=user_id)
        elif self.config.bulk_insert:
            self._ingest_bulk(session, turns, user_id=user_id)
        else:
            self._ingest_verbatim(session, turns, user_id=user_id)

    def _message_metadata(self, session: Session, turn: int, message: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"session_id": session.id, "turn_index": turn}
        if message.timestamp is not None:
            meta["timestamp"] = message.timestamp.isoformat()
        return meta

    def _ingest_verbatim(self, session: Session, turns: list[tuple[int, Any]], *, user_id: str) -> None:
        """mem0's own ``add(infer=False)``, one message per call so each memory knows its turn."""
        if self._batcher is not None:
            self._batcher.prefetch([m.content for _, m in turns])
        ids: list[str] = []
        try:
            for turn, message in turns:
                result = self._mem.add(
                    [{"role": message.role, "content": message.content}],
                    user_id=user_id,
                    metadata=self._message_metadata(session, turn, message),
                    infer=False,
                )
                ids += [r["id"] for r in result.get("results", [])]
        except BaseException:
            # All or nothing: a session part that failed half-way is removed again, so that retrying
            # it (the turn count did not advance) stores each message once.
            for memory_id in ids:
                self._mem.delete(memory_id)
            ids = []
            raise
        finally:
            if self._batcher is not None:
                self._batcher.clear()
            self.ledger.add_owner(ids, user_id)

    def _ingest_bulk(self, session: Session, turns: list[tuple[int, Any]], *, user_id: str) -> None:
        """What ``add(infer=False)`` stores, written with one insert per session (mem0's batch APIs)."""
        from mem0.utils.lemmatization import lemmatize_for_bm25

        texts = [m.content for _, m in turns]
        if self._batcher is not None:
            self._batcher.prefetch(texts)
            vectors = [self._batcher.ready[t] for t in texts]
            self._batcher.clear()
        else:
            vectors = self._mem.embedding_model.embed_batch(texts, "add")
        ids, payloads, history = [], [], []
        for (turn, message), text in zip(turns, texts):
            now = datetime.now(timezone.utc).isoformat()
            payload = {
                **self._message_metadata(session, turn, message),
                "user_id": user_id,
                "role": message.role,
                "data": text,
                "hash": hashlib.md5(text.encode()).hexdigest(),
                "created_at": now,
                "updated_at": now,
                "text_lemmatized": lemmatize_for_bm25(text),
            }
            memory_id = str(uuid.uuid4())
            ids.append(memory_id)
            payloads.append(payload)
            history.append(
                {"memory_id": memory_id, "old_memory": None, "new_memory": text, "event": "ADD",
                 "created_at": now, "updated_at": now, "role": message.role}
            )
        self._mem.vector_store.insert(vectors=vectors, ids=ids, payloads=payloads)
        self._mem.db.batch_add_history(history)
        self.ledger.add_owner(ids, user_id)

    def _ingest_inferred(self, session: Session, turns: list[tuple[int, Any]], *, user_id: str) -> None:
        """mem0's fact extraction over windows of ``infer_window`` messages (an exchange by default)."""
        window = self.config.infer_window
        for start in range(0, len(turns), window):
            chunk = turns[start : start + window]
            metadata = {
                "session_id": session.id,
                "turn_index": chunk[0][0],
                "turn_count": chunk[-1][0] - chunk[0][0] + 1,
            }
            result = self._mem.add(
                [{"role": m.role, "content": m.content} for _, m in chunk],
                user_id=user_id,
                metadata=metadata,
                infer=True,
            )
            self.ledger.add_owner([r["id"] for r in result.get("results", []) if r.get("id")], user_id)

    # ------------------------------------------------------------------ retrieve
    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        if not query.strip():
            return Retrieval()
        found = self._mem.search(query, top_k=k, filters={"user_id": user_id}, threshold=self.config.threshold)
        items = [self._item(r) for r in found.get("results", [])[:k]]
        return Retrieval(items=items, context=render_turns(items))

    def _item(self, record: dict[str, Any]) -> MemoryItem:
        meta = dict(record.get("metadata") or {})
        source: dict[str, Any] = {}
        session_id = meta.pop("session_id", None)
        turn = meta.pop("turn_index", None)
        count = meta.pop("turn_count", None)
        if session_id is not None and turn is not None:
            source["session_id"] = session_id
            if count is None:  # one message, one memory
                source["turn_index"] = int(turn)
            else:  # a fact extracted from a window of turns
                source["turns"] = [{"session_id": session_id, "turn_index": int(turn) + i} for i in range(int(count))]
        if record.get("role"):
            source["role"] = record["role"]
        for key in ("created_at", "updated_at", "attributed_to", "actor_id"):
            if record.get(key):
                meta[key] = record[key]
        return MemoryItem(id=str(record["id"]), text=record.get("memory", ""), score=record.get("score"),
                          source=source, metadata=meta)

    # ------------------------------------------------------------------ capabilities
    def _owned(self, item_id: str, user_id: str) -> dict[str, Any]:
        record = self._mem.get(item_id) if isinstance(item_id, str) and item_id else None
        if record is None or record.get("user_id") != user_id:
            raise Mem0MemoryNotFoundError(f"no memory {item_id!r} for user {user_id!r}")
        return record

    def _list(self, user_id: str) -> list[MemoryItem]:
        records = self._mem.get_all(filters={"user_id": user_id}, top_k=1_000_000).get("results", [])
        items = [self._item(r) for r in records]
        items.sort(key=lambda i: (i.metadata.get("created_at") or "", i.source.get("turn_index", 0)))
        return items

    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        self._owned(item_id, user_id)
        self._mem.update(item_id, text=text)
        return self._item(self._owned(item_id, user_id))

    def _delete(self, item_id: str, *, user_id: str) -> None:
        self._owned(item_id, user_id)
        self._mem.delete(item_id)

    def _history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        owner = self.ledger.owner(item_id)
        if owner is None:  # stored before the ledger knew it (another writer): ask the store
            self._owned(item_id, user_id)
        elif owner != user_id:
            raise Mem0MemoryNotFoundError(f"no memory {item_id!r} for user {user_id!r}")
        return [dict(h) for h in self._mem.history(item_id)]

    def _reset(self, user_id: str) -> None:
        if self._mem.get_all(filters={"user_id": user_id}, top_k=1).get("results"):
            self._mem.delete_all(user_id=user_id)
        self._forget_messages(user_id)
        self.ledger.forget_user(user_id)

    def _forget_messages(self, user_id: str) -> None:
        """mem0 keeps the raw messages of each user (context for later extractions); delete_all leaves
        them, so a reset removes them here."""
        from mem0.memory.main import _build_session_scope

        db = self._mem.db
        with db._lock:
            db.connection.execute("DELETE FROM messages WHERE session_scope = ?", (_build_session_scope({"user_id": user_id}),))
            db.connection.commit()

    # ------------------------------------------------------------------ turns and lifetime
    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        return self.ledger.turns(user_id, session_id)

    def _record_turns(self, user_id: str, session_id: str, total: int) -> None:
        self.ledger.set_turns(user_id, session_id, total)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._mem.close()
        self._release()

    def _release(self) -> None:
        if self._ledger is not None:
            self.ledger.close()
            self._ledger = None
        if self._owned_llm is not None:
            self._owned_llm.close()
            self._owned_llm = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
