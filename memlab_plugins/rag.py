"""Retrieval-augmented memory: chunks of the history in a FAISS index, top-k for a query.

The default is plain dense RAG: one chunk per turn, embedded with the packaged MiniLM, exact
inner-product search. With ``embedder: bge-m3`` the backend can score the way the BGE-M3 paper
does (Chen et al., 2024): FAISS finds ``candidates`` dense neighbours, which are re-ranked by the
sparse lexical score, the ColBERT late-interaction score, or the paper's weighted sum of all
three (``hybrid``; weights 1 / 0.3 / 1 as in the paper, configurable). This mirrors how BGE-M3 is
used in practice: dense recall first, multi-signal re-ranking of a short list.

Each user has an own store (chunks + index), so one user's query can never score another user's
turns. Items come back in conversation order (oldest first), each with its score and its source
turn(s). With a data directory the stores persist (see ``memlab_plugins.rag_index``).
"""

from __future__ import annotations

import threading
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memlab.embedders import CachedEmbedder, Embedder, get_embedder
from memlab.errors import MemlabError
from memlab.memory import BackendConfig, Capability, Memory, render_turns
from memlab.tokens import token_spans
from memlab.types import MemoryItem, Retrieval, Session
from memlab_plugins.rag_index import ChunkStore, IndexSpec, remove_store

RoleName = Literal["user", "assistant", "system"]
ALL_ROLES: list[RoleName] = ["user", "assistant", "system"]


class HybridWeights(BaseModel):
    """Weights of the hybrid score: w_dense * dense + w_sparse * sparse + w_colbert * colbert.

    The defaults are the BGE-M3 paper's (s_rank = 1 * s_dense + 0.3 * s_lex + 1 * s_mul).
    """

    model_config = ConfigDict(extra="forbid")

    dense: float = Field(default=1.0, ge=0)
    sparse: float = Field(default=0.3, ge=0)
    colbert: float = Field(default=1.0, ge=0)

    @model_validator(mode="after")
    def _not_all_zero(self) -> "HybridWeights":
        if self.dense == self.sparse == self.colbert == 0:
            raise ValueError("hybrid weights must not all be zero")
        return self


class RagConfig(BackendConfig):
    embedder: str = Field(default="minilm", description="minilm | sentence-transformers | hashing | bge-m3")
    model: str | None = Field(
        default=None, description="model id or local path (default: the embedder's own; bge-m3: BAAI/bge-m3)"
    )
    scoring: Literal["dense", "sparse", "colbert", "hybrid"] = Field(
        default="dense", description="dense = FAISS only; the others re-rank the dense candidates (bge-m3 only)"
    )
    weights: HybridWeights = Field(default_factory=HybridWeights, description="hybrid scoring weights")
    candidates: int = Field(default=100, ge=1, description="dense candidates re-ranked by sparse/colbert/hybrid")
    index: Literal["flat", "hnsw"] = Field(default="flat", description="exact IndexFlatIP, or HNSW for large histories")
    hnsw_m: int = Field(default=32, ge=4, description="HNSW graph degree")
    hnsw_ef_construction: int = Field(default=200, ge=8, description="HNSW build-time search width")
    hnsw_ef_search: int = Field(default=128, ge=8, description="HNSW query-time search width")
    chunking: Literal["turn", "session", "window"] = Field(
        default="turn", description="one chunk per turn, per session (part), or a sliding token window"
    )
    window_tokens: int = Field(default=256, ge=8, description="window chunking: tokens per window")
    window_overlap: int = Field(default=64, ge=0, description="window chunking: tokens shared by neighbours")
    roles: list[RoleName] = Field(
        default=["user", "assistant"], description="turns indexed: a list of roles, or 'user' / 'all'"
    )
    max_chunk_chars: int = Field(default=2000, ge=50, description="turn chunking: longer turns are cut")
    device: str = Field(default="cpu", description="cpu (fp32) or a torch device such as cuda:0 (fp16)")
    batch_size: int = Field(default=32, ge=1, description="texts per model forward pass (bge-m3)")
    max_length: int = Field(default=512, ge=8, description="model tokens per text; longer texts are truncated (bge-m3)")

    @field_validator("roles", mode="before")
    @classmethod
    def _role_shorthands(cls, value: Any) -> Any:
        if value == "user":
            return ["user"]
        if value == "all":
            return list(ALL_ROLES)
        if isinstance(value, str):
            raise ValueError(f"roles must be a list of roles, 'user' or 'all', got {value!r}")
        return value

    @model_validator(mode="after")
    def _check(self) -> "RagConfig":
        if not self.roles:
            raise ValueError("roles must name at least one role")
        if self.window_overlap >= self.window_tokens:
            raise ValueError(f"window_overlap ({self.window_overlap}) must be below window_tokens ({self.window_tokens})")
        if self.scoring != "dense" and self.embedder != "bge-m3":
            raise ValueError(
                f"scoring={self.scoring!r} needs BGE-M3's sparse and ColBERT heads: set embedder to 'bge-m3' "
                f"(the {self.embedder!r} embedder only makes dense vectors; use scoring='dense' with it)"
            )
        return self

    def index_spec(self) -> IndexSpec:
        return IndexSpec(self.index, self.hnsw_m, self.hnsw_ef_construction, self.hnsw_ef_search)

    def outputs(self) -> tuple[bool, bool]:
        """(needs sparse, needs colbert) for the configured scoring."""
        if self.scoring == "hybrid":
            return self.weights.sparse > 0, self.weights.colbert > 0
        return self.scoring == "sparse", self.scoring == "colbert"


