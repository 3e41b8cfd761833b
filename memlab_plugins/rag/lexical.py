"""Lexical retrieval for the rag backend: BM25 (``bm25s``) over a store's chunks, and rank fusion.

BM25 is derived state, brought up to date with the chunk store at the next search: chunks appended
since are added in place (their cost, not the store's size: term counts per chunk, postings per
term), and a query scores the chunks holding its terms. Its scores are bm25s' ("lucene" BM25, the
full rebuild per ingest this replaced), to the bit. A deletion rebuilds from the tokens kept per
chunk. Nothing lexical is written to disk, so a deleted chunk leaves no trace in it.

Tokenization: lower-cased words of two or more characters (scikit-learn's pattern, as
``bm25s.tokenize`` splits), English stopwords removed (bm25s' list), Porter-stemmed (NLTK's stemmer,
already a dependency for LoCoMo's F1; run from its file, see ``_porter_class_alone``), so "hiking"
matches "hike". Only bm25s' stopword list is
read, from its file: importing the ``bm25s`` package runs its ``selection`` module, which starts
JAX where JAX is installed (``jax.lax.top_k`` at import: seconds, and by JAX's defaults 75 % of a
GPU's memory reserved). Stems are kept per word (``_stem``), and a batch stems each distinct word
once, so an ingest's tokenizing costs little beside its embedding.
"""

from __future__ import annotations

import importlib.util
import math
import re
import threading
from array import array
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import MissingDependencyError
from memlab.types import MemoryItem

_stem_lock = threading.Lock()
_WORDS = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's token pattern, bm25s.tokenize's default


# What nltk/stem/porter.py imports from the nltk package: its base class, and two helpers its demo() uses.
_PORTER_IMPORTS = (
    "from nltk import redos\n",
    "from nltk.stem.api import StemmerI\n",
    "from nltk.termsec import safe_print\n",
)


