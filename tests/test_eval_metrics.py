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
from memlab.eval.judge import (
    ACCURACY_PROMPT,
    LLMJudge,
    create_judge,
    judge_prompt,
    judge_run_scores,
    judge_summary,
    parse_longmemeval_label,
    parse_mem0_label,
    parse_verdict,
)
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
        "Ann: I adopted a cat named Miso.",
        "Bob: Nice! I grow tomatoes.",
        "Ann: Miso sleeps all day.",
        "Bob: I am going to Oslo next week.",
        "Ann: Bring me a sweater.",
        "Bob: Back from Oslo, it was cold.",
    ]
    messages = [Message(role="user" if t.startswith("Ann") else "assistant", content=t) for t in texts]
    return History(
        id="conv-x",
        messages=messages,
        session_starts=[0, 3],
        metadata={"dia_ids": ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]},
    )


def _question(evidence: list[str], *, category: int = 4, answer: str = "Miso", type_: str = "single-hop") -> Question:
    return Question(
        id="conv-x:q0",
        type=type_,
        text="What is the cat called?",
        answer_text=answer,
        context_id="conv-x",
        end_index=6,
        evidence=evidence,
        metadata={"category": category},
    )


# --------------------------------------------------------------------------- retrieval_metrics
def test_metrics_known_values() -> None:
    m = retrieval_metrics([7, 3, 9, 1, 4, 5], [3, 4, 8], ks=(1, 2, 5))
    assert m == {
        "recall@1": 0.0,
        "hit@1": 0.0,
        "recall@2": pytest.approx(1 / 3),
        "hit@2": 1.0,
        "recall@5": pytest.approx(2 / 3),
        "hit@5": 1.0,
        "mrr": 0.5,
    }


def test_metrics_cannot_say_and_edge_cases() -> None:
    assert retrieval_metrics(None, [1, 2]) == {}  # backend cannot say where items came from
    assert retrieval_metrics([1, 2], []) == {}  # nothing to find
    assert retrieval_metrics([], [1]) == {
        "recall@1": 0.0,
        "hit@1": 0.0,
        "recall@5": 0.0,
        "hit@5": 0.0,
        "recall@10": 0.0,
        "hit@10": 0.0,
        "mrr": 0.0,
    }
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
    fact = MemoryItem(
        id="b",
        text="x",
        source={"turns": [{"session_id": "conv-x:s0", "turn_index": 0}, {"session_id": "conv-x:s1", "turn_index": 0}]},
    )
    assert item_message_indexes(history, turn) == [5]
    assert item_message_indexes(history, fact) == [0, 3]
    for source in (
        {},
        {"session_id": "other:s0", "turn_index": 0},
        {"session_id": "conv-x:s0", "turn_index": 3},
        {"session_id": "conv-x:s9", "turn_index": 0},
        {"turns": [{"session_id": "conv-x:s0"}]},
    ):
        assert item_message_indexes(history, MemoryItem(id="c", text="x", source=source)) is None


def test_ranking_orders_by_score_and_merges_unranked() -> None:
    history = _history()

    def item(turn: int, score: float | None) -> MemoryItem:
        session, index = (0, turn) if turn < 3 else (1, turn - 3)
        return MemoryItem(
            id=str(turn), text="x", score=score, source={"session_id": f"conv-x:s{session}", "turn_index": index}
        )

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
        "abstained": 0.0,
    }
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
    assert bleu_tokens("She moved to Paris. He didn't.") == [
        "she",
        "moved",
        "to",
        "paris",
        ".",
        "he",
        "did",
        "n't",
        ".",
    ]
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

    def __init__(self, replies: list[str], *, json_mode: bool = False) -> None:
        self.replies = replies
        self.prompts: list[str] = []
        self.calls: list[dict] = []
        self.supports_json_mode = json_mode

    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float, max_tokens: int | None
    ) -> LLMResponse:
        self.prompts.append(messages[-1].content)
        self.calls.append(
            {
                "messages": [m.model_dump() for m in messages],
                "json_mode": json_mode,
                "temperature": temperature,
                "max_tokens": max_tokens,
            }
        )
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
    judge = LLMJudge(llm, prompt="memlab")
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


