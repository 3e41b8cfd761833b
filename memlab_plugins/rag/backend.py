"""Retrieval-augmented memory: chunks of the history in a FAISS index, top-k for a query.

The default is plain dense RAG: one chunk per turn, embedded with the packaged MiniLM, exact
inner-product search. Two independent additions:

- ``lexical: bm25`` fuses the semantic ranking with BM25 over the same chunks (``bm25s``) by
  reciprocal rank fusion (or a weighted sum of normalised scores), optionally expanding each hit
  with its neighbouring turns (``neighbours``). LLM-free; works with every embedder.
- With ``embedder: bge-m3`` the semantic ranking can score the way the BGE-M3 paper does (Chen et
  al., 2024): FAISS finds ``candidates`` dense neighbours, which are re-ranked by the sparse
  lexical score, the ColBERT late-interaction score, or the paper's weighted sum of all three
  (``hybrid``; weights 1 / 0.3 / 1 as in the paper, configurable).

Each user has an own store (chunks + index), so one user's query can never score another user's
turns. Items come back in conversation order (oldest first), each with its score and its source
turn(s) (``memlab.memory.turn_source``, dates included); contexts are rendered by
``render_turns``, so turn chunks get ``DATE:`` headers and transcript chunks start with their
``DATE:`` line. Where the chunks live is the ``store`` setting, behind one interface
(``memlab_plugins.rag.store.RagStore``): by default RAM, persisted under the data directory when
there is one (``local_store``: one snapshot and one append-only log per user, compacted; the
directory is locked for this process); with a PostgreSQL URL, that database (``pg``).
"""

from __future__ import annotations

import threading
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memlab.devices import check_device
from memlab.embedders import CachedEmbedder, Embedder, embed_ahead, get_embedder
from memlab.errors import ConfigurationError, MemlabError
from memlab.forget import ForgetRequests
from memlab.memory import (
    BackendConfig,
    Capability,
    IngestReport,
    Memory,
    MemoryFilter,
    format_date,
    message_json,
    render_turns,
    turn_source,
)
from memlab.pg import StoreUrl
from memlab.tokens import token_spans
from memlab.types import MemoryItem, Message, Retrieval, Session
from memlab_plugins.rag.index import ChunkStore, IndexSpec
from memlab_plugins.rag.lexical import BM25Index, reciprocal_rank_fusion, top, weighted_fusion
from memlab_plugins.rag.local_store import LocalRagStore
from memlab_plugins.rag.store import Chunker, RagStore, Vectors

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
    def _not_all_zero(self) -> HybridWeights:
        if self.dense == self.sparse == self.colbert == 0:
            raise ValueError("hybrid weights must not all be zero")
        return self


# --rag.preset personamem-baseline: the PersonaMem v1 reference RAG baseline (bowen-upenn/PersonaMem
# baselines/run.py, context_mode "rag", with encoder_flattened.py): every message of the history up to
# the question (system persona turns included) embedded whole with BGE-M3 dense vectors
# (BGEM3FlagModel.encode, max_length 8192), ranked by inner product alone, top 5. Keys the user sets
# explicitly still win. Each message is embedded as the reference's data loader hands it on, its JSON
# text {"role": ..., "content": ...} (embed_text "message_json"). Offline, BAAI/bge-m3 must be a
# local copy (--rag.model DIR), or swap the embedder (--rag.embedder minilm) and say so.
PERSONAMEM_BASELINE = {
    "embedder": "bge-m3",
    "scoring": "dense",
    "lexical": "none",
    "neighbours": 0,
    "chunking": "turn",
    "roles": ["user", "assistant", "system"],
    "max_chunk_chars": None,
    "embed_text": "message_json",
    "max_length": 8192,
    "top_k": 5,
}
RAG_PRESETS = {"personamem-baseline": PERSONAMEM_BASELINE}


