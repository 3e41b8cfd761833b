"""rag's incremental BM25 gives bm25s' scores, to the bit, as a full rebuild after every ingest did.

The reference is what rag did before the index became incremental: a ``bm25s.BM25`` built over
all chunks after each ingest, queried with the query's known terms. Compared on the real dev
files (the PersonaMem 128k dev history and LoCoMo dev), session by session, for every question.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memlab.datasets import load_dataset
from memlab.types import MemoryItem
from memlab_plugins.rag import RagConfig, chunk_session
from memlab_plugins.rag.lexical import BM25Index, tokenize, top

K1, B = RagConfig().bm25_k1, RagConfig().bm25_b


class Rebuilt:
    """The full rebuild: bm25s over every chunk's tokens, as rag built it after each ingest."""

    def __init__(self, chunks: list[MemoryItem]) -> None:
        import bm25s

        self.n = len(chunks)
        corpus = tokenize([c.text for c in chunks])
        self.index = None
        if any(corpus):
            self.index = bm25s.BM25(k1=K1, b=B)
            self.index.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        terms = [t for t in tokenize([query])[0] if self.index is not None and t in self.index.vocab_dict]
        if not terms:
            return np.zeros(self.n, dtype=np.float32)
        assert self.index is not None
        return np.asarray(self.index.get_scores(terms), dtype=np.float32)


def rebuilt_scores(chunks: list[MemoryItem], query: str) -> np.ndarray:
    return Rebuilt(chunks).scores(query)


def check_replay(spec: str, every: int = 1) -> int:
    """Replay each history session by session; after every ``every``-th ingest compare all its questions."""
    dataset = load_dataset(spec)
    config = RagConfig()
    compared = 0
    for context_id, history in dataset.histories.items():
        queries = [q.text for q in dataset.questions_for(context_id)]
        chunks: list[MemoryItem] = []
        index = BM25Index(K1, B)
        for number, (session, start) in enumerate(history.slices(0, len(history.messages))):
            chunks.extend(chunk_session(session, 0, config))
            if number % every and start + len(session.messages) < len(history.messages):
                continue
            rebuilt = Rebuilt(chunks)
            for query in queries:
                expected = rebuilt.scores(query)
                got = index.scores(query, chunks, 0)
                assert got.dtype == expected.dtype and np.array_equal(got, expected), (context_id, number, query)
                assert top(got, 100) == top(expected, 100)
                compared += 1
    return compared


@pytest.mark.slow
def test_incremental_bm25_equals_the_rebuild_on_personamem_dev(personamem_dev: Path) -> None:
    assert check_replay(str(personamem_dev), every=1) > 500


@pytest.mark.slow
def test_incremental_bm25_equals_the_rebuild_on_locomo_dev(locomo_dev: Path) -> None:
    assert check_replay(f"locomo:{locomo_dev}", every=1) > 500


def item(i: int, text: str) -> MemoryItem:
    return MemoryItem(id=f"s#{i}", text=text)


def test_deletion_rebuilds_and_appends_extend() -> None:
    texts = ["hiking in the alps", "a vegan curry recipe", "hiking boots for winter", "jazz on sunday", ""]
    chunks = [item(i, t) for i, t in enumerate(texts)]
    index = BM25Index(K1, B)
    for n in range(1, len(chunks) + 1):  # one chunk appended at a time
        assert np.array_equal(index.scores("hiking boots", chunks[:n], 0), rebuilt_scores(chunks[:n], "hiking boots"))
    assert len(index) == len(chunks)
    kept = chunks[:1] + chunks[2:]  # a deletion in the middle shifts positions: the index rebuilds
    assert np.array_equal(index.scores("curry hiking", kept, 1), rebuilt_scores(kept, "curry hiking"))
    assert np.array_equal(index.scores("hiking hiking", kept, 1), rebuilt_scores(kept, "hiking hiking"))
    assert not index.scores("unknown words", kept, 1).any()
    assert not BM25Index().scores("hiking", [], 0).any()


def test_tokenize_equals_bm25s_tokenize_then_porter(personamem_dev: Path) -> None:
    """rag splits words itself (importing bm25s starts JAX); its tokens are bm25s' then Porter-stemmed, to the word."""
    import bm25s
    from nltk.stem.porter import PorterStemmer

    dataset = load_dataset(str(personamem_dev))
    texts = [m.content for history in dataset.histories.values() for m in history.messages][:800]
    texts += ["", "a", "Don't STOP the hiking—café 42 x", "über naïve résumé it's"]
    stem = PorterStemmer().stem
    expected = [
        [stem(w) for w in row] for row in bm25s.tokenize(texts, return_ids=False, stopwords="en", show_progress=False)
    ]
    assert tokenize(texts) == expected
