"""A model-free embedder: hashed bag of words and character trigrams.

It needs no weights and runs in microseconds, so tests and quick smoke runs use it. It is a real
lexical similarity (texts sharing words score higher), not a random stand-in.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from memlab.embedders.base import Embedder

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder(Embedder):
    def __init__(self, dim: int = 256) -> None:
        super().__init__()
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _bucket(self, token: str) -> int:
        return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little") % self.dim

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[row, self._bucket("w:" + word)] += 1.0
                padded = f"#{word}#"
                for i in range(len(padded) - 2):
                    out[row, self._bucket("c:" + padded[i : i + 3])] += 0.3
        return out