class RagConfig(BackendConfig):
    preset: Literal["personamem-baseline"] | None = Field(
        default=None,
        exclude=True,  # the values it fills are in the config (and the fingerprint); the name alone adds nothing
        description="personamem-baseline: the PersonaMem v1 reference RAG (BGE-M3 dense only, every role "
        "including system turns, whole turns, top 5); explicit keys still win",
    )
    embedder: str = Field(default="minilm", description="minilm | sentence-transformers | hashing | bge-m3")
    model: str | None = Field(
        default=None, description="model id or local path (default: the embedder's own; bge-m3: BAAI/bge-m3)"
    )
    scoring: Literal["dense", "sparse", "colbert", "hybrid"] = Field(
        default="dense", description="dense = FAISS only; the others re-rank the dense candidates (bge-m3 only)"
    )
    weights: HybridWeights = Field(default_factory=HybridWeights, description="hybrid scoring weights")
    candidates: int = Field(default=100, ge=1, description="candidates per ranking that re-ranking and fusion see")
    lexical: Literal["none", "bm25"] = Field(
        default="bm25",
        description="bm25: fuse BM25 over the chunks with the semantic ranking (LLM-free hybrid); "
        "default bm25, or none with a PostgreSQL store (which ranks by dense vectors only)",
    )
    fusion: Literal["rrf", "weighted"] = Field(
        default="weighted", description="rrf = reciprocal rank fusion; weighted = sum of min-max normalised scores"
    )
    rrf_k: int = Field(default=60, ge=1, description="RRF constant: score = sum of weight / (rrf_k + rank)")
    lexical_weight: float = Field(default=1.25, ge=0, description="weight of the BM25 ranking in the fusion")
    semantic_weight: float = Field(
        default=1.0, ge=0, description="weight of the embedding ranking in the fusion (0 with bm25 = BM25 alone)"
    )
    bm25_k1: float = Field(default=0.9, ge=0, description="BM25 term-frequency saturation")
    bm25_b: float = Field(default=0.4, ge=0, le=1, description="BM25 length normalisation")
    neighbours: int = Field(
        default=0, ge=0, description="expand each hit with this many chunks before/after it in its session"
    )
    neighbour_weight: float = Field(default=0.5, ge=0, le=1, description="a neighbour's score as a share of its hit's")
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
    max_chunk_chars: int | None = Field(
        default=2000, ge=50, description="turn chunking: longer turns are cut (None: never)"
    )
    embed_text: Literal["content", "message_json"] = Field(
        default="content",
        description="turn chunking: what is embedded for a turn, its text, or its message as JSON "
        '({"role": ..., "content": ...}, as the PersonaMem reference RAG embeds it); the chunk keeps its text',
    )
    device: str | None = Field(
        default=None,
        description="cpu, cuda, cuda:N, mps or auto; None: the run's --device, else cpu. On a GPU the model "
        "runs in fp16 (precision auto), on the CPU in fp32",
    )
    precision: Literal["auto", "fp32", "fp16", "bf16"] = Field(
        default="auto", description="auto: fp16 on a GPU, fp32 on the CPU (bge-m3: no bf16)"
    )
    batch_size: int = Field(default=32, ge=1, description="texts per model forward pass (bge-m3)")
    max_length: int = Field(default=512, ge=8, description="model tokens per text; longer texts are truncated (bge-m3)")
    # PostgreSQL store (memlab_plugins.rag.pg.PgRagStore): several workers and hosts share one database.
    store: StoreUrl = Field(
        default=None,
        description="None/'file' = files in the data directory; postgresql://user@host:5432/db = that database",
    )
    pool_size: int = Field(default=4, ge=1, description="PostgreSQL store: connections per process")
    forget_requests: ForgetRequests = False

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

    @field_validator("device")
    @classmethod
    def _device_spelling(cls, value: str | None) -> str | None:
        return None if value is None else check_device(value)

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        """A preset fills defaults; keys the user sets explicitly still win."""
        if isinstance(data, dict) and data.get("preset") in RAG_PRESETS:
            filled = {**RAG_PRESETS[data["preset"]], **data}
            if filled.get("embedder") != "bge-m3" and "max_length" not in data:
                filled.pop("max_length", None)  # BGE-M3's window; another embedder keeps its own
            return filled
        return data

    @model_validator(mode="before")
    @classmethod
    def _lexical_default_for_the_store(cls, data: Any) -> Any:
        # The hybrid default needs the chunks in RAM; a database store ranks in SQL. Resolved here,
        # so the row's config (and its fingerprint) says which ranking ran.
        if isinstance(data, dict) and "lexical" not in data and str(data.get("store") or "").startswith("postgres"):
            return {**data, "lexical": "none"}
        return data

    @model_validator(mode="after")
    def _check(self) -> RagConfig:
        if not self.roles:
            raise ValueError("roles must name at least one role")
        if self.window_overlap >= self.window_tokens:
            raise ValueError(
                f"window_overlap ({self.window_overlap}) must be below window_tokens ({self.window_tokens})"
            )
        if self.semantic_weight == 0 and (self.lexical == "none" or self.lexical_weight == 0):
            raise ValueError("semantic_weight 0 needs lexical 'bm25' with a lexical_weight above 0: nothing would rank")
        if self.embed_text != "content" and self.chunking != "turn":
            raise ValueError(f"embed_text={self.embed_text!r} embeds single messages: it needs chunking 'turn'")
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

    def embedder_options(self) -> dict[str, Any]:
        """Model settings that differ from the defaults (device, batch size, max length, precision)."""
        defaults = type(self).model_fields
        return {
            k: getattr(self, k)
            for k in ("device", "batch_size", "max_length", "precision")
            if getattr(self, k) != defaults[k].default
        }


