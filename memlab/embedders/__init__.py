"""Embedders: the sentence-transformers default, a model-free hashing embedder, BGE-M3, and a cache.

``get_embedder`` is the one way code obtains an embedder: it builds each distinct spec once per
process (models are heavy; several backends and the reader share one) and wraps it in the on-disk
cache when a cache directory is given. A model goes on the device it is given, else on the run's
(``memlab.devices``: ``memlab run --device``), else on the CPU; the device is resolved first, so a
backend and a reader that name one model reach the same loaded instance however each spelled it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memlab.devices import resolve_device
from memlab.embedders.base import Embedder, normalize
from memlab.embedders.cache import CachedEmbedder
from memlab.embedders.hashing import HashingEmbedder
from memlab.errors import ConfigurationError

__all__ = [
    "Embedder",
    "CachedEmbedder",
    "HashingEmbedder",
    "get_embedder",
    "embed_ahead",
    "normalize",
    "EMBEDDER_KINDS",
]

EMBEDDER_KINDS = ("minilm", "sentence-transformers", "hashing", "bge-m3")

_default_cache_dir: Path | None = None
_instances: dict[tuple[Any, ...], Embedder] = {}
_lock = threading.Lock()


def _build(kind: str, model: str | None, options: dict[str, Any]) -> Embedder:
    if kind == "hashing":
        return HashingEmbedder(int(model) if model else 256)
    if kind in ("minilm", "sentence-transformers"):
        from memlab.embedders.sentence_transformer import SentenceTransformerEmbedder

        options.pop("max_length", None)  # sentence-transformers models carry their own limit
        return SentenceTransformerEmbedder(model or "minilm", **options)
    if kind == "bge-m3":
        from memlab.embedders.bge_m3 import BGEM3Embedder

        precision = options.pop("precision", None)
        if precision == "bf16":
            raise ConfigurationError("bge-m3 runs in fp32 or fp16 (FlagEmbedding has no bf16): precision fp32 or fp16")
        if precision is not None:
            options["use_fp16"] = precision == "fp16"
        return BGEM3Embedder(model or "BAAI/bge-m3", **options)
    raise ValueError(f"unknown embedder {kind!r}; choose one of {', '.join(EMBEDDER_KINDS)}")


def set_default_cache_dir(path: str | Path | None) -> Path | None:
    """Where embeddings are cached when a caller names no cache directory (the runner sets this).
    Returns the previous setting, so a caller can restore it."""
    global _default_cache_dir
    previous, _default_cache_dir = _default_cache_dir, (Path(path) if path else None)
    return previous


def get_embedder(
    kind: str = "minilm",
    model: str | None = None,
    *,
    cache_dir: str | Path | None = None,
    device: str | None = None,
    batch_size: int | None = None,
    max_length: int | None = None,
    precision: str | None = None,
) -> Embedder:
    """Return the shared embedder for (kind, model and model settings), cached on disk under
    ``cache_dir`` if given (else under the default set by ``set_default_cache_dir``; the hashing
    embedder is never cached). ``device`` defaults to the run's (else cpu); ``batch_size``,
    ``max_length`` and ``precision`` (auto: fp16 on a GPU, fp32 on the CPU) to the model's own."""
    cache_dir = cache_dir or (_default_cache_dir if kind != "hashing" else None)
    if kind != "hashing":  # the hashing embedder has no model to put anywhere
        device = resolve_device(device)
    if precision == "auto":  # the model's own choice: one instance whichever way it was asked for
        precision = None
    options = {
        k: v
        for k, v in (
            ("device", device),
            ("batch_size", batch_size),
            ("max_length", max_length),
            ("precision", precision),
        )
        if v is not None
    }
    settings = tuple(sorted(options.items()))
    key = (kind, model, settings, str(cache_dir) if cache_dir else None)
    with _lock:
        if key not in _instances:
            base_key = (kind, model, settings, None)
            if base_key not in _instances:
                _instances[base_key] = _build(kind, model, dict(options))
            base = _instances[base_key]
            _instances[key] = CachedEmbedder(base, cache_dir) if cache_dir else base
        return _instances[key]


def clear_embedders() -> None:
    """Drop the per-process instances (tests use this)."""
    with _lock:
        _instances.clear()


def embed_ahead(embedder: Embedder, texts: Sequence[str], *, query: bool = False) -> None:
    """Embed ``texts`` now, in large batches, so that later calls for them are cache lookups.

    Only a cached embedder keeps what it computed; for any other (the hashing embedder, a model
    used without a cache directory) this does nothing rather than compute vectors to throw away.
    """
    if isinstance(embedder, CachedEmbedder) and texts:
        embedder.embed(list(dict.fromkeys(texts)), query=query)
