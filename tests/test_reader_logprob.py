"""The logprob reader: config rules without a model, and real scoring with SmolLM2 (slow)."""

from __future__ import annotations

import pytest

from memlab.errors import MemlabError
from memlab.readers.logprob import LogprobReader
from memlab.types import Question, Retrieval


QUESTION = Question(
    id="q",
    type="recall_user_shared_facts",
    text="Can you suggest a dinner for me tonight?",
    options=[
        "(a) How about a juicy beef steak with fries?",
        "(b) Since you are vegetarian, how about a chickpea and spinach curry?",
        "(c) Grilled pork chops would be great.",
        "(d) Try a bacon cheeseburger.",
    ],
    answer=1,
    context_id="c",
    end_index=2,
)
MEMORY = Retrieval(context="User: I became a strict vegetarian last month, I never eat meat now.")


def test_config_rules_and_lazy_describe():
    reader = LogprobReader({"llm": {"model": "/nowhere/model.gguf"}, "normalize": "sum"})
    assert reader.describe() == "logprob:hf:model.gguf:sum" and reader._model is None
    assert LogprobReader({"llm": {"model": "HuggingFaceTB/SmolLM2-135M-Instruct"}}).config.llm.provider == "hf"
    with pytest.raises(MemlabError, match="local model"):
        LogprobReader({"llm": {"model": "gpt-4o-mini", "base_url": "http://127.0.0.1:1/v1"}})
    with pytest.raises(MemlabError, match="llm.model"):
        LogprobReader().answer(QUESTION, MEMORY)


@pytest.mark.slow
def test_logprob_reader_scores_options_and_caches(tmp_path, smollm2_gguf):
    config = {"llm": {"model": str(smollm2_gguf), "device": "cpu", "cache_dir": str(tmp_path)}}
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
    rerun._model = type("NoModel", (), {"name": reader.model.name, "cache_identity": reader.model.cache_identity, "score_continuations": None})()
    rerun._cache = reader._cache
    assert rerun.answer(QUESTION, MEMORY).scores == answer.scores


@pytest.mark.slow
def test_logprob_reader_answers_open_questions_by_generation(tmp_path, smollm2_gguf):
    reader = LogprobReader({"llm": {"model": str(smollm2_gguf), "device": "cpu", "cache_dir": str(tmp_path)}, "open_max_tokens": 12})
    open_q = Question(id="o", type="single_hop", text="What city does the user live in?", answer_text="Paris", context_id="c", end_index=1)
    answer = reader.answer(open_q, Retrieval(context="User: I live in Paris, near the Louvre."))
    assert answer.error is None and answer.text and answer.completion_tokens <= 12