# ----------------------------------------------------------------------------- chunking
def _date_line(message: Message) -> str | None:
    return f"DATE: {format_date(message.timestamp)}" if message.timestamp is not None else None


def chunk_session(session: Session, first_turn: int, config: RagConfig) -> list[MemoryItem]:
    """Split one ingested session (part) into chunks; each keeps its session, turn(s), role and date."""
    turns = [
        (first_turn + i, m) for i, m in enumerate(session.messages) if m.role in config.roles and m.content.strip()
    ]
    if not turns:
        return []
    if config.chunking == "turn":
        return [
            MemoryItem(
                id=f"{session.id}#{turn}",
                text=m.content[: config.max_chunk_chars],
                source=turn_source(session, turn, m),
            )
            for turn, m in turns
        ]
    # Session and window chunks are transcripts, "role: text" per line. A session chunk has a
    # "DATE: ..." line wherever the date changes (render_turns' format); a window starts with the
    # date of its first turn. render_turns prints them as they are.
    sources = [turn_source(session, t, m) for t, m in turns]
    if config.chunking == "session":
        lines: list[str] = []
        last_date: str | None = None
        for _, m in turns:
            date = _date_line(m)
            if date is not None and date != last_date:
                lines.append(date)
                last_date = date
            lines.append(f"{m.role}: {m.content}")
        return [
            MemoryItem(
                id=f"{session.id}@{first_turn}",
                text="\n".join(lines),
                source={"session_id": session.id, "turns": sources},
            )
        ]
    lines = [f"{m.role}: {m.content}" for _, m in turns]
    transcript = "\n".join(lines)
    line_starts = np.cumsum([0] + [len(line) + 1 for line in lines[:-1]])
    spans = token_spans(transcript)
    stride = config.window_tokens - config.window_overlap
    chunks = []
    for number, start in enumerate(range(0, max(len(spans) - config.window_overlap, 1), stride)):
        window = spans[start : start + config.window_tokens]
        lo, hi = window[0][0], window[-1][1]
        first = int(np.searchsorted(line_starts, lo, side="right")) - 1
        last = int(np.searchsorted(line_starts, hi - 1, side="right")) - 1
        date = _date_line(turns[first][1])
        text = transcript[lo:hi] if date is None else f"{date}\n{transcript[lo:hi]}"
        chunks.append(
            MemoryItem(
                id=f"{session.id}@{first_turn}w{number}",
                text=text,
                source={"session_id": session.id, "turns": sources[first : last + 1]},
            )
        )
    return chunks


def _numbering(session: Session, first_turn: int, chunks: list[MemoryItem], config: RagConfig) -> Chunker:
    """The part's chunks numbered from the turn the store decides (their texts do not depend on it)."""

    def numbered(start: int) -> list[MemoryItem]:
        return chunks if start == first_turn else chunk_session(session, start, config)

    return numbered


# ----------------------------------------------------------------------------- embedders
def _m3_of(embedder: Embedder) -> Any:
    """The BGE-M3 model behind an embedder (unwrapping the cache), or None."""
    from memlab.embedders.bge_m3 import BGEM3Embedder

    inner = embedder.inner if isinstance(embedder, CachedEmbedder) else embedder
    return inner if isinstance(inner, BGEM3Embedder) else None