# --------------------------------------------------------------------------- mem0's judge, runs
# mem0ai/mem0 evaluation/metrics/llm_judge.py ACCURACY_PROMPT, typed out again here on purpose: the
# test fails if the pinned prompt in memlab.eval.judge is edited in any way.
PINNED_ACCURACY_PROMPT = (
    "\nYour task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be given the following data:\n"
    "    (1) a question (posed by one user to another user), \n"
    "    (2) a ’gold’ (ground truth) answer, \n"
    "    (3) a generated answer\n"
    "which you will score as CORRECT/WRONG.\n\n"
    "The point of the question is to ask about something one user should know about the other user based on their prior conversations.\n"
    "The gold answer will usually be a concise and short answer that includes the referenced topic, for example:\n"
    "Question: Do you remember what I got the last time I went to Hawaii?\n"
    "Gold answer: A shell necklace\n"
    "The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT. \n\n"
    'For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it\'s the same date.\n\n'
    "Now it's time for the real question:\n"
    "Question: {question}\n"
    "Gold answer: {gold_answer}\n"
    "Generated answer: {generated_answer}\n\n"
    "First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG. \n"
    "Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.\n\n"
    'Just return the label CORRECT or WRONG in a json format with the key as "label".\n'
)


def test_mem0_judge_sends_the_pinned_prompt() -> None:
    assert ACCURACY_PROMPT == PINNED_ACCURACY_PROMPT
    llm = FakeLLM(['{"label": "CORRECT"}'], json_mode=True)
    judge = LLMJudge(llm)  # mem0's prompt is the default
    assert judge.prompt_name == "mem0-accuracy-v1"
    verdict = judge.judge(_question([]), "Her cat is Miso")
    assert verdict["correct"] is True and verdict["prompt_name"] == "mem0-accuracy-v1"
    (call,) = llm.calls
    assert call["messages"] == [
        {
            "role": "user",
            "content": PINNED_ACCURACY_PROMPT.format(
                question="What is the cat called?", gold_answer="Miso", generated_answer="Her cat is Miso"
            ),
        }
    ]
    assert call["json_mode"] is True and call["temperature"] == 0.0
    # without a native JSON mode the published prompt still goes alone (no added system message)
    plain = FakeLLM(['{"label": "WRONG"}'])
    LLMJudge(plain).judge(_question([]), "Luna")
    assert plain.calls[0]["json_mode"] is False and len(plain.calls[0]["messages"]) == 1


def test_mem0_judge_leaves_category_5_out() -> None:
    trap = _question([], category=5, answer="tomatoes", type_="adversarial")
    judge = LLMJudge(FakeLLM([]))
    assert judge.applies_to(_question([])) and not judge.applies_to(trap)
    assert judge.metrics(trap, "Not mentioned") == {} and judge.run_metrics(trap, "x", runs=3) == {}
    with pytest.raises(ValueError, match="does not score"):
        judge.judge(trap, "x")
    assert LLMJudge(FakeLLM([]), prompt="memlab").applies_to(trap)  # memlab's judge does judge it


def test_mem0_label_parsing() -> None:
    assert parse_mem0_label('{"label": "CORRECT"}')[0] is True
    assert parse_mem0_label('```json\n{"label": "WRONG"}\n```')[0] is False
    assert parse_mem0_label('The answer matches. {"label": "CORRECT"}')[0] is True
    assert parse_mem0_label('{"label": "correct"}')[0] is False  # mem0: label == "CORRECT", exactly
    assert parse_mem0_label("CORRECT")[0] is None and parse_mem0_label('{"verdict": "CORRECT"}')[0] is None


def test_judge_runs_are_independent_samples_with_mean_and_std(tmp_path) -> None:
    first, second = _question([]), _question([], answer="Oslo").model_copy(update={"id": "conv-x:q1"})
    correct, wrong = '{"label": "CORRECT"}', '{"label": "WRONG"}'
    llm = FakeLLM([correct, wrong, correct, correct, correct, correct])
    with LLMJudge(llm, cache=tmp_path) as judge:
        rows = [judge.run_metrics(first, "Miso", runs=3), judge.run_metrics(second, "Oslo", runs=3)]
    assert len(llm.calls) == 6  # one request per run: the run index is part of the cache key
    assert rows[0] == {"judge_run_1": 1.0, "judge_run_2": 0.0, "judge_run_3": 1.0, "judge": pytest.approx(2 / 3)}
    assert rows[1]["judge"] == 1.0
    scores = judge_run_scores(rows, runs=3)
    assert scores == [1.0, 0.5, 1.0]
    mean, std = judge_summary(scores)
    assert mean == pytest.approx(np.mean(scores)) and std == pytest.approx(np.std(scores))  # MemOS: np.std
    assert judge_summary([0.7]) == (0.7, 0.0)
    # resumable: the same runs again cost nothing
    again = FakeLLM([])
    with LLMJudge(again, cache=tmp_path) as judge:
        assert judge.run_metrics(first, "Miso", runs=3) == rows[0]
        assert judge.judge(first, "Miso", run=1)["cached"] is True
    assert again.calls == []
    # one run: the plain 'judge' key
    assert judge_run_scores([{"judge": 1.0}, {"judge": 0.0}, {}], runs=1) == [0.5]
    with pytest.raises(ValueError):
        judge_summary([])


