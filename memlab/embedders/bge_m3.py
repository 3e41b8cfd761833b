"""BGE-M3 through FlagEmbedding's own ``BGEM3FlagModel``: dense, sparse and ColBERT outputs.

BGE-M3 (Chen et al., 2024) gives three representations from one forward pass: a dense CLS
vector, a lexical weight per input token (sparse), and one vector per token (ColBERT
multi-vector). As an ``Embedder`` it returns the dense vectors; ``encode`` returns all three for
backends that re-rank with them (the ``rag`` backend's ``scoring`` setting), and the scoring
functions below compute the three relevance scores exactly as FlagEmbedding defines them.

Weights come from a local directory or a Hugging Face model id (``BAAI/bge-m3``). Offline, an id
is looked up in the local Hugging Face cache only; when it is not there the error says how to get
the weights and which config key (``rag.model``) points at them.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memlab.embedders.base import Embedder, normalize
from memlab.errors import ModelUnavailableError

DEFAULT_MODEL = "BAAI/bge-m3"
# The two heads BGE-M3 adds to XLM-RoBERTa; without them FlagEmbedding silently uses random ones.
HEAD_FILES = ("colbert_linear.pt", "sparse_linear.pt")

GET_WEIGHTS_HINT = (
    "To use BGE-M3 offline, download it where you have internet:\n"
    "    huggingface-cli download BAAI/bge-m3 --local-dir /path/to/bge-m3\n"
    "(about 2.3 GB; the folder must hold config.json, the weights, tokenizer files, colbert_linear.pt and "
    "sparse_linear.pt), copy the folder to this machine and point the config key `rag.model` at it, e.g. "
    "`memlab run --backends rag --rag.embedder bge-m3 --rag.model /path/to/bge-m3` "
    "(or `model: /path/to/bge-m3` under the rag backend's config in a run file)."
)


@dataclass
class M3Output:
    """BGE-M3's three outputs for a list of texts (lists are empty for outputs not asked for)."""

    dense: np.ndarray  # (n, dim) float32, unit length
    sparse: list[dict[int, float]] = field(default_factory=list)  # token id -> weight
    colbert: list[np.ndarray] = field(default_factory=list)  # (tokens, dim) float32, unit rows


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")


def resolve_model_dir(model: str) -> str:
    """A local directory holding BGE-M3-layout weights for ``model`` (a path or a hub id)."""
    path = Path(model).expanduser()
    if path.is_dir():
        missing = [name for name in ("config.json", *HEAD_FILES) if not (path / name).is_file()]
        if missing:
            raise ModelUnavailableError(
                f"{path} is not a BGE-M3 model directory: missing {', '.join(missing)}.\n{GET_WEIGHTS_HINT}"
            )
        return str(path)
    # Hub ids are "owner/name"; anything else that is not an existing directory is a wrong path.
    looks_like_path = path.is_absolute() or model.startswith((".", "~")) or model.count("/") != 1
    if path.exists() or looks_like_path:
        raise ModelUnavailableError(
            f"BGE-M3 model directory {model!r} (config key `rag.model`) does not exist.\n{GET_WEIGHTS_HINT}"
        )
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(
            repo_id=model,
            local_files_only=_offline(),
            ignore_patterns=["flax_model.msgpack", "rust_model.ot", "tf_model.h5", "onnx/*", "*.onnx"],
        )
    except Exception as exc:  # offline cache miss, no network, unknown repo...
        where = (
            "is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
            if _offline()
            else "could not be downloaded"
        )
        raise ModelUnavailableError(
            f"BGE-M3 model {model!r} (config key `rag.model`) {where}: {type(exc).__name__}: {exc}\n{GET_WEIGHTS_HINT}"
        ) from exc
    return resolve_model_dir(local)