def _shared_embedder(config: RagConfig, cache_dir: Any) -> Embedder:
    """The process's shared embedder for the config, through the one factory (and the run's cache)."""
    options = config.embedder_options() if config.embedder != "hashing" else {}
    return get_embedder(config.embedder, config.model, cache_dir=cache_dir, **options)


# ----------------------------------------------------------------------------- the backend
class RagMemory(Memory):
    name = "rag"
    description = (
        "RAG: turn/session/window chunks in a FAISS index (flat or HNSW); dense top-k, BM25 fused by "
        "reciprocal rank fusion, or BGE-M3 sparse/ColBERT/hybrid re-ranking of the dense candidates."
    )
    concurrent_users = True  # per-user chunk stores with their own locks (or the database's transactions)
    Config = RagConfig
    capabilities = frozenset({Capability.PERSIST, Capability.LIST, Capability.DELETE, Capability.FILTER})
    config: RagConfig

    @classmethod
    def memory_depends_only_on_turns(cls, config: BackendConfig) -> bool:
        # Turn chunks are one per stored turn; BM25 statistics are over that set of chunks, and
        # neighbours are turns of the same session by turn order, so ingest partition cannot matter.
        # Session and window chunks are cut per ingest call.
        # A forget request deletes what was stored when its ingest call ends: that depends on the split.
        parsed = cls.parse_config(config)
        return parsed.chunking == "turn" and not parsed.forget_requests  # type: ignore[attr-defined]

    def __init__(self, config=None, *, data_dir=None, cache_dir=None, embedder: Embedder | None = None) -> None:
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        if self.config.store is not None:
            from memlab_plugins.rag.pg import unsupported  # lazy: psycopg is an optional extra

            problems = unsupported(self.config)
            if problems:
                raise ConfigurationError(
                    "rag with a PostgreSQL store ranks by dense vectors only; unsupported here: " + ", ".join(problems)
                )
        try:
            self.embedder = embedder or _shared_embedder(self.config, self.cache_dir)
            self._needs_sparse, self._needs_colbert = self.config.outputs()
            self._m3 = _m3_of(self.embedder)
            if (self._needs_sparse or self._needs_colbert) and self._m3 is None:
                raise MemlabError(
                    f"rag scoring={self.config.scoring!r} needs a BGE-M3 embedder, got {self.embedder.name!r}"
                )
            self._lexical: dict[str, BM25Index] = {}
            self._lexical_lock = threading.Lock()
            self._first_turn = threading.local()  # the turn an ingest's chunks were numbered from
            self.store: RagStore = self._open_store()
        except BaseException:
            self.close()
            raise

    def _open_store(self) -> RagStore:
        """The store the ``store`` setting names: RAM + files (the default), or a PostgreSQL database."""
        if self.config.store is None:
            return LocalRagStore(
                self.data_dir,
                signature=self._signature(),
                dim=self.embedder.dim,
                spec=self.config.index_spec(),
                rank=self._ranked,
                prepare=self._complete,
            )
        from memlab_plugins.rag.pg import PgRagStore

        return PgRagStore(
            str(self.config.store),
            embedder=self.embedder,
            signature=self._signature(),
            spec=self.config.index_spec(),
            pool_size=self.config.pool_size,
        )

    @property
    def _stores(self) -> dict[str, ChunkStore]:
        """The users' chunk stores loaded in RAM (the local store's; empty on PostgreSQL)."""
        return self.store.stores if isinstance(self.store, LocalRagStore) else {}

    # ------------------------------------------------------------------ stores
    def _signature(self) -> dict[str, Any]:
        c = self.config
        chunking: dict[str, Any] = {"chunking": c.chunking, "roles": sorted(c.roles)}
        if c.chunking == "turn":
            chunking["max_chunk_chars"] = c.max_chunk_chars
            if c.embed_text != "content":  # only when set, so stores written before the option still match
                chunking["embed_text"] = c.embed_text
        if c.chunking == "window":
            chunking.update(window_tokens=c.window_tokens, window_overlap=c.window_overlap)
        if c.chunking != "turn" and self._m3 is not None:
            chunking["max_length"] = c.max_length
        return {"embedder": self.embedder.name, **chunking}

    def _complete(self, store: ChunkStore) -> None:
        """Compute sparse/ColBERT outputs that a store saved under another scoring lacks."""
        for output, needed in (("sparse", self._needs_sparse), ("colbert", self._needs_colbert)):
            positions = store.missing(output) if needed else []  # type: ignore[arg-type]
            if positions:
                encoded = self._m3.encode(
                    [self._embedded_text(store.chunks[i]) for i in positions],
                    sparse=output == "sparse",
                    colbert=output == "colbert",
                )
                store.fill(output, positions, encoded.sparse if output == "sparse" else encoded.colbert)  # type: ignore[arg-type]

    def _embedded_text(self, chunk: MemoryItem) -> str:
        if self.config.embed_text == "message_json" and "role" in chunk.source:
            return message_json(chunk.source["role"], chunk.text)
        return chunk.text

    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        return self.store.next_turn(user_id, session_id)

    # ------------------------------------------------------------------ Memory
    def ingest(self, session: Session | Any, *, user_id: str) -> IngestReport:
        self._first_turn.value = None
        report = super().ingest(session, user_id=user_id)
        # The store numbers the turns when it writes (another ingest may have continued the
        # session since the count was read): report the number actually used.
        actual = getattr(self._first_turn, "value", None)
        return report if actual is None else report.model_copy(update={"first_turn": actual})

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        self._first_turn.value = self._store_parts([(session, first_turn)], user_id)[0]

    def _ingest_many(self, parts: list[tuple[Session, int]], *, user_id: str) -> None:
        self._store_parts(parts, user_id)

    def _store_parts(self, parts: list[tuple[Session, int]], user_id: str) -> list[int]:
        """Chunk each part on its own, embed all chunks in one call, store them in one ``add_many``;
        the first turn the store numbered each part from."""
        chunked = [chunk_session(session, first_turn, self.config) for session, first_turn in parts]
        texts = [self._embedded_text(c) for chunks in chunked for c in chunks]
        # Embed before touching the store: a failed model call must not count the sessions' turns.
        if self._needs_sparse or self._needs_colbert:
            out = self._m3.encode(texts, sparse=self._needs_sparse, colbert=self._needs_colbert)
            dense, sparse, colbert = out.dense, out.sparse or None, out.colbert or None
        else:
            dense = self.embedder.embed(texts) if texts else np.zeros((0, self.embedder.dim), np.float32)
            sparse = colbert = None
        batch: list[tuple[Session, Chunker, Vectors]] = []
        start = 0
        for (session, first_turn), chunks in zip(parts, chunked):
            end = start + len(chunks)
            vectors = Vectors(
                dense[start:end], sparse[start:end] if sparse else None, colbert[start:end] if colbert else None
            )

            batch.append((session, _numbering(session, first_turn, chunks, self.config), vectors))
            start = end
        firsts = self.store.add_many(user_id, batch)
        if self.config.lexical == "bm25" and isinstance(self.store, LocalRagStore):
            store = self.store.store(user_id, create=False)  # tokenizing new chunks is ingest work, not a search's
            if store is not None:
                with store.lock:
                    self._bm25(user_id).update(store.chunks, store.removals)
        return firsts

    def prepare(self, queries):
        """Embed the known queries in one batch (dense scoring: BGE-M3's re-rankings encode per query)."""
        if self.config.scoring == "dense" and self.config.semantic_weight > 0:
            embed_ahead(self.embedder, [q for q in queries if q.strip()], query=True)

    def _retrieve(self, query: str, *, user_id: str, k: int, filters: MemoryFilter | None = None) -> Retrieval:
        if not query.strip():
            return Retrieval()
        items = self.store.search(user_id, query, k, filters)  # conversation order, each with its score
        return Retrieval(items=items, context=render_turns(items))

    def _ranked(self, store: ChunkStore, user_id: str, query: str, k: int) -> list[tuple[int, MemoryItem]]:
        c = self.config
        parts: dict[int, dict[str, float]]
        if c.lexical == "none" and c.neighbours == 0:
            if c.scoring == "dense":
                hits = store.search(self.embedder.embed([query], query=True)[0], k)
                return [(i, store.chunks[i].model_copy(update={"score": s})) for i, s in hits]
            semantic, parts = self._rerank(store, query, k)
            return [(i, self._item(store, i, s, parts)) for i, s in semantic]
        pool = max(c.candidates, k)
        if c.semantic_weight == 0:
            semantic, parts = [], {}  # BM25 alone: no query embedding needed
        elif c.scoring == "dense":
            semantic = store.search(self.embedder.embed([query], query=True)[0], pool)
            parts = {i: {"dense": s} for i, s in semantic}
        else:
            semantic, parts = self._rerank(store, query, pool)
        if c.lexical == "bm25":
            lexical = top(self._bm25_scores(store, user_id, query), pool)
            for i, s in lexical:
                parts.setdefault(i, {})["bm25"] = s
            rankings = {"semantic": semantic, "bm25": lexical}
            weights = {"semantic": c.semantic_weight, "bm25": c.lexical_weight}
            fused = (
                reciprocal_rank_fusion(rankings, weights, c.rrf_k)
                if c.fusion == "rrf"
                else weighted_fusion(rankings, weights)
            )
        else:
            fused = dict(semantic)
        if c.neighbours:
            fused = self._expand(store, fused)
        order = sorted(fused, key=lambda i: (-fused[i], i))[:k]
        return [(i, self._item(store, i, fused[i], parts)) for i in order]

    def _item(self, store: ChunkStore, i: int, score: float, parts: dict[int, dict[str, float]]) -> MemoryItem:
        chunk = store.chunks[i]
        return chunk.model_copy(
            update={"score": float(score), "metadata": {**chunk.metadata, "scores": parts.get(i, {})}}
        )

    def _bm25(self, user_id: str) -> BM25Index:
        with self._lexical_lock:
            index = self._lexical.get(user_id)
            if index is None:
                index = self._lexical[user_id] = BM25Index(self.config.bm25_k1, self.config.bm25_b)
            return index

    def _bm25_scores(self, store: ChunkStore, user_id: str, query: str) -> np.ndarray:
        return self._bm25(user_id).scores(query, store.chunks, store.removals)

    def _expand(self, store: ChunkStore, fused: dict[int, float]) -> dict[int, float]:
        """Give each hit's neighbours in its session (store order) a share of the hit's score."""
        out = dict(fused)
        n, share = self.config.neighbours, self.config.neighbour_weight
        for i, score in fused.items():
            session = store.chunks[i].source.get("session_id")
            for j in [*range(i - n, i), *range(i + 1, i + n + 1)]:
                if 0 <= j < len(store.chunks) and store.chunks[j].source.get("session_id") == session:
                    out[j] = max(out.get(j, 0.0), score * share)
        return out

    def _rerank(
        self, store: ChunkStore, query: str, n: int
    ) -> tuple[list[tuple[int, float]], dict[int, dict[str, float]]]:
        """The BGE-M3 re-ranking of the dense candidates: (position, score) best first, and each one's parts."""
        from memlab.embedders.bge_m3 import colbert_scores, sparse_scores

        q = self._m3.encode([query], query=True, sparse=self._needs_sparse, colbert=self._needs_colbert)
        hits = store.search(q.dense[0], max(self.config.candidates, n))
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
        order = sorted(range(len(ids)), key=lambda j: (-float(total[j]), j))[:n]
        ranking = [(ids[j], float(total[j])) for j in order]
        return ranking, {ids[j]: {name: float(v[j]) for name, v in parts.items()} for j in order}

    # ------------------------------------------------------------------ listing, deletion, export
    def _list(self, user_id: str) -> list[MemoryItem]:
        return self.store.items(user_id)

    def _delete(self, item_id: str, *, user_id: str) -> None:
        self.store.delete(user_id, item_id)

    def _export(self, user_id: str) -> dict[str, Any]:
        return {
            "items": [c.model_dump(mode="json") for c in self.store.items(user_id)],
            "sessions": self.store.sessions(user_id),
        }

    def _reset(self, user_id: str) -> None:
        self._lexical.pop(user_id, None)
        self.store.reset(user_id)

    def release(self, user_id: str) -> None:
        """Drop the user's index and BM25 from RAM (the client's LRU); the files stay and reload on use."""
        self.store.release(user_id)
        if self.data_dir is not None:  # in-memory only: the RAM copy (and its BM25) is the memory
            self._lexical.pop(user_id, None)

    def check_ready(self) -> None:
        """The data directory (file store) or a real read of the database (PostgreSQL store)."""
        super().check_ready()
        self.store.check_ready()

    def close(self) -> None:
        store: RagStore | None = getattr(self, "store", None)
        if store is not None:
            store.close()
