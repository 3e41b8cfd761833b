"""The embedder interface: texts in, L2-normalised float32 vectors out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class Embedder(ABC):
    """Turns texts into unit vectors, so inner product equals cosine similarity.

    ``name`` identifies the model (it keys the embedding cache); ``texts_embedded`` counts texts
    actually sent to the model, which benchmarks use to compare ingest strategies.
    """

    name: str
    dim: int

    def __init__(self) -> None:
        self.texts_embedded = 0

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        """Embed ``texts`` as documents, or as queries when ``query`` (some models prefix those)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not a single string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.asarray(self._embed(list(texts), query=query), dtype=np.float32)
        self.texts_embedded += len(texts)
        return normalize(vectors)

    def embed_one(self, text: str, *, query: bool = False) -> np.ndarray:
        return self.embed([text], query=query)[0]

    @abstractmethod
    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        """Return one vector per text (any scale; the base class normalises)."""


def normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