# ----------------------------------------------------------------------------- chunking
def _turn_source(session_id: str, turn: int, role: str) -> dict[str, Any]:
    return {"session_id": session_id, "turn_index": turn, "role": role}


def chunk_session(session: Session, first_turn: int, config: RagConfig) -> list[MemoryItem]:
    """Split one ingested session (part) into chunks; each keeps its session, turn(s) and role."""
    turns = [
        (first_turn + i, m.role, m.content)
        for i, m in enumerate(session.messages)
        if m.role in config.roles and m.content.strip()
    ]
    if not turns:
        return []
    if config.chunking == "turn":
        return [
            MemoryItem(id=f"{session.id}#{turn}", text=text[: config.max_chunk_chars], source=_turn_source(session.id, turn, role))
            for turn, role, text in turns
        ]
    # Session and window chunks are transcripts, "role: text" per line; render_turns prints them as is.
    lines = [f"{role}: {text}" for _, role, text in turns]
    transcript = "\n".join(lines)
    line_starts = np.cumsum([0] + [len(line) + 1 for line in lines[:-1]])
    if config.chunking == "session":
        return [
            MemoryItem(
                id=f"{session.id}@{first_turn}",
                text=transcript,
                source={"session_id": session.id, "turns": [_turn_source(session.id, t, r) for t, r, _ in turns]},
            )
        ]
    spans = token_spans(transcript)
    stride = config.window_tokens - config.window_overlap
    chunks = []
    for number, start in enumerate(range(0, max(len(spans) - config.window_overlap, 1), stride)):
        window = spans[start : start + config.window_tokens]
        lo, hi = window[0][0], window[-1][1]
        first = int(np.searchsorted(line_starts, lo, side="right")) - 1
        last = int(np.searchsorted(line_starts, hi - 1, side="right")) - 1
        chunks.append(
            MemoryItem(
                id=f"{session.id}@{first_turn}w{number}",
                text=transcript[lo:hi],
                source={
                    "session_id": session.id,
                    "turns": [_turn_source(session.id, t, r) for t, r, _ in turns[first : last + 1]],
                },
            )
        )
    return chunks


# ----------------------------------------------------------------------------- embedders
_own_embedders: dict[tuple[Any, ...], Embedder] = {}
_own_lock = threading.Lock()


