"""Free-form answers scored the way LoCoMo scores them (task_eval/evaluation.py of its repository).

- Normalisation: lower-case, drop commas and punctuation, drop the words a/an/the/and, collapse
  whitespace; then every token is Porter-stemmed (NLTK's ``PorterStemmer``, as LoCoMo).
- Token F1 between prediction and gold answer for single-hop, temporal and open-domain questions
  (open-domain gold answers keep only the part before the first ``;``).
- Multi-hop: gold and prediction are split at commas into sub-answers; each gold sub-answer takes
  its best F1 against any predicted one, and the mean is the score.
- Adversarial (category 5, the conversation does not hold the answer): 1 when the prediction says
  "no information available" or "not mentioned" (LoCoMo's exact test), else 0. ``answer_text`` of
  these questions is the trap - what the conversation says about the *other* speaker - and
  ``trap_f1`` reports how much of it the prediction repeats.

``abstained`` is a wider test than LoCoMo's (also "does not mention", "unknown", ...), reported for
every question: on answerable questions it measures refusals, on adversarial ones it is the lenient
counterpart of ``f1``.

``bleu1`` is BLEU-1 as mem0's evaluation reports it on LoCoMo (mem0ai/mem0 ``evaluation/metrics/
utils.py``, ``calculate_bleu_scores``; MemOS ``evaluation/scripts/locomo/locomo_eval.py`` does the
same): NLTK's ``sentence_bleu`` with weights (1, 0, 0, 0) and ``SmoothingFunction().method1`` over
lower-cased NLTK word tokens, against the whole gold answer (no ``;`` cut). mem0 skips category 5,
so adversarial questions get no ``bleu1``. One difference: mem0 tokenises with
``nltk.word_tokenize``, whose sentence splitter needs the Punkt model download; memlab splits
sentences with NLTK's Punkt algorithm *without* the trained English parameters (no download, same
result on every machine), which differs only where the English model knows an abbreviation
("dr.", "e.g.") inside a multi-sentence answer.

LongMemEval abstention questions (``metadata["abstention"]``, ids ending ``_abs``) have an
explanation, not an answer: ``f1`` is 1 when the reply declines (the wide ``abstained`` test) and
there is no ``bleu1``.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache
from typing import Any

from memlab.errors import MissingDependencyError
from memlab.types import Question

ADVERSARIAL_TYPE = "adversarial"

# LoCoMo's own test for a category-5 answer.
LOCOMO_ABSTENTION = ("no information available", "not mentioned")
_ABSTENTION = re.compile(
    r"no information|not mentioned|(?:does|did|do)\s*(?:n['’]t|not) (?:mention|say|specify|state|include|contain)"
    r"|not (?:specified|stated|provided|available|discussed|known|clear)"
    r"|(?:cannot|can['’]t|can not) (?:be )?(?:determine|determined|tell|know|answer|say)"
    r"|(?:don['’]t|do not) know|\bunknown\b|no mention|not enough information|no (?:record|evidence)",
    re.IGNORECASE,
)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = set(string.punctuation)


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    try:
        from nltk.stem import PorterStemmer
    except ImportError as exc:
        raise MissingDependencyError("nltk", "LoCoMo's token F1 stems with NLTK: pip install nltk") from exc
    return PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_stemmer().stem(word))


def normalize_answer(text: str) -> str:
    """LoCoMo's normalisation (SQuAD's, plus commas and 'and' removed)."""
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    return [_stem(word) for word in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 of two answers after normalisation and stemming (0 when either is empty)."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """Multi-hop F1: mean over comma-separated gold parts of the best F1 against predicted parts."""
    predictions = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(token_f1(p, g) for p in predictions) for g in golds) / len(golds)


@lru_cache(maxsize=1)
def _bleu_parts() -> tuple[Any, Any, Any, Any]:
    try:
        from nltk.tokenize import word_tokenize
        from nltk.tokenize.punkt import PunktSentenceTokenizer
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    except ImportError as exc:
        raise MissingDependencyError("nltk", "BLEU-1 is computed with NLTK: pip install nltk") from exc
    return PunktSentenceTokenizer(), word_tokenize, sentence_bleu, SmoothingFunction().method1


def bleu_tokens(text: str) -> list[str]:
    """Lower-cased NLTK word tokens (Treebank tokenizer per Punkt sentence, untrained parameters)."""
    sentences, word_tokenize, _, _ = _bleu_parts()
    return [
        token
        for sentence in sentences.tokenize(str(text).lower())
        for token in word_tokenize(sentence, preserve_line=True)
    ]


def bleu1(prediction: str, gold: str) -> float:
    """BLEU-1 of one answer against one gold answer, as mem0 reports it (0 for an empty answer)."""
    _, _, sentence_bleu, smoothing = _bleu_parts()
    hypothesis, reference = bleu_tokens(prediction), bleu_tokens(gold)
    if not hypothesis or not reference:
        return 0.0
    return float(sentence_bleu([reference], hypothesis, weights=(1, 0, 0, 0), smoothing_function=smoothing))


def is_locomo_abstention(text: str) -> bool:
    lowered = str(text).lower()
    return any(phrase in lowered for phrase in LOCOMO_ABSTENTION)


def is_abstention(text: str) -> bool:
    return is_locomo_abstention(text) or bool(_ABSTENTION.search(str(text)))


def _category(question: Question) -> int | None:
    category = question.metadata.get("category")
    if isinstance(category, int):
        return category
    return 5 if question.type == ADVERSARIAL_TYPE else None


def score_open_answer(question: Question, text: str | None) -> dict[str, float]:
    """Scores of one free-form answer: ``f1`` (LoCoMo's per-category rule), ``bleu1`` (mem0's) and
    ``abstained``; adversarial questions add ``trap_f1`` instead of ``bleu1``. No answer at all
    (``None``) scores 0."""
    if question.answer_text is None:
        raise ValueError(f"question {question.id} has no answer_text: it is not an open question")
    prediction = "" if text is None else str(text)
    abstained = 1.0 if prediction.strip() and is_abstention(prediction) else 0.0
    if question.metadata.get("abstention"):
        return {"f1": abstained, "abstained": abstained}
    category = _category(question)
    if category == 5:
        return {
            "f1": 1.0 if is_locomo_abstention(prediction) else 0.0,
            "abstained": abstained,
            "trap_f1": token_f1(prediction, question.answer_text),
        }
    gold = question.answer_text
    if category == 3:
        gold = gold.split(";")[0].strip()
    f1 = multi_answer_f1(prediction, gold) if category == 1 else token_f1(prediction, gold)
    return {"f1": f1, "bleu1": bleu1(prediction, question.answer_text), "abstained": abstained}