def _module_from_file(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _porter_class_alone() -> Any:
    """NLTK's ``PorterStemmer`` class, run from its file without importing the ``nltk`` package, whose
    ``__init__`` imports most of NLTK and scipy.stats (0.3-1.5 s inside a run, up to 5 s alone on a
    loaded machine: most of a short run's BM25 upkeep). The file needs only ``StemmerI`` (an
    abstract base, loaded from its own file); its demo's helpers are left out."""
    found = importlib.util.find_spec("nltk")
    if found is None or not found.submodule_search_locations:
        raise ImportError("nltk is not installed")
    root = Path(next(iter(found.submodule_search_locations)))
    source = (root / "stem" / "porter.py").read_text(encoding="utf-8")
    if not all(line in source for line in _PORTER_IMPORTS):
        raise ImportError("nltk's porter.py imports other things than this loader knows")
    for line in _PORTER_IMPORTS:
        source = source.replace(line, "")
    namespace: dict[str, Any] = {
        "__name__": "_memlab_nltk_porter",
        "StemmerI": _module_from_file("_memlab_nltk_stem_api", root / "stem" / "api.py").StemmerI,
    }
    exec(compile(source, str(root / "stem" / "porter.py"), "exec"), namespace)  # noqa: S102 (nltk's own file)
    return namespace["PorterStemmer"]


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    try:
        return _porter_class_alone()()
    except (ImportError, OSError, SyntaxError, KeyError, AttributeError):  # another NLTK layout: its usual import
        from nltk.stem.porter import PorterStemmer

        return PorterStemmer()


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """bm25s' English stopwords, read from its ``stopwords`` module's file without importing the
    ``bm25s`` package (whose ``__init__`` imports its JAX-starting ``selection`` module)."""
    found = importlib.util.find_spec("bm25s")  # finds the package without running its __init__
    if found is None or not found.submodule_search_locations:
        raise MissingDependencyError("bm25s", "BM25 needs bm25s' stopword list: pip install bm25s")
    path = Path(next(iter(found.submodule_search_locations))) / "stopwords.py"
    spec = importlib.util.spec_from_file_location("_memlab_bm25s_stopwords", path)
    if spec is None or spec.loader is None:
        raise MissingDependencyError("bm25s", f"cannot read bm25s' stopword list at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.STOPWORDS_EN)


_stems: dict[str, str] = {}  # word -> Porter stem; words are few (tens of thousands), turns many
_MAX_STEMS = 500_000


def _stem_all(words: set[str]) -> None:
    """Stem every word of ``words`` not stemmed yet (under the lock: NLTK's stemmer is not thread-safe)."""
    new = [w for w in words if w not in _stems]
    if not new:
        return
    stem = _stemmer().stem
    with _stem_lock:
        if len(_stems) + len(new) > _MAX_STEMS:  # a bound on memory for a very long-lived process
            _stems.clear()
        for word in new:
            _stems[word] = stem(word)


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """BM25 tokens of each text (see the module docstring): the same as ``bm25s.tokenize(texts,
    stopwords="en", return_ids=False)`` then Porter stemming, each distinct word stemmed once."""
    skip = stopwords()
    rows = [[w for w in _WORDS.findall(text.lower()) if w not in skip] for text in texts]
    _stem_all({w for row in rows for w in row})
    stems = _stems
    try:
        return [[stems[w] for w in row] for row in rows]
    except KeyError:  # another thread cleared the table in between (a bound reached): stem this batch again
        with _stem_lock:
            stem = _stemmer().stem
            return [[stems.get(w) or stem(w) for w in row] for row in rows]


class BM25Index:
    """BM25 scores of one user's chunks, updated in place as chunks are appended.

    Scores equal those of a ``bm25s.BM25(method="lucene")`` index rebuilt over all chunks (the
    rebuild this replaces; tests/test_rag.py compares both on the dev files), but the index keeps
    term counts instead of precomputed scores: appending chunks costs what they hold, and a query
    scores only the chunks that contain its terms, with the corpus statistics (document count,
    document frequencies, mean length) as they are now. A deletion (rare) rebuilds from the
    tokens kept per chunk.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._tokens: dict[str, list[str]] = {}  # chunk id -> tokens (kept for rebuilds after a deletion)
        self._ids: list[str] = []  # chunk ids indexed, in store order
        self._removals = 0  # the store's deletion count when the index was (re)built
        self._lengths = array("q")  # tokens per chunk
        self._total_length = 0
        self._postings: dict[str, tuple[array, array]] = {}  # term -> (chunk positions, term counts)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ids)

    def _clear(self) -> None:
        self._ids, self._lengths, self._total_length, self._postings = [], array("q"), 0, {}

    def _append(self, chunks: Sequence[MemoryItem]) -> None:
        new = [c for c in chunks if c.id not in self._tokens]
        for chunk, tokens in zip(new, tokenize([c.text for c in new]) if new else []):
            self._tokens[chunk.id] = tokens
        for chunk in chunks:
            tokens = self._tokens[chunk.id]
            position = len(self._ids)
            self._ids.append(chunk.id)
            self._lengths.append(len(tokens))
            self._total_length += len(tokens)
            for term, count in Counter(tokens).items():
                postings = self._postings.get(term)
                if postings is None:
                    postings = self._postings[term] = (array("q"), array("f"))
                postings[0].append(position)
                postings[1].append(count)

    def update(self, chunks: Sequence[MemoryItem], removals: int) -> None:
        """Bring the index to ``chunks`` now (rag calls this at ingest, so a search finds it current)."""
        with self._lock:
            self.sync(chunks, removals)

    def sync(self, chunks: Sequence[MemoryItem], removals: int) -> None:
        """Bring the index to ``chunks`` (the store's chunks in order; ``removals`` its deletion count)."""
        n = len(self._ids)
        appended_only = (
            removals == self._removals and len(chunks) >= n and (n == 0 or chunks[n - 1].id == self._ids[n - 1])
        )
        if not appended_only:
            live = {c.id for c in chunks}
            self._tokens = {i: t for i, t in self._tokens.items() if i in live}
            self._clear()
            self._removals, n = removals, 0
        if len(chunks) > n:
            self._append(chunks[n:])

    def scores(self, query: str, chunks: Sequence[MemoryItem], removals: int) -> np.ndarray:
        """BM25 score of every chunk (in store order) for ``query``; zeros when nothing matches."""
        with self._lock:
            self.sync(chunks, removals)
            return self._scores(tokenize([query])[0])

    def _scores(self, terms: list[str]) -> np.ndarray:
        # The same float operations, in the same order, as bm25s' eager index and its get_scores:
        # idf (float64, stored as float32) times the term-frequency part (float64, per chunk),
        # rounded to float32, then summed in float32 in query-term order (a repeated term counts twice).
        n = len(self._ids)
        scores = np.zeros(n, dtype=np.float32)
        if not n:
            return scores
        mean_length = np.float64(self._total_length) / n
        lengths = np.frombuffer(self._lengths, dtype=np.int64)
        for term in terms:
            postings = self._postings.get(term)
            if postings is None:
                continue
            positions = np.frombuffer(postings[0], dtype=np.int64)
            counts = np.frombuffer(postings[1], dtype=np.float32)
            df = len(positions)
            idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
            norm = self.k1 * ((1 - self.b) + self.b * lengths[positions].astype(np.float64) / mean_length)
            part = (idf * (counts / (norm + counts))).astype(np.float32)
            np.add.at(scores, positions, part)
        return scores


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