def _make_embedder(config: RagConfig) -> Embedder:
    """The shared embedder for the config; non-default device/batch settings get an own instance."""
    defaults = RagConfig.model_fields
    plain = all(getattr(config, k) == defaults[k].default for k in ("device", "batch_size", "max_length"))
    if plain or config.embedder == "hashing":
        return get_embedder(config.embedder, config.model)
    key = (config.embedder, config.model, config.device, config.batch_size, config.max_length)
    with _own_lock:
        if key not in _own_embedders:
            if config.embedder == "bge-m3":
                from memlab.embedders.bge_m3 import DEFAULT_MODEL, BGEM3Embedder

                _own_embedders[key] = BGEM3Embedder(
                    config.model or DEFAULT_MODEL,
                    device=config.device,
                    batch_size=config.batch_size,
                    max_length=config.max_length,
                )
            elif config.embedder in ("minilm", "sentence-transformers"):
                from memlab.embedders.sentence_transformer import SentenceTransformerEmbedder

                _own_embedders[key] = SentenceTransformerEmbedder(
                    config.model or "minilm", device=config.device, batch_size=config.batch_size
                )
            else:
                return get_embedder(config.embedder, config.model)  # unknown kinds get its error
        return _own_embedders[key]


def _m3_of(embedder: Embedder) -> Any:
    """The BGE-M3 model behind an embedder (unwrapping the cache), or None."""
    from memlab.embedders.bge_m3 import BGEM3Embedder

    inner = embedder.inner if isinstance(embedder, CachedEmbedder) else embedder
    return inner if isinstance(inner, BGEM3Embedder) else None


