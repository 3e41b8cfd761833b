"""Scoring beyond multiple choice: retrieval against annotated evidence (no LLM needed), LoCoMo's
token F1 for free-form answers, and a cached LLM judge."""

from memlab.eval.answers import normalize_answer, score_open_answer, token_f1
from memlab.eval.judge import LLMJudge
from memlab.eval.retrieval import (
    evidence_to_indexes,
    item_message_indexes,
    retrieval_metrics,
    retrieval_ranking,
    score_retrieval,
)

__all__ = [
    "LLMJudge",
    "evidence_to_indexes",
    "item_message_indexes",
    "normalize_answer",
    "retrieval_metrics",
    "retrieval_ranking",
    "score_open_answer",
    "score_retrieval",
    "token_f1",
]
