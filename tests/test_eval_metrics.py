"""Retrieval metrics, LoCoMo token F1 and the cached LLM judge."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.datasets.base import History
from memlab.eval.answers import (
    bleu1,
    bleu_tokens,
    is_abstention,
    multi_answer_f1,
    normalize_answer,
    score_open_answer,
    token_f1,
)
from memlab.eval.judge import LLMJudge, judge_prompt, parse_verdict
from memlab.eval.retrieval import (
    evidence_to_indexes,
    item_message_indexes,
    retrieval_metrics,
    retrieval_ranking,
    score_retrieval,
)
from memlab.llm.base import LLM, ChatMessage, LLMResponse
from memlab.types import MemoryItem, Message, Question, Retrieval
from memlab_plugins.full_context import FullContextMemory
from memlab_plugins.rag import RagMemory


def _history() -> History:
    texts = [
        "Ann: I adopted a cat named Miso.", "Bob: Nice! I grow tomatoes.", "Ann: Miso sleeps all day.",
        "Bob: I am going to Oslo next week.", "Ann: Bring me a sweater.", "Bob: Back from Oslo, it was cold.",
    ]
    messages = [Message(role="user" if t.startswith("Ann") else "assistant", content=t) for t in texts]
    return History(
        id="conv-x",
        messages=messages,
        session_starts=[0, 3],
        metadata={"dia_ids": ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]},
    )


def _question(evidence: list[str], *, category: int = 4, answer: str = "Miso", type_: str = "single-hop") -> Question:
    return Question(id="conv-x:q0", type=type_, text="What is the cat called?", answer_text=answer,
                    context_id="conv-x", end_index=6, evidence=evidence, metadata={"category": category})


# --------------------------------------------------------------------------- retrieval_metrics
def test_metrics_known_values() -> None:
    m = retrieval_metrics([7, 3, 9, 1, 4, 5], [3, 4, 8], ks=(1, 2, 5))
    assert m == {
        "recall@1": 0.0, "hit@1": 0.0,
        "recall@2": pytest.approx(1 / 3), "hit@2": 1.0,
        "recall@5": pytest.approx(2 / 3), "hit@5": 1.0,
        "mrr": 0.5,
    }


def test_metrics_cannot_say_and_edge_cases() -> None:
    assert retrieval_metrics(None, [1, 2]) == {}  # backend cannot say where items came from
    assert retrieval_metrics([1, 2], []) == {}  # nothing to find
    assert retrieval_metrics([], [1]) == {"recall@1": 0.0, "hit@1": 0.0, "recall@5": 0.0, "hit@5": 0.0,
                                          "recall@10": 0.0, "hit@10": 0.0, "mrr": 0.0}
    # duplicates in evidence or ranking do not inflate recall
    assert retrieval_metrics([2, 2, 2], [2, 2, 5], ks=(3,))["recall@3"] == 0.5
    assert retrieval_metrics(list(np.array([5, 2])), [2], ks=(1,))["mrr"] == 0.5  # numpy ints are indexes
    with pytest.raises(ValueError, match="k must be >= 1"):
        retrieval_metrics([1], [1], ks=(0,))


def test_metrics_count_items_not_messages() -> None:
    # one item citing three turns sits at rank 1; the evidence inside it is found at k=1
    m = retrieval_metrics([[10, 11, 12], [3], 4], [12, 4], ks=(1, 2, 3))
    assert m["recall@1"] == 0.5 and m["recall@2"] == 0.5 and m["recall@3"] == 1.0
    assert m["mrr"] == 1.0


# --------------------------------------------------------------------------- evidence and sources
def test_evidence_to_indexes() -> None:
    history = _history()
    assert evidence_to_indexes(history, _question(["D2:3", "D1:1", "D1:01"])) == [0, 5]
    assert evidence_to_indexes(history, _question(["m4", "m0"])) == [0, 4]
    with pytest.raises(ValueError, match="conv-x:q0.*'D7:1'"):
        evidence_to_indexes(history, _question(["D7:1"]))
    with pytest.raises(ValueError, match="'m6'"):
        evidence_to_indexes(history, _question(["m6"]))


def test_item_sources_map_to_messages() -> None:
    history = _history()
    turn = MemoryItem(id="a", text="x", source={"session_id": "conv-x:s1", "turn_index": 2})
    fact = MemoryItem(id="b", text="x", source={"turns": [{"session_id": "conv-x:s0", "turn_index": 0},
                                                          {"session_id": "conv-x:s1", "turn_index": 0}]})
    assert item_message_indexes(history, turn) == [5]
    assert item_message_indexes(history, fact) == [0, 3]
    for source in ({}, {"session_id": "other:s0", "turn_index": 0}, {"session_id": "conv-x:s0", "turn_index": 3},
                   {"session_id": "conv-x:s9", "turn_index": 0}, {"turns": [{"session_id": "conv-x:s0"}]}):
        assert item_message_indexes(history, MemoryItem(id="c", text="x", source=source)) is None


def test_ranking_orders_by_score_and_merges_unranked() -> None:
    history = _history()

    def item(turn: int, score: float | None) -> MemoryItem:
        session, index = (0, turn) if turn < 3 else (1, turn - 3)
        return MemoryItem(id=str(turn), text="x", score=score,
                          source={"session_id": f"conv-x:s{session}", "turn_index": index})

    ranked = Retrieval(items=[item(0, 0.2), item(2, 0.9), item(5, 0.5)])  # conversation order, as RAG returns
    assert retrieval_ranking(history, ranked) == [[2], [5], [0]]
    unranked = Retrieval(items=[item(0, None), item(2, None), item(5, None)])
    assert retrieval_ranking(history, unranked) == [[0, 2, 5]]
    assert retrieval_ranking(history, Retrieval()) == []
    untraceable = Retrieval(items=[item(0, 0.3), MemoryItem(id="m", text="a fact", score=0.9)])
    assert retrieval_ranking(history, untraceable) is None
    assert score_retrieval(history, _question(["D1:1"]), untraceable) == {}
    assert score_retrieval(history, _question([]), ranked) == {}
    m = score_retrieval(history, _question(["D1:1"]), ranked)
    assert m["mrr"] == pytest.approx(1 / 3) and m["hit@1"] == 0.0 and m["recall@5"] == 1.0


def _replay(memory, history: History) -> None:
    for session, _ in history.slices(0, len(history.messages)):
        memory.ingest(session, user_id="u1")


def test_full_context_is_trivially_complete() -> None:
    history = _history()
    memory = FullContextMemory()
    _replay(memory, history)
    retrieval = memory.retrieve("anything", user_id="u1")
    m = score_retrieval(history, _question(["D1:1", "D2:3"]), retrieval)
    assert m["recall@1"] == 1.0 and m["mrr"] == 1.0


def test_rag_ranking_finds_the_matching_turn() -> None:
    history = _history()
    memory = RagMemory({"embedder": "hashing", "top_k": 3})
    _replay(memory, history)
    retrieval = memory.retrieve("Back from Oslo, it was cold", user_id="u1")
    ranking = retrieval_ranking(history, retrieval)
    assert ranking is not None and ranking[0] == [5]
    m = score_retrieval(history, _question(["D2:3"]), retrieval)
    assert m["mrr"] == 1.0 and m["recall@1"] == 1.0


# --------------------------------------------------------------------------- LoCoMo token F1
def test_normalisation_follows_locomo() -> None:
    assert normalize_answer("The cat, AND the dog!") == "cat dog"
    assert normalize_answer("7 May, 2023") == "7 may 2023"


def test_token_f1_values() -> None:
    assert token_f1("The cat, and the dog", "a dog") == pytest.approx(2 / 3)
    assert token_f1("She painted sunsets", "paint sunset") == pytest.approx(0.8)  # Porter stems
    assert token_f1("7 May, 2023", "7 May 2023") == 1.0
    assert token_f1("", "Miso") == 0.0 and token_f1("Oslo", "Miso") == 0.0
    assert multi_answer_f1("Paris, Rome", "Rome, Berlin") == 0.5


def test_score_open_answer_by_category() -> None:
    assert score_open_answer(_question([]), "Her cat is called Miso.") == {
        "f1": pytest.approx(1 / 3),  # 5 tokens, 1 shared
        "bleu1": pytest.approx(1 / 6),  # 6 NLTK tokens (the period is one), 1 shared, no brevity penalty
        "abstained": 0.0}
    open_domain = _question([], category=3, answer="Psychology; counseling", type_="open-domain")
    assert score_open_answer(open_domain, "psychology")["f1"] == 1.0
    multi = _question([], category=1, answer="Paris, Rome", type_="multi-hop")
    assert score_open_answer(multi, "Rome")["f1"] == 0.5
    assert score_open_answer(_question([]), None) == {"f1": 0.0, "bleu1": 0.0, "abstained": 0.0}
    # LoCoMo's multi-hop rule: each gold part takes its best predicted part; an empty reply is 0
    assert score_open_answer(multi, "Berlin, Rome, Paris")["f1"] == 1.0
    assert score_open_answer(multi, "")["f1"] == 0.0
    # open-domain: only the gold part before the first ';' counts for F1 (BLEU-1 keeps it all, as mem0)
    assert score_open_answer(open_domain, "counseling")["f1"] == 0.0
    assert score_open_answer(open_domain, "counseling")["bleu1"] > 0


def test_bleu1_as_mem0_reports_it() -> None:
    # brevity penalty exp(1 - 3/2) on a fully matching two-token answer
    assert bleu1("may 2023", "7 May 2023") == pytest.approx(np.exp(1 - 3 / 2))
    assert bleu1("7 May 2023", "7 may 2023") == 1.0  # lower-cased
    assert bleu1("Oslo", "Miso") == 0.0 and bleu1("", "Miso") == 0.0
    # unigram precision with clipped counts: 'cat' appears once in the reference
    assert bleu1("cat cat dog", "cat dog") == pytest.approx(2 / 3)
    assert bleu1("cat cat dog", "the cat and a dog") == pytest.approx(2 / 3 * np.exp(1 - 5 / 3))
    # NLTK tokens: sentences split, contractions and final periods separated
    assert bleu_tokens("She moved to Paris. He didn't.") == ["she", "moved", "to", "paris", ".", "he", "did", "n't", "."]
    assert score_open_answer(_question([]), "That is not mentioned.")["abstained"] == 1.0


def test_adversarial_is_scored_by_abstention() -> None:
    trap = _question([], category=5, answer="tomatoes", type_="adversarial")
    declined = score_open_answer(trap, "Not mentioned in the conversation")
    assert declined == {"f1": 1.0, "abstained": 1.0, "trap_f1": 0.0}
    fooled = score_open_answer(trap, "She grew tomatoes")
    assert fooled["f1"] == 0.0 and fooled["abstained"] == 0.0 and fooled["trap_f1"] > 0
    # LoCoMo's test is literal; the wider 'abstained' also catches other refusals
    other = score_open_answer(trap, "The conversation does not mention what Ann grew.")
    assert other["f1"] == 0.0 and other["abstained"] == 1.0
    assert is_abstention("I don't know") and not is_abstention("She knows Miso")


# --------------------------------------------------------------------------- LLM judge
class FakeLLM(LLM):
    name = "fake-judge"

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.prompts: list[str] = []

    def _chat(self, messages: list[ChatMessage], *, json_mode: bool, temperature: float,
              max_tokens: int | None) -> LLMResponse:
        self.prompts.append(messages[-1].content)
        reply = self.replies[len(self.prompts) - 1]
        if reply == "RAISE":
            raise RuntimeError("provider down")
        return LLMResponse(text=reply, prompt_tokens=100, completion_tokens=10)


def test_parse_verdict() -> None:
    assert parse_verdict('{"reason": "same", "label": "CORRECT"}') == (True, "same")
    assert parse_verdict('Sure: {"label": "wrong", "reason": "no"} done') == (False, "no")
    assert parse_verdict("The answer is WRONG.")[0] is False
    assert parse_verdict("CORRECT or WRONG, hard to say")[0] is None
    assert parse_verdict("no idea")[0] is None


def test_judge_caches_and_resumes(tmp_path) -> None:
    question = _question([])
    llm = FakeLLM(['{"reason": "same cat", "label": "CORRECT"}', '{"label": "WRONG", "reason": "x"}'])
    with LLMJudge(llm, cache=tmp_path) as judge:
        first = judge.judge(question, "Miso")
        again = judge.judge(question, "Miso")
        assert first["correct"] is True and first["cached"] is False and first["prompt_tokens"] == 100
        assert again["correct"] is True and again["cached"] is True and again["prompt_tokens"] == 0
        assert judge.metrics(question, "Luna") == {"judge": 0.0}
    assert len(llm.prompts) == 2
    # a new judge (new process, same cache directory) pays for nothing already judged
    fresh = FakeLLM([])
    with LLMJudge(fresh, cache=tmp_path / "judge_cache.sqlite") as judge:
        assert judge.judge(question, "Miso")["cached"] is True
        assert judge.metrics(question, "Luna") == {"judge": 0.0}
    assert fresh.prompts == []


def test_judge_failures() -> None:
    question = _question([])
    llm = FakeLLM(["RAISE", "hmm, CORRECT... or WRONG", '{"label": "CORRECT"}'])
    judge = LLMJudge(llm)
    with pytest.raises(RuntimeError, match="provider down"):
        judge.judge(question, "Miso")
    verdict = judge.judge(question, "Miso")  # the failed call was not cached: asked again
    assert verdict["parse_failure"] is True and verdict["correct"] is None
    assert judge.metrics(question, "Miso") == {"judge_parse_failure": 1.0}  # cached verdict, same parse
    assert len(llm.prompts) == 2


def test_judge_prompts_differ_for_adversarial() -> None:
    answerable = judge_prompt(_question([]), "Miso")
    trap = judge_prompt(_question([], category=5, answer="tomatoes", type_="adversarial"), "tomatoes")
    assert "Gold answer: Miso" in answerable
    assert "does NOT contain the answer" in trap and "tomatoes" in trap
    assert judge_prompt(_question([]), "  ").endswith('"WRONG"}.') and "(no answer)" in judge_prompt(_question([]), "")
