"""The logprob reader: config rules without a model, and real scoring with SmolLM2 (slow)."""

from __future__ import annotations

import pytest
from question_helpers import choice_question, open_question

from memlab.errors import MemlabError
from memlab.readers.logprob import LogprobReader
from memlab.types import Retrieval

QUESTION = choice_question(
    "Can you suggest a dinner for me tonight?",
    [
        "(a) How about a juicy beef steak with fries?",
        "(b) Since you are vegetarian, how about a chickpea and spinach curry?",
        "(c) Grilled pork chops would be great.",
        "(d) Try a bacon cheeseburger.",
    ],
    answer=1,
)
MEMORY = Retrieval(context="User: I became a strict vegetarian last month, I never eat meat now.")


def test_config_rules_and_lazy_describe():
    reader = LogprobReader({"llm": {"model": "/nowhere/model.gguf"}})
    assert reader.describe() == "logprob:hf:model.gguf:sum:raw" and reader._model is None  # the paper's variant
    assert reader.config.max_context_tokens is None  # nothing cut unless asked
    old = LogprobReader(
        {"llm": {"model": "/nowhere/model.gguf"}, "normalize": "mean", "template": "chat", "max_context_tokens": 2048}
    )
    assert old.describe() == "logprob:hf:model.gguf:mean:chat"
    assert LogprobReader({"llm": {"model": "HuggingFaceTB/SmolLM2-135M-Instruct"}}).config.llm.provider == "hf"
    with pytest.raises(MemlabError, match="local model"):
        LogprobReader({"llm": {"model": "gpt-4o-mini", "base_url": "http://127.0.0.1:1/v1"}})
    with pytest.raises(MemlabError, match="llm.model"):
        LogprobReader().answer(QUESTION, MEMORY)


@pytest.mark.slow
def test_logprob_reader_scores_options_and_caches(tmp_path, smollm2_gguf):
    # memlab's earlier variant, kept as named options: mean log-prob, chat template, 2048-token memory.
    config = {
        "llm": {"model": str(smollm2_gguf), "device": "cpu", "cache_dir": str(tmp_path)},
        "normalize": "mean",
        "template": "chat",
        "max_context_tokens": 2048,
    }
    reader = LogprobReader(config)
    answer = reader.answer(QUESTION, MEMORY)
    meta = answer.metadata
    assert answer.error is None and answer.choice is not None and len(answer.scores) == 4
    assert meta["mean_logprob"] == pytest.approx([s / n for s, n in zip(meta["sum_logprob"], meta["option_tokens"])])
    assert answer.scores == meta["mean_logprob"]
    assert all(s < 0 for s in meta["sum_logprob"])
    assert answer.prompt_tokens > sum(meta["option_tokens"]) and meta["parse_failure"] is False
    # Memory matters: the vegetarian option gains log-prob when the memory says so.
    blind = reader.answer(QUESTION, Retrieval())
    assert meta["mean_logprob"][1] - blind.metadata["mean_logprob"][1] > 0
    # A rerun reads the scores from the cache without touching the model.
    rerun = LogprobReader(config)
    rerun._model = type(
        "NoModel",
        (),
        {"name": reader.model.name, "cache_identity": reader.model.cache_identity, "score_continuations": None},
    )()
    rerun._cache = reader._cache
    assert rerun.answer(QUESTION, MEMORY).scores == answer.scores


@pytest.mark.slow
def test_logprob_reader_answers_open_questions_by_generation(tmp_path, smollm2_gguf):
    reader = LogprobReader(
        {"llm": {"model": str(smollm2_gguf), "device": "cpu", "cache_dir": str(tmp_path)}, "open_max_tokens": 12}
    )
    open_q = open_question("What city does the user live in?", "Paris")
    answer = reader.answer(open_q, Retrieval(context="User: I live in Paris, near the Louvre."))
    assert answer.error is None and answer.text and answer.completion_tokens <= 12


def test_raw_text_is_memory_then_message():
    reader = LogprobReader({"llm": {"model": "/nowhere/model.gguf"}})
    assert reader.raw_text(QUESTION, MEMORY) == f"{MEMORY.context}\n\n{QUESTION.text}\n"
    assert reader.raw_text(QUESTION, Retrieval()) == f"{QUESTION.text}\n"
    cut = LogprobReader({"llm": {"model": "/nowhere/model.gguf"}, "max_context_tokens": 3})
    assert "vegetarian" not in cut.raw_text(QUESTION, MEMORY) and "meat now." in cut.raw_text(QUESTION, MEMORY)


@pytest.mark.slow
def test_paper_variant_sums_option_logprobs_after_the_raw_text(tmp_path, smollm2_gguf):
    import torch

    reader = LogprobReader({"llm": {"model": str(smollm2_gguf), "device": "cpu", "cache_dir": str(tmp_path)}})
    answer = reader.answer(QUESTION, MEMORY)
    model = reader.model
    raw = reader.raw_text(QUESTION, MEMORY)
    prefix = model.tokenizer(raw)["input_ids"]
    # No chat template: the raw text alone (plus the tokenizer's own BOS, if it adds one).
    assert model.tokenizer.decode(prefix, skip_special_tokens=True).strip() == raw.strip()
    assert "assistant" not in model.tokenizer.decode(prefix) and "system" not in model.tokenizer.decode(prefix)
    assert answer.metadata["template"] == "raw" and answer.metadata["normalize"] == "sum"
    for i, option in enumerate(QUESTION.options):
        ids = model.tokenizer(option[4:], add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            logits = model.model_obj(input_ids=torch.tensor([prefix + ids])).logits[0].float()
        logprobs = torch.log_softmax(logits[len(prefix) - 1 : -1], dim=-1)
        expected = logprobs.gather(1, torch.tensor(ids)[:, None]).sum().item()
        assert answer.metadata["sum_logprob"][i] == pytest.approx(expected, abs=1e-3)
    assert answer.scores == answer.metadata["sum_logprob"]
    assert answer.choice == max(range(4), key=lambda i: answer.scores[i])
    mean = LogprobReader(
        {"llm": {"model": str(smollm2_gguf), "device": "cpu", "cache_dir": str(tmp_path)}, "normalize": "mean"}
    )
    by_mean = mean.answer(QUESTION, MEMORY)
    assert by_mean.scores == by_mean.metadata["mean_logprob"]
    assert by_mean.metadata["sum_logprob"] == answer.metadata["sum_logprob"]  # same scores, other rule


@pytest.mark.slow
def test_context_beyond_the_window_is_an_error_not_a_cut(tmp_path, smollm2_gguf):
    config = {"llm": {"model": str(smollm2_gguf), "device": "cpu", "cache": False}}
    reader = LogprobReader(config)
    window = reader.model.window
    long_memory = Retrieval(context="User: I like long walks on the beach. " * (window // 4))
    answer = reader.answer(QUESTION, long_memory)
    assert answer.choice is None and "window" in answer.error and "max_context_tokens" in answer.error
    cut = LogprobReader({**config, "max_context_tokens": 256}).answer(QUESTION, long_memory)
    assert cut.error is None and cut.choice is not None and cut.prompt_tokens < 400