def test_judge_bypasses_the_managed_response_cache(tmp_path) -> None:
    from memlab.llm.config import make_llm

    inner = FakeLLM(['{"label": "CORRECT"}', '{"label": "WRONG"}'])
    managed = make_llm({"cache": True, "cache_dir": str(tmp_path / "responses")}, llm=inner)
    judge = LLMJudge(managed)
    assert [judge.judge(_question([]), "Miso", run=r)["correct"] for r in (0, 1)] == [True, False]
    assert len(inner.calls) == 2  # run 1 was asked, not replayed from run 0's cached response
    managed.close()


def test_longmemeval_judge_prompts_by_type() -> None:
    from memlab.eval import judge as judge_module

    def q(qid: str, qtype: str, **meta) -> Question:
        return Question(
            id=qid,
            type=qtype,
            text="How many days?",
            answer_text="18",
            context_id=qid,
            end_index=0,
            metadata={"question_type": qtype, **meta},
        )

    llm = FakeLLM(["Yes."] * 7)
    judge = LLMJudge(llm, prompt="longmemeval")
    assert judge.prompt_name == "longmemeval-anscheck-v1" and judge.max_tokens == 10
    cases = {
        "single-session-user": judge_module.LONGMEMEVAL_STANDARD,
        "single-session-assistant": judge_module.LONGMEMEVAL_STANDARD,
        "multi-session": judge_module.LONGMEMEVAL_STANDARD,
        "temporal-reasoning": judge_module.LONGMEMEVAL_TEMPORAL,
        "knowledge-update": judge_module.LONGMEMEVAL_KNOWLEDGE_UPDATE,
        "single-session-preference": judge_module.LONGMEMEVAL_PREFERENCE,
    }
    for qtype, template in cases.items():
        assert judge.judge(q(f"{qtype}-1", qtype), "19 days")["correct"] is True
        assert llm.calls[-1]["messages"] == [
            {"role": "user", "content": template.format("How many days?", "18", "19 days")}
        ]
        assert llm.calls[-1]["max_tokens"] == 10 and llm.calls[-1]["temperature"] == 0.0
    assert "off-by-one" in judge_module.LONGMEMEVAL_TEMPORAL and "Rubric" in judge_module.LONGMEMEVAL_PREFERENCE
    judge.judge(q("abc_abs", "multi-session", abstention=True), "I don't know")
    assert llm.calls[-1]["messages"][0]["content"].startswith("I will give you an unanswerable question")
    assert not judge.applies_to(_question([]))  # a LoCoMo type has no LongMemEval prompt
    assert parse_longmemeval_label(" no")[0] is False and parse_longmemeval_label("YES")[0] is True


def test_judge_request_over_http_is_the_pinned_prompt(tmp_path) -> None:
    from memlab.testing.recording_server import RecordingServer

    with RecordingServer(lambda request: '{"label": "CORRECT"}') as server:
        judge = create_judge("mem0", server.llm_settings(), cache_dir=tmp_path)
        assert judge.metrics(_question([]), "Miso, the cat") == {"judge": 1.0}
        assert judge.describe()["prompt"] == "mem0-accuracy-v1" and "gpt-4o-mini" in judge.describe()["model"]
        judge.close()
    (request,) = server.requests
    assert request["messages"] == [
        {
            "role": "user",
            "content": PINNED_ACCURACY_PROMPT.format(
                question="What is the cat called?", gold_answer="Miso", generated_answer="Miso, the cat"
            ),
        }
    ]
    assert request["response_format"] == {"type": "json_object"} and request["temperature"] == 0.0
