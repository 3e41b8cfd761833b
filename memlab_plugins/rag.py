"""Dense retrieval-augmented memory: turn-level chunks in a FAISS index, top-k by an embedder.

Each user has an own index and chunk list, so one user's query can never score another user's
turns. Items come back in conversation order (oldest first), which is how a reader or an LLM
expects a transcript, each with its similarity score and its source turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import faiss
import numpy as np
from pydantic import Field

from memlab.embedders import Embedder, get_embedder
from memlab.memory import BackendConfig, Memory, render_turns
from memlab.types import MemoryItem, Retrieval, Session


class RagConfig(BackendConfig):
    embedder: str = Field(default="minilm", description="minilm | sentence-transformers | hashing | bge-m3")
    model: str | None = Field(default=None, description="model id or local path (default: the embedder's own)")
    roles: list[Literal["user", "assistant", "system"]] = Field(
        default=["user", "assistant"], description="which turns are indexed"
    )
    max_chunk_chars: int = Field(default=2000, ge=50, description="longer turns are cut (embedders truncate anyway)")


@dataclass
class _UserIndex:
    index: faiss.Index
    chunks: list[MemoryItem] = field(default_factory=list)


class RagMemory(Memory):
    name = "rag"
    description = "Dense RAG: turn-level chunks in a FAISS inner-product index, top-k by the embedder."
    Config = RagConfig
    config: RagConfig

    def __init__(self, config=None, *, data_dir=None, embedder: Embedder | None = None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir)
        self.embedder = embedder or get_embedder(self.config.embedder, self.config.model)
        self._users: dict[str, _UserIndex] = {}

    def _user(self, user_id: str) -> _UserIndex:
        if user_id not in self._users:
            self._users[user_id] = _UserIndex(faiss.IndexFlatIP(self.embedder.dim))
        return self._users[user_id]

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        chunks = [
            MemoryItem(
                id=f"{session.id}#{first_turn + i}",
                text=m.content[: self.config.max_chunk_chars],
                source={"session_id": session.id, "turn_index": first_turn + i, "role": m.role},
            )
            for i, m in enumerate(session.messages)
            if m.role in self.config.roles and m.content.strip()
        ]
        if not chunks:
            return
        vectors = self.embedder.embed([c.text for c in chunks])
        user = self._user(user_id)
        user.index.add(np.ascontiguousarray(vectors))
        user.chunks.extend(chunks)

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        user = self._users.get(user_id)
        if user is None or not user.chunks or not query.strip():
            return Retrieval()
        q = self.embedder.embed([query], query=True)
        scores, ids = user.index.search(q, min(k, len(user.chunks)))
        hits = [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
        hits.sort()  # conversation order
        items = [user.chunks[i].model_copy(update={"score": s}) for i, s in hits]
        return Retrieval(items=items, context=render_turns(items))

    def _reset(self, user_id: str) -> None:
        self._users.pop(user_id, None)
