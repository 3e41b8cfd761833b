"""CoalescingEmbedder: concurrent one-text calls share model calls and get their own vectors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memlab.embedders import HashingEmbedder
from memlab.embedders.base import Embedder
from memlab.embedders.coalescing import CoalescingEmbedder


class SlowRecording(Embedder):
    """Hashing vectors; each model call waits until the test opens the gate, and is recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = HashingEmbedder(64)
        self.name, self.dim = "slow", self.inner.dim
        self.calls: list[list[str]] = []
        self.gate = threading.Event()
        self.entered = threading.Event()

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        self.calls.append(list(texts))
        self.entered.set()
        assert self.gate.wait(10)
        if "boom" in texts:
            raise RuntimeError("model failed")
        return self.inner.embed(texts, query=query)


def test_concurrent_single_text_calls_share_one_model_call() -> None:
    inner = SlowRecording()
    embedder = CoalescingEmbedder(inner)
    results: dict[str, np.ndarray] = {}

    def embed(text: str) -> None:
        results[text] = embedder.embed([text], query=True)[0]

    first = threading.Thread(target=embed, args=("q0",))
    first.start()
    assert inner.entered.wait(10)  # q0 is in the model; the next calls queue behind it
    others = [threading.Thread(target=embed, args=(f"q{i}",)) for i in range(1, 6)]
    for t in others:
        t.start()
    while sum(len(c) for c in embedder._waiting.values()) < 5:
        threading.Event().wait(0.01)
    inner.gate.set()
    for t in [first, *others]:
        t.join(10)
    assert inner.calls[0] == ["q0"] and sorted(inner.calls[1]) == [f"q{i}" for i in range(1, 6)]
    assert len(inner.calls) == 2, "the five queued calls went to the model together"
    for text, vector in results.items():
        np.testing.assert_allclose(vector, inner.inner.embed([text], query=True)[0], rtol=1e-6)
    # Several texts (ingestion) bypass the queue; errors reach every caller of the failed batch.
    assert embedder.embed(["a", "b"]).shape == (2, 64) and inner.calls[-1] == ["a", "b"]
    with pytest.raises(RuntimeError, match="model failed"):
        embedder.embed(["boom"], query=True)
    assert embedder.embed(["after"], query=True).shape == (1, 64)  # leadership was handed back