# ----------------------------------------------------------------------------- the backend
class RagMemory(Memory):
    name = "rag"
    description = (
        "RAG: turn/session/window chunks in a FAISS index (flat or HNSW); dense top-k, or BGE-M3 "
        "sparse/ColBERT/hybrid re-ranking of the dense candidates."
    )
    Config = RagConfig
    capabilities = frozenset({Capability.PERSIST})
    config: RagConfig

    def __init__(self, config=None, *, data_dir=None, embedder: Embedder | None = None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir)
        self.embedder = embedder or _make_embedder(self.config)
        self._needs_sparse, self._needs_colbert = self.config.outputs()
        self._m3 = _m3_of(self.embedder)
        if (self._needs_sparse or self._needs_colbert) and self._m3 is None:
            raise MemlabError(
                f"rag scoring={self.config.scoring!r} needs a BGE-M3 embedder, got {self.embedder.name!r}"
            )
        self._stores: dict[str, ChunkStore] = {}

    # ------------------------------------------------------------------ stores
    def _signature(self) -> dict[str, Any]:
        c = self.config
        chunking: dict[str, Any] = {"chunking": c.chunking, "roles": sorted(c.roles)}
        if c.chunking == "turn":
            chunking["max_chunk_chars"] = c.max_chunk_chars
        if c.chunking == "window":
            chunking.update(window_tokens=c.window_tokens, window_overlap=c.window_overlap)
        if c.chunking != "turn" and self._m3 is not None:
            chunking["max_length"] = c.max_length
        return {"embedder": self.embedder.name, **chunking}

    def _store(self, user_id: str, *, create: bool) -> ChunkStore | None:
        store = self._stores.get(user_id)
        if store is None:
            directory = self.data_dir / f"user-{user_id}" if self.data_dir is not None else None
            if not create and (directory is None or not directory.exists()):
                return None
            store = ChunkStore(self.embedder.dim, self.config.index_spec(), self._signature(), directory)
            self._complete(store)
            self._stores[user_id] = store
        return store

    def _complete(self, store: ChunkStore) -> None:
        """Compute sparse/ColBERT outputs that a store saved under another scoring lacks."""
        for output, needed in (("sparse", self._needs_sparse), ("colbert", self._needs_colbert)):
            positions = store.missing(output) if needed else []  # type: ignore[arg-type]
            if positions:
                encoded = self._m3.encode(
                    [store.chunks[i].text for i in positions],
                    sparse=output == "sparse",
                    colbert=output == "colbert",
                )
                store.fill(output, positions, encoded.sparse if output == "sparse" else encoded.colbert)  # type: ignore[arg-type]

    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        store = self._store(user_id, create=False)
        return store.sessions.get(session_id, 0) if store is not None else 0

    # ------------------------------------------------------------------ Memory
    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        store = self._store(user_id, create=True)
        assert store is not None
        chunks = chunk_session(session, first_turn, self.config)
        texts = [c.text for c in chunks]
        # Embed before touching the store: a failed model call must not count the session's turns.
        if self._needs_sparse or self._needs_colbert:
            out = self._m3.encode(texts, sparse=self._needs_sparse, colbert=self._needs_colbert)
            dense, sparse, colbert = out.dense, out.sparse or None, out.colbert or None
        else:
            dense = self.embedder.embed(texts) if texts else np.zeros((0, self.embedder.dim), np.float32)
            sparse = colbert = None
        previous = store.sessions.get(session.id)
        store.sessions[session.id] = first_turn + len(session.messages)  # add() writes it to the manifest
        try:
            store.add(chunks, dense, sparse, colbert)
        except BaseException:
            if previous is None:
                store.sessions.pop(session.id, None)
            else:
                store.sessions[session.id] = previous
            if store.directory is not None:
                # The save failed part-way: the manifest on disk is the truth, reopen from it on next use.
                self._stores.pop(user_id, None)
            raise

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        store = self._store(user_id, create=False)
        if store is None or not len(store) or not query.strip():
            return Retrieval()
        if self.config.scoring == "dense":
            hits = store.search(self.embedder.embed([query], query=True)[0], k)
            found = [(i, store.chunks[i].model_copy(update={"score": s})) for i, s in hits]
        else:
            found = self._rerank(store, query, k)
        found.sort(key=lambda pair: pair[0])  # store order is conversation order
        items = [item for _, item in found]
        return Retrieval(items=items, context=render_turns(items))

    def _rerank(self, store: ChunkStore, query: str, k: int) -> list[tuple[int, MemoryItem]]:
        from memlab.embedders.bge_m3 import colbert_scores, sparse_scores

        q = self._m3.encode([query], query=True, sparse=self._needs_sparse, colbert=self._needs_colbert)
        hits = store.search(q.dense[0], max(self.config.candidates, k))
        ids = [i for i, _ in hits]
        parts: dict[str, np.ndarray] = {"dense": np.array([s for _, s in hits], dtype=np.float32)}
        if self._needs_sparse:
            parts["sparse"] = sparse_scores(q.sparse[0], [store.sparse[i] for i in ids])  # type: ignore[misc]
        if self._needs_colbert:
            parts["colbert"] = colbert_scores(q.colbert[0], [store.colbert[i] for i in ids])  # type: ignore[misc]
        if self.config.scoring == "hybrid":
            w = self.config.weights
            total = w.dense * parts["dense"] + sum(
                getattr(w, name) * parts[name] for name in ("sparse", "colbert") if name in parts
            )
        else:
            total = parts[self.config.scoring]
        # Best first; ties go to the better dense score (the candidate order).
        order = sorted(range(len(ids)), key=lambda j: (-float(total[j]), j))[:k]
        return [
            (
                ids[j],
                store.chunks[ids[j]].model_copy(
                    update={
                        "score": float(total[j]),
                        "metadata": {**store.chunks[ids[j]].metadata, "scores": {n: float(v[j]) for n, v in parts.items()}},
                    }
                ),
            )
            for j in order
        ]

    def _reset(self, user_id: str) -> None:
        self._stores.pop(user_id, None)
        if self.data_dir is not None:
            remove_store(self.data_dir / f"user-{user_id}")

    def close(self) -> None:
        for store in self._stores.values():
            store.save_index()
