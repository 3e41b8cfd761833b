"""Lexical retrieval for the rag backend: BM25 (``bm25s``) over a store's chunks, and rank fusion.

BM25 is derived state: it is rebuilt from the chunk store whenever the store changed (new chunks,
a deletion), at the next search. Tokens are cached per chunk, so a rebuild after an ingest only
tokenizes the new chunks; building the index itself over a few thousand chunks takes milliseconds.
Nothing lexical is written to disk, so a deleted chunk leaves no trace in it.

Tokenization: lower-cased words of two or more characters (scikit-learn's pattern, as bm25s does),
English stopwords removed (bm25s' list), Porter-stemmed (NLTK's stemmer, already a dependency for
LoCoMo's F1), so "hiking" matches "hike".
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import bm25s

_stem_lock = threading.Lock()


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """BM25 tokens of each text (see the module docstring)."""
    import bm25s

    words = bm25s.tokenize(list(texts), return_ids=False, stopwords="en", show_progress=False)
    with _stem_lock:
        return [[_stem(w) for w in row] for row in words]


class BM25Index:
    """BM25 scores of one user's chunks, kept in step with the store by its ``version``."""

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._tokens: dict[str, list[str]] = {}  # chunk id -> tokens
        self._version: int | None = None
        self._bm25: bm25s.BM25 | None = None
        self._size = 0
        self._lock = threading.Lock()

    def _refresh(self, ids: list[str], texts: list[str], version: int) -> None:
        import bm25s

        new = [(i, t) for i, t in zip(ids, texts) if i not in self._tokens]
        if new:
            for (chunk_id, _), tokens in zip(new, tokenize([t for _, t in new])):
                self._tokens[chunk_id] = tokens
        live = set(ids)
        for gone in [i for i in self._tokens if i not in live]:
            del self._tokens[gone]
        corpus = [self._tokens[i] for i in ids]
        self._bm25 = None
        if any(corpus):
            self._bm25 = bm25s.BM25(k1=self.k1, b=self.b)
            self._bm25.index(corpus, show_progress=False)
        self._size, self._version = len(ids), version

    def scores(self, query: str, ids: list[str], texts: list[str], version: int) -> np.ndarray:
        """BM25 score of every chunk (in store order) for ``query``; zeros when nothing matches."""
        with self._lock:
            if self._version != version:
                self._refresh(ids, texts, version)
            terms = tokenize([query])[0]
            bm25 = self._bm25
            if bm25 is None:
                return np.zeros(self._size, dtype=np.float32)
            terms = [t for t in terms if t in bm25.vocab_dict]
            if not terms:
                return np.zeros(self._size, dtype=np.float32)
            return np.asarray(bm25.get_scores(terms), dtype=np.float32)


def top(scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` best positive scores as (position, score), best first (ties: earlier first)."""
    positive = np.flatnonzero(scores > 0)
    if not len(positive):
        return []
    order = positive[np.lexsort((positive, -scores[positive]))][:n]
    return [(int(i), float(scores[i])) for i in order]


def reciprocal_rank_fusion(
    rankings: dict[str, list[tuple[int, float]]], weights: dict[str, float], k: int
) -> dict[int, float]:
    """RRF (Cormack et al., 2009): sum over rankings of weight / (k + rank), rank counted from 1."""
    fused: dict[int, float] = {}
    for name, ranking in rankings.items():
        weight = weights.get(name, 1.0)
        for rank, (position, _) in enumerate(ranking, start=1):
            fused[position] = fused.get(position, 0.0) + weight / (k + rank)
    return fused


def weighted_fusion(rankings: dict[str, list[tuple[int, float]]], weights: dict[str, float]) -> dict[int, float]:
    """Weighted sum of min-max normalised scores; a chunk absent from a ranking gets 0 from it."""
    fused: dict[int, float] = {}
    for name, ranking in rankings.items():
        if not ranking:
            continue
        values = np.array([s for _, s in ranking], dtype=np.float64)
        lo, hi = float(values.min()), float(values.max())
        span = hi - lo if hi > lo else 1.0
        weight = weights.get(name, 1.0)
        for position, score in ranking:
            fused[position] = fused.get(position, 0.0) + weight * ((score - lo) / span if hi > lo else 1.0)
    return fused