class BGEM3Embedder(Embedder):
    """Wraps ``FlagEmbedding.BGEM3FlagModel``. CPU and fp32 by default; fp16 only on a GPU."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "cpu",
        use_fp16: bool | None = None,
        batch_size: int = 32,
        max_length: int = 512,
    ) -> None:
        super().__init__()
        if use_fp16 and device == "cpu":
            raise ValueError("fp16 is not supported on CPU: BGE-M3 runs in fp32 there (leave use_fp16 unset)")
        from FlagEmbedding import BGEM3FlagModel

        self.model_ref = model
        self.model_dir = resolve_model_dir(model)
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        fp16 = device != "cpu" if use_fp16 is None else use_fp16
        # FlagEmbedding logs a warning per load about the pooler it does not use; keep runs quiet.
        for noisy in ("transformers.modeling_utils", "transformers.integrations.tensor_parallel"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
        try:
            self.model = BGEM3FlagModel(
                self.model_dir,
                use_fp16=fp16,
                devices=device,  # an explicit device: FlagEmbedding would otherwise take every GPU it sees
                batch_size=batch_size,
                query_max_length=max_length,
                passage_max_length=max_length,
            )
        except Exception as exc:
            raise ModelUnavailableError(
                f"could not load BGE-M3 from {self.model_dir}: {exc}\n{GET_WEIGHTS_HINT}"
            ) from exc
        hf_model = self.model.model.model
        self.dim = int(hf_model.config.hidden_size)
        self.colbert_dim = int(self.model.model.colbert_linear.out_features)
        tokenizer = self.model.tokenizer
        self._special_ids = {
            tokenizer.convert_tokens_to_ids(tokenizer.special_tokens_map[name])
            for name in ("cls_token", "eos_token", "pad_token", "unk_token")
            if name in tokenizer.special_tokens_map
        }
        # What BGEM3FlagModel.encode does before each call, done once: fp32 on CPU, eval mode.
        if device == "cpu":
            self.model.model.float()
        self.model.model.to(device)
        self.model.model.eval()
        # The name keys the embedding cache: two different models in folders of one name must not
        # share vectors, so it carries a digest of the folder and its config's modification time.
        stamp = f"{Path(self.model_dir).resolve()}|{(Path(self.model_dir) / 'config.json').stat().st_mtime_ns}"
        self.name = f"bge-m3:{Path(self.model_dir).name}-{hashlib.sha1(stamp.encode()).hexdigest()[:8]}"
        if max_length != 512 or device != "cpu":  # truncation and fp16 change the vectors: their own cache rows
            self.name += f"|max_length={max_length}|{'fp32' if device == 'cpu' else 'fp16'}"

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        return self.encode(texts, query=query, sparse=False, colbert=False).dense

    def encode(
        self, texts: Sequence[str], *, query: bool = False, sparse: bool = True, colbert: bool = True
    ) -> M3Output:
        """All outputs asked for, in one forward pass per batch.

        This runs BGEM3FlagModel's own tokenizer and inference module (its ``.tokenizer`` and
        ``.model``) with the same post-processing as ``BGEM3FlagModel.encode`` (the tests check the
        outputs agree), but without that method's extra probe forward pass on the first batch (it
        doubled the cost of the per-session ingests) and its progress bars.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts, not a single string")
        texts = list(texts)
        n = len(texts)
        result = M3Output(dense=np.zeros((n, self.dim), dtype=np.float32))
        if not texts:
            return result
        result.sparse = [{} for _ in range(n)] if sparse else []
        result.colbert = [np.zeros((0, self.colbert_dim), np.float32) for _ in range(n)] if colbert else []
        order = np.argsort([-len(t) for t in texts], kind="stable")  # similar lengths batch with less padding
        for start in range(0, n, self.batch_size):
            rows = order[start : start + self.batch_size]
            dense, weights, vectors = self._forward([texts[i] for i in rows], sparse, colbert)
            for j, i in enumerate(rows):
                result.dense[i] = dense[j]
                if sparse:
                    result.sparse[i] = weights[j]
                if colbert:
                    result.colbert[i] = vectors[j]
        self.texts_embedded += n
        result.dense = normalize(result.dense)
        return result

    def _forward(
        self, texts: list[str], sparse: bool, colbert: bool
    ) -> tuple[np.ndarray, list[dict[int, float]], list[np.ndarray]]:
        import torch

        tokenizer, net = self.model.tokenizer, self.model.model
        batch = tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_token_type_ids=False,
            return_tensors="pt",
        ).to(self.device)
        with torch.no_grad():
            out = net(batch, return_dense=True, return_sparse=sparse, return_colbert_vecs=colbert)
        dense = out["dense_vecs"].float().cpu().numpy()
        ids = batch["input_ids"].cpu().numpy()
        mask = batch["attention_mask"].cpu().numpy()
        weights: list[dict[int, float]] = []
        if sparse:
            token_weights = out["sparse_vecs"].squeeze(-1).float().cpu().numpy()
            for row_ids, row_weights, row_mask in zip(ids, token_weights, mask):
                row: dict[int, float] = {}
                for token, weight, real in zip(row_ids.tolist(), row_weights.tolist(), row_mask.tolist()):
                    # Like FlagEmbedding: special tokens dropped, a token's weight is its maximum.
                    if real and weight > 0 and token not in self._special_ids and weight > row.get(token, 0.0):
                        row[token] = weight
                weights.append(row)
        vectors: list[np.ndarray] = []
        if colbert:
            token_vectors = out["colbert_vecs"].float().cpu().numpy()
            # The head skips the CLS, so a text of t tokens has t - 1 vectors (its EOS included).
            vectors = [v[: int(m.sum()) - 1] for v, m in zip(token_vectors, mask)]
        return dense, weights, vectors


# ----------------------------------------------------------------------------- scoring
def sparse_scores(query: dict[int, float], docs: Sequence[dict[int, float]]) -> np.ndarray:
    """Lexical matching score: sum over shared tokens of query weight x document weight."""
    return np.array([sum(w * doc[t] for t, w in query.items() if t in doc) for doc in docs], dtype=np.float32)


def colbert_scores(query: np.ndarray, docs: Sequence[np.ndarray]) -> np.ndarray:
    """Late interaction: for each query token its best document token, averaged over query tokens."""
    out = np.zeros(len(docs), dtype=np.float32)
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    keep = np.flatnonzero(lengths)
    if len(query) == 0 or len(keep) == 0:
        return out
    # One matrix product over all candidates' tokens (many small ones are far slower), then the
    # best token per query token within each document's slice of columns.
    tokens = np.concatenate([np.asarray(docs[int(i)], dtype=np.float32) for i in keep])
    sims = np.asarray(query, dtype=np.float32) @ tokens.T
    starts = np.concatenate([[0], np.cumsum(lengths[keep])[:-1]])
    out[keep] = np.maximum.reduceat(sims, starts, axis=1).mean(axis=0)
    return out
