"""Scoring beyond multiple choice: retrieval against annotated evidence (no LLM needed), LoCoMo's
token F1 and mem0's BLEU-1 for free-form answers, and cached LLM judges (mem0's, LongMemEval's,
memlab's own) with several runs summarised as mean and standard deviation."""

from memlab.eval.answers import bleu1, normalize_answer, score_open_answer, token_f1
from memlab.eval.judge import (
    PROMPT_NAMES,
    LLMJudge,
    create_judge,
    judge_run_scores,
    judge_summary,
)
from memlab.eval.retrieval import (
    evidence_to_indexes,
    item_message_indexes,
    retrieval_metrics,
    retrieval_ranking,
    score_retrieval,
)

__all__ = [
    "LLMJudge",
    "PROMPT_NAMES",
    "bleu1",
    "create_judge",
    "evidence_to_indexes",
    "item_message_indexes",
    "judge_run_scores",
    "judge_summary",
    "normalize_answer",
    "retrieval_metrics",
    "retrieval_ranking",
    "score_open_answer",
    "score_retrieval",
    "token_f1",
]
