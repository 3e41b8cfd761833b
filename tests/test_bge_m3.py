"""BGE-M3 through FlagEmbedding's BGEM3FlagModel, on a tiny model with BGE-M3's layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memlab.embedders import get_embedder
from memlab.embedders.bge_m3 import BGEM3Embedder, colbert_scores, resolve_model_dir, sparse_scores
from memlab.errors import ModelUnavailableError
from memlab.testing.tiny_bge_m3 import cached_tiny_bge_m3

TEXTS = ["I adopted a grey cat named Pixel last spring.", "bees on the roof", "A hiking route in the mountains."]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cached_tiny_bge_m3(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def m3(tiny_dir: Path) -> BGEM3Embedder:
    return BGEM3Embedder(str(tiny_dir))


def test_tiny_model_has_bge_m3_layout(tiny_dir: Path) -> None:
    for name in ("config.json", "tokenizer.json", "colbert_linear.pt", "sparse_linear.pt"):
        assert (tiny_dir / name).is_file(), name
    assert resolve_model_dir(str(tiny_dir)) == str(tiny_dir)


def test_loads_through_bgem3flagmodel_in_fp32_on_cpu(m3: BGEM3Embedder) -> None:
    from FlagEmbedding import BGEM3FlagModel

    assert isinstance(m3.model, BGEM3FlagModel)
    m3.embed(["warm up"])  # FlagEmbedding moves the model to its device on first use
    param = next(m3.model.model.parameters())
    assert param.dtype.is_floating_point and str(param.dtype) == "torch.float32"
    assert param.device.type == "cpu"
    assert m3.dim == 64 and m3.colbert_dim == 64
    assert m3.name.startswith("bge-m3:tiny-bge-m3-")


def test_three_outputs_have_the_right_shapes(m3: BGEM3Embedder) -> None:
    out = m3.encode(TEXTS)
    assert out.dense.shape == (3, 64) and out.dense.dtype == np.float32
    assert np.allclose(np.linalg.norm(out.dense, axis=1), 1.0, atol=1e-5)
    specials = {m3.model.tokenizer.convert_tokens_to_ids(t) for t in ("<s>", "</s>", "<pad>", "<unk>")}
    assert len(out.sparse) == len(out.colbert) == 3
    for text, weights, vectors in zip(TEXTS, out.sparse, out.colbert):
        ids = m3.model.tokenizer(text)["input_ids"]
        assert weights and set(weights) <= set(ids) - specials  # one weight per distinct real token
        assert all(isinstance(t, int) and w > 0 for t, w in weights.items())
        # One ColBERT vector per token after the CLS (the EOS included), unit length.
        assert vectors.shape == (len(ids) - 1, 64)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert not m3.encode(TEXTS, sparse=False, colbert=False).sparse


def test_dense_embed_matches_encode_and_is_deterministic(m3: BGEM3Embedder) -> None:
    a = m3.embed(TEXTS)
    b = m3.encode(TEXTS, sparse=False, colbert=False).dense
    assert np.allclose(a, b, atol=1e-6)
    assert not np.allclose(a[0], a[1], atol=1e-2), "distinct texts must get distinct vectors"
    assert m3.embed([]).shape == (0, 64)


def test_scores_match_flagembedding(m3: BGEM3Embedder) -> None:
    docs = m3.encode(TEXTS)
    query = m3.encode(["a grey cat named Pixel"], query=True)
    ours_sparse = sparse_scores(query.sparse[0], docs.sparse)
    ours_colbert = colbert_scores(query.colbert[0], docs.colbert)
    for i in range(3):
        lexical = m3.model.compute_lexical_matching_score(
            {str(t): w for t, w in query.sparse[0].items()}, {str(t): w for t, w in docs.sparse[i].items()}
        )
        assert ours_sparse[i] == pytest.approx(float(lexical), rel=1e-5)
        assert ours_colbert[i] == pytest.approx(
            float(m3.model.colbert_score(query.colbert[0], docs.colbert[i])), rel=1e-5
        )
    assert ours_sparse[0] > 0 and ours_sparse[0] == ours_sparse.max()  # the doc sharing the words


def test_get_embedder_builds_bge_m3(tiny_dir: Path) -> None:
    embedder = get_embedder("bge-m3", str(tiny_dir))
    inner = getattr(embedder, "inner", embedder)  # a run may have switched the embedding cache on
    assert isinstance(inner, BGEM3Embedder)
    assert embedder.embed(["hi"]).shape == (1, 64)


def test_missing_weights_offline_says_how_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(ModelUnavailableError) as info:
        BGEM3Embedder("BAAI/bge-m3")
    message = str(info.value)
    assert "huggingface-cli download BAAI/bge-m3" in message
    assert "rag.model" in message and "HF_HUB_OFFLINE" in message


@pytest.mark.parametrize("model", ["/nonexistent/bge-m3", "./models/bge-m3", "a/b/c"])
def test_wrong_path_is_named(model: str) -> None:
    with pytest.raises(ModelUnavailableError, match="does not exist.*rag.model|rag.model.*does not exist"):
        resolve_model_dir(model)


def test_directory_without_heads_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelUnavailableError, match="colbert_linear.pt, sparse_linear.pt"):
        resolve_model_dir(str(tmp_path))


def test_fp16_on_cpu_is_refused(tiny_dir: Path) -> None:
    with pytest.raises(ValueError, match="fp32"):
        BGEM3Embedder(str(tiny_dir), use_fp16=True)


def test_outputs_equal_bgem3flagmodel_encode(m3: BGEM3Embedder) -> None:
    texts = TEXTS + ["Short.", "A much longer text about a grey cat, bees, Lisbon, pottery and a marathon in spring."]
    ours = m3.encode(texts)
    theirs = m3.model.encode(texts, batch_size=2, return_dense=True, return_sparse=True, return_colbert_vecs=True)
    assert np.allclose(ours.dense, theirs["dense_vecs"], atol=1e-5)
    for mine, ref in zip(ours.sparse, theirs["lexical_weights"]):
        assert set(mine) == {int(t) for t in ref}
        assert all(mine[int(t)] == pytest.approx(float(w), abs=1e-5) for t, w in ref.items())
    for mine, ref in zip(ours.colbert, theirs["colbert_vecs"]):
        assert mine.shape == ref.shape and np.allclose(mine, ref, atol=1e-5)
