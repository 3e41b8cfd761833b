"""LLM judges for free-form answers: mem0's LoCoMo judge, LongMemEval's per-type judge, memlab's own.

Token F1 punishes a right answer in other words ("May 7th" vs "7 May 2023"), so Mem0, MemOS and
LongMemEval report an LLM judge. The judge prompt moves the number a lot (the same answers are
reported at 91 % and 35 % under two prompts), so each prompt here is a published one, verbatim, and
is named (``prompt_name``) in every result:

- ``prompt="mem0"`` (``mem0-accuracy-v1``): mem0's ``ACCURACY_PROMPT`` (mem0ai/mem0
  ``evaluation/metrics/llm_judge.py``, as it stood when ``evaluation/`` was retired from that
  repository), sent as one user message in JSON mode at temperature 0; the verdict is the JSON
  ``label`` (CORRECT exactly, as mem0's ``1 if label == "CORRECT" else 0``). Category 5 is not
  judged (``applies_to`` is False), as mem0's ``evals.py`` and ``llm_judge.py`` skip it.
- ``prompt="longmemeval"`` (``longmemeval-anscheck-v1``): LongMemEval's per-type prompts
  (xiaowu0162/LongMemEval ``src/evaluation/evaluate_qa.py``, ``get_anscheck_prompt``): one
  for single-session-user/-assistant and multi-session, one each for temporal-reasoning,
  knowledge-update and single-session-preference, and the abstention prompt for ``_abs``
  questions; temperature 0, 10 tokens, correct when the reply contains "yes".
- ``prompt="personamem_v2"`` (``personamem-v2-narrow-v1``): PersonaMem-v2's open-ended judge
  (:mod:`memlab.eval.personamem_v2_judge`): its positive or "do not personalize" prompt by the
  question's preference, one user message, provider-default decoding as the reference; the verdict
  is a *score* in [0, 1] (``\\boxed{}``; 0.0 when none is found, as the reference, flagged as a parse
  failure), and a row's ``judge`` is the mean score.
- ``prompt="memlab"`` (``memlab-locomo-v1``): memlab's earlier judge (stricter than mem0's about
  partial lists; judges category 5 on whether the answer declines). Kept as a named alternative.

Runs: ``judge(question, answer, run=i)`` is the i-th independent sample (MemOS runs mem0's judge
3 times and reports mean and standard deviation: ``judge_summary``). All three references
decode at temperature 0, so runs differ only where the server is not deterministic (hosted APIs
are not); a deterministic local model gives identical runs and a standard deviation of 0.

Verdicts are cached by (prompt name, model, run, decoding, request text): in memory, and in a
SQLite file when a cache path is given, so an interrupted or repeated run pays for each verdict
once. The response cache of a managed LLM is bypassed (the judge's own cache keys the run index;
otherwise run 2 would replay run 1). Failed calls are not cached; an unparseable verdict is returned
with ``parse_failure`` set (and cached: the same request would get the same reply again).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from memlab.llm.base import LLM, ChatMessage
from memlab.sqlite_kv import SQLiteKV
from memlab.types import Question

JudgePrompt = Literal["mem0", "memlab", "longmemeval", "personamem_v2"]
PROMPT_NAMES: dict[str, str] = {
    "mem0": "mem0-accuracy-v1",
    "memlab": "memlab-locomo-v1",
    "longmemeval": "longmemeval-anscheck-v1",
    "personamem_v2": "personamem-v2-narrow-v1",
}
DEFAULT_MAX_TOKENS: dict[str, int | None] = {
    "mem0": 200,  # mem0 sets no limit; its JSON reply is a label (and at most one sentence)
    "memlab": 200,
    "longmemeval": 10,  # evaluate_qa.py: max_tokens 10
    "personamem_v2": None,  # the reference sends no limit (its reasoning comes before the score)
}
# Decoding when none is given: 0 as mem0, LongMemEval and memlab; PersonaMem-v2's judge calls its
# model with the provider's defaults.
DEFAULT_TEMPERATURE: dict[str, float | None] = {"personamem_v2": None}
CACHE_FILE = "judge_cache.sqlite"

# ----------------------------------------------------------------------------- mem0
# Verbatim from mem0ai/mem0 evaluation/metrics/llm_judge.py (commit 373709ffb, the last version
# before evaluation/ moved out of that repository; the first versions wrote "it’s" with a curly
# apostrophe in "Now it's time"). Published prompt text is data: do not edit, not even whitespace.
ACCURACY_PROMPT = (
    "\n"
    "Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be given the following data:\n"
    "    (1) a question (posed by one user to another user), \n"
    "    (2) a ’gold’ (ground truth) answer, \n"
    "    (3) a generated answer\n"
    "which you will score as CORRECT/WRONG.\n"
    "\n"
    "The point of the question is to ask about something one user should know about the other user based on their prior conversations.\n"
    "The gold answer will usually be a concise and short answer that includes the referenced topic, for example:\n"
    "Question: Do you remember what I got the last time I went to Hawaii?\n"
    "Gold answer: A shell necklace\n"
    "The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT. \n"
    "\n"
    'For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it\'s the same date.\n'
    "\n"
    "Now it's time for the real question:\n"
    "Question: {question}\n"
    "Gold answer: {gold_answer}\n"
    "Generated answer: {generated_answer}\n"
    "\n"
    "First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG. \n"
    "Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.\n"
    "\n"
    'Just return the label CORRECT or WRONG in a json format with the key as "label".\n'
)


# ----------------------------------------------------------------------------- LongMemEval
# Verbatim from xiaowu0162/LongMemEval src/evaluation/evaluate_qa.py, get_anscheck_prompt. Its five
# templates share one layout: an instruction, the three positional fields (question, answer - or
# rubric / explanation -, model response) and a closing question; the instructions are kept whole.
def _anscheck_template(
    instruction: str, answer_field: str = "Correct Answer", ask: str = "Is the model response correct?"
) -> str:
    return f"{instruction}\n\nQuestion: {{}}\n\n{answer_field}: {{}}\n\nModel Response: {{}}\n\n{ask} Answer yes or no only."


LONGMEMEVAL_STANDARD = _anscheck_template(
    "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct answer or contains all the intermediate steps to get the correct answer, you should also answer yes. If the response only contains a subset of the information required by the answer, answer no. "
)
LONGMEMEVAL_TEMPORAL = _anscheck_template(
    "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct answer or contains all the intermediate steps to get the correct answer, you should also answer yes. If the response only contains a subset of the information required by the answer, answer no. In addition, do not penalize off-by-one errors for the number of days. If the question asks for the number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., predicting 19 days when the answer is 18), the model's response is still correct. "
)
LONGMEMEVAL_KNOWLEDGE_UPDATE = _anscheck_template(
    "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response contains some previous information along with an updated answer, the response should be considered as correct as long as the updated answer is the required answer."
)
LONGMEMEVAL_PREFERENCE = _anscheck_template(
    "I will give you a question, a rubric for desired personalized response, and a response from a model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. The model does not need to reflect all the points in the rubric. The response is correct as long as it recalls and utilizes the user's personal information correctly.",
    answer_field="Rubric",
)
LONGMEMEVAL_ABSTENTION = _anscheck_template(
    "I will give you an unanswerable question, an explanation, and a response from a model. Please answer yes if the model correctly identifies the question as unanswerable. The model could say that the information is incomplete, or some other information is given but the asked information is not.",
    answer_field="Explanation",
    ask="Does the model correctly identify the question as unanswerable?",
)

LONGMEMEVAL_TYPES: dict[str, str] = {
    "single-session-user": LONGMEMEVAL_STANDARD,
    "single-session-assistant": LONGMEMEVAL_STANDARD,
    "multi-session": LONGMEMEVAL_STANDARD,
    "temporal-reasoning": LONGMEMEVAL_TEMPORAL,
    "knowledge-update": LONGMEMEVAL_KNOWLEDGE_UPDATE,
    "single-session-preference": LONGMEMEVAL_PREFERENCE,
}

# ----------------------------------------------------------------------------- memlab (earlier judge)
_SYSTEM = "You grade answers to questions about a long conversation between two people. Reply with JSON only."

_ANSWERABLE = """Label the generated answer to the question as CORRECT or WRONG.

The gold answer is usually short. The generated answer may be longer; be generous: it is CORRECT if
it gives the same fact, names the same thing or refers to the same date or time period as the gold
answer (e.g. "May 7th" and "7 May 2023" are the same date), even in other words. It is WRONG if it
gives a different fact, only part of a list that the question asks for, or declines to answer.

Question: {question}
Gold answer: {gold}
Generated answer: {answer}

Reply as {{"reason": "<one sentence>", "label": "CORRECT" or "WRONG"}}."""

_ADVERSARIAL = """Label the generated answer to the question as CORRECT or WRONG.

The conversation does NOT contain the answer to this question: it is a trick question (the
conversation says something like "{gold}", but about someone else). The generated answer is
CORRECT only if it says the information is not available / not mentioned / unknown. It is WRONG if
it answers the question (with that or any other content).

Question: {question}
Generated answer: {answer}

Reply as {{"reason": "<one sentence>", "label": "CORRECT" or "WRONG"}}."""

_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


def _is_adversarial(question: Question) -> bool:
    return question.metadata.get("category") == 5 or question.type == "adversarial"


def _gold(question: Question) -> str:
    if question.answer_text is None:
        raise ValueError(f"question {question.id} has no answer_text to judge against")
    return question.answer_text


def judge_prompt(question: Question, answer: str) -> str:
    """memlab's own judge prompt (``prompt="memlab"``)."""
    gold = _gold(question)
    template = _ADVERSARIAL if _is_adversarial(question) else _ANSWERABLE
    return template.format(question=question.text, gold=gold, answer=answer.strip() or "(no answer)")


def mem0_prompt(question: Question, answer: str) -> str:
    """mem0's ACCURACY_PROMPT filled as mem0 fills it (the answer as given, ``str(response)``)."""
    return ACCURACY_PROMPT.format(question=question.text, gold_answer=_gold(question), generated_answer=answer)


def longmemeval_type(question: Question) -> str:
    return str(question.metadata.get("question_type") or question.type)


def is_longmemeval_abstention(question: Question) -> bool:
    return bool(question.metadata.get("abstention")) or question.id.endswith("_abs")


def longmemeval_prompt(question: Question, answer: str) -> str:
    """LongMemEval's judge prompt for this question's type (abstention questions: their own)."""
    gold = _gold(question)
    if is_longmemeval_abstention(question):
        return LONGMEMEVAL_ABSTENTION.format(question.text, gold, answer)
    template = LONGMEMEVAL_TYPES.get(longmemeval_type(question))
    if template is None:
        raise ValueError(
            f"question {question.id}: LongMemEval has no judge prompt for type {longmemeval_type(question)!r} "
            f"(known: {', '.join(LONGMEMEVAL_TYPES)})"
        )
    return template.format(question.text, gold, answer)


def parse_verdict(text: str) -> tuple[bool | None, str]:
    """memlab judge: (correct, reason) from the reply; correct is None when no single label is found."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            label = str(data.get("label", "")).strip().upper()
            if label in ("CORRECT", "WRONG"):
                return label == "CORRECT", str(data.get("reason", ""))
    labels = set(_LABEL.findall(text.upper()))
    if len(labels) == 1:
        return labels.pop() == "CORRECT", text.strip()
    return None, text.strip()


def _mem0_json(text: str) -> str:
    # mem0.memory.utils.extract_json: the inside of a ```json fence, else first '{' to last '}'
    text = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    if fenced:
        return fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if start != -1 and end > start else text


def parse_mem0_label(text: str) -> tuple[bool | None, str]:
    """mem0 judge: the JSON ``label``; CORRECT (exactly) is correct, any other label wrong; no JSON
    object with a label is a parse failure (where mem0's script would stop with an exception)."""
    try:
        data = json.loads(_mem0_json(text))
    except json.JSONDecodeError:
        return None, text.strip()
    if not isinstance(data, dict) or "label" not in data:
        return None, text.strip()
    return data["label"] == "CORRECT", text.strip()


def parse_longmemeval_label(text: str) -> tuple[bool | None, str]:
    """LongMemEval judge: correct when the reply contains "yes" (``'yes' in response.lower()``)."""
    return "yes" in text.strip().lower(), text.strip()


# ----------------------------------------------------------------------------- runs
def judge_summary(run_scores: Sequence[float]) -> tuple[float, float]:
    """(mean, std) of per-run judge accuracies, as MemOS reports them (``np.mean``, ``np.std``:
    population std, so one run has std 0). Empty input is an error."""
    scores = [float(s) for s in run_scores]
    if not scores:
        raise ValueError("judge_summary needs at least one run score")
    mean = sum(scores) / len(scores)
    return mean, math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))


def run_key(run: int) -> str:
    """Per-question metric holding run ``run``'s verdict (0-based run, 1-based name as MemOS's judgment_N)."""
    return f"judge_run_{run + 1}"


def judge_run_scores(metrics: Sequence[Mapping[str, float]], runs: int) -> list[float]:
    """Accuracy of each run over the predictions that have a verdict for it.

    ``metrics``: per-prediction metrics as ``LLMJudge.run_metrics`` writes them (predictions the
    judge does not apply to have no judge keys and are skipped). With one run the key is ``judge``.
    """
    scores: list[float] = []
    for run in range(runs):
        key = "judge" if runs == 1 else run_key(run)
        values = [float(m[key]) for m in metrics if key in m]
        if values:
            scores.append(sum(values) / len(values))
    return scores


# ----------------------------------------------------------------------------- cache
class _Cache:
    """Key -> judge reply: in memory, and in a ``SQLiteKV`` file when a path is given (across processes)."""

    def __init__(self, path: Path | None) -> None:
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._store = SQLiteKV(path, table="verdicts") if path is not None else None

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if key not in self._memory and self._store is not None:
                stored = self._store.get(key)
                if stored is not None:
                    self._memory[key] = json.loads(stored)
            return self._memory.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._memory[key] = value
            if self._store is not None:
                self._store.put(key, json.dumps(value))

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def _without_response_cache(llm: LLM) -> LLM:
    """A managed LLM minus its response cache (same provider, retries, bound and prices)."""
    from memlab.llm.managed import ManagedLLM

    if isinstance(llm, ManagedLLM) and llm.cache is not None:
        return ManagedLLM(
            llm.inner,
            cache=None,
            retry=llm.retry,
            max_concurrency=llm.max_concurrency,
            price=llm.price,
            params=llm.params,
        )
    return llm


def verdict_value(verdict: Mapping[str, Any]) -> float | None:
    """What a verdict counts as: its score (PersonaMem-v2, where a reply without one counts 0.0 as
    in the reference), else 1/0 for CORRECT/WRONG, None for a label that could not be read."""
    if verdict.get("score") is not None:
        return float(verdict["score"])
    if verdict.get("correct") is None:
        return None
    return 1.0 if verdict["correct"] else 0.0


# ----------------------------------------------------------------------------- the judge
class LLMJudge:
    """``LLMJudge(llm, prompt="mem0", cache=path).judge(question, answer, run=0)`` -> verdict dict.

    ``cache``: a SQLite file, or a directory (the file ``judge_cache.sqlite`` in it), or None for an
    in-memory cache only. ``max_tokens``: None gives the prompt's default (mem0 and memlab 200,
    LongMemEval 10, PersonaMem-v2 none sent). ``temperature``: the prompt's reference default (0;
    PersonaMem-v2: none sent); raise it only to sample deliberately different runs.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        prompt: JudgePrompt = "mem0",
        cache: str | Path | None = None,
        max_tokens: int | None = None,
        temperature: float | None | Literal["default"] = "default",
    ) -> None:
        if prompt not in PROMPT_NAMES:
            raise ValueError(f"unknown judge prompt {prompt!r}; expected one of {', '.join(PROMPT_NAMES)}")
        self.llm = llm
        self._client = _without_response_cache(llm)
        self.prompt = prompt
        self.prompt_name = PROMPT_NAMES[prompt]
        self.max_tokens = max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS[prompt]
        self.temperature = DEFAULT_TEMPERATURE.get(prompt, 0.0) if temperature == "default" else temperature
        path = Path(cache) if cache is not None else None
        if path is not None and (path.is_dir() or not path.suffix):
            path = path / CACHE_FILE
        self._cache = _Cache(path)
        self._owned: list[Any] = []  # what create_judge built for this judge, closed with it

    # -- identity, recorded by the runner in the fingerprint and the report
    @property
    def model_name(self) -> str:
        return self.llm.name

    def describe(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt_name,
            "model": self.model_name,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }

    def applies_to(self, question: Question) -> bool:
        """Whether this judge scores the question at all (mem0 leaves category 5 out; LongMemEval
        has prompts for its own question types only)."""
        if question.answer_text is None:
            return False
        if self.prompt == "mem0":
            return not _is_adversarial(question)
        if self.prompt == "longmemeval":
            return is_longmemeval_abstention(question) or longmemeval_type(question) in LONGMEMEVAL_TYPES
        if self.prompt == "personamem_v2":
            return bool(question.metadata.get("preference"))
        return True

    def _request(self, question: Question, answer: str) -> tuple[list[ChatMessage], bool]:
        """The chat messages and whether JSON mode is asked for."""
        if self.prompt == "mem0":
            # mem0 asks for response_format json_object; a provider without a native JSON mode gets
            # the prompt alone (memlab's fallback would add a system message to the published text).
            return [ChatMessage(role="user", content=mem0_prompt(question, answer))], self._client.supports_json_mode
        if self.prompt == "longmemeval":
            return [ChatMessage(role="user", content=longmemeval_prompt(question, answer))], False
        if self.prompt == "personamem_v2":
            from memlab.eval.personamem_v2_judge import judge_prompt as v2_prompt

            preference = str(question.metadata.get("preference", ""))
            return [ChatMessage(role="user", content=v2_prompt(question.text, preference, answer))], False
        return [
            ChatMessage(role="system", content=_SYSTEM),
            ChatMessage(role="user", content=judge_prompt(question, answer)),
        ], self._client.supports_json_mode

    def request_messages(self, question: Question, answer: str | None) -> list[ChatMessage]:
        """What the judge sends for this answer (for inspection and tests)."""
        return self._request(question, answer or "")[0]

    def _parse(self, text: str) -> tuple[bool | None, str]:
        if self.prompt == "personamem_v2":  # scored, not labelled (judge() reads the score)
            return None, text.strip()
        if self.prompt == "mem0":
            return parse_mem0_label(text)
        if self.prompt == "longmemeval":
            return parse_longmemeval_label(text)
        return parse_verdict(text)

    def _key(self, messages: list[ChatMessage], json_mode: bool, run: int) -> str:
        provider = getattr(self.llm, "inner", self.llm)  # a managed LLM keys its cache by its provider
        identity = getattr(provider, "cache_identity", self.llm.name)
        payload = json.dumps(
            [
                self.prompt_name,
                identity,
                run,
                self.temperature,
                self.max_tokens,
                json_mode,
                [m.model_dump() for m in messages],
            ],
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def judge(self, question: Question, answer: str | None, *, run: int = 0) -> dict[str, Any]:
        """Verdict of run ``run`` (0-based): ``correct`` (bool, or None on a parse failure),
        ``parse_failure``, ``reason``, ``cached``, ``prompt_tokens``/``completion_tokens``/``cost_usd``
        (0 when cached), ``run``, ``prompt_name`` and the ``raw`` reply. Raises ValueError for a
        question the judge does not apply to."""
        if run < 0:
            raise ValueError(f"run must be >= 0, got {run}")
        if not self.applies_to(question):
            raise ValueError(f"judge {self.prompt_name!r} does not score question {question.id} ({question.type})")
        messages, json_mode = self._request(question, answer or "")
        key = self._key(messages, json_mode, run)
        hit = self._cache.get(key)
        cached = hit is not None
        if hit is None:
            response = self._client.chat(
                messages, json_mode=json_mode, temperature=self.temperature, max_tokens=self.max_tokens
            )
            hit = {
                "raw": response.text,
                "prompt_tokens": response.prompt_tokens,
                "completion_tokens": response.completion_tokens,
                "cost_usd": float(response.metadata.get("cost_usd", 0.0)),
            }
            self._cache.put(key, hit)
        correct, reason = self._parse(hit["raw"])
        verdict = self._verdict(correct, reason, cached, hit, run)
        if self.prompt == "personamem_v2":
            from memlab.eval.personamem_v2_judge import extract_score

            found = extract_score(hit["raw"])
            # the reference counts a reply without a score as 0.0; so does memlab, and flags it
            verdict.update(score=0.0 if found is None else found, parse_failure=found is None)
        return verdict

    def _verdict(
        self, correct: bool | None, reason: str, cached: bool, hit: dict[str, Any], run: int
    ) -> dict[str, Any]:
        return {
            "correct": correct,
            "score": None,
            "parse_failure": correct is None,
            "reason": reason,
            "cached": cached,
            "prompt_tokens": 0 if cached else int(hit["prompt_tokens"]),
            "completion_tokens": 0 if cached else int(hit["completion_tokens"]),
            "cost_usd": 0.0 if cached else float(hit.get("cost_usd", 0.0)),
            "run": run,
            "prompt_name": self.prompt_name,
            "raw": hit["raw"],
        }

    def metrics(self, question: Question, answer: str | None, *, run: int = 0) -> dict[str, float]:
        """One run's verdict as prediction metrics: ``judge`` 1/0 (PersonaMem-v2: the score), or
        ``judge_parse_failure`` 1; ``{}`` for a question the judge does not apply to (e.g. category 5
        under mem0's judge)."""
        if not self.applies_to(question):
            return {}
        value = verdict_value(self.judge(question, answer, run=run))
        return {"judge_parse_failure": 1.0} if value is None else {"judge": value}

    def run_metrics(self, question: Question, answer: str | None, runs: int = 1) -> dict[str, float]:
        """``runs`` verdicts as prediction metrics: ``judge`` (mean over the runs with a verdict),
        with several runs also ``judge_run_1``.. (one per run, for ``judge_run_scores``), and
        ``judge_parse_failure`` (share of runs without one) when any failed; ``{}`` when the judge
        does not apply."""
        if runs < 1:
            raise ValueError(f"runs must be >= 1, got {runs}")
        if not self.applies_to(question):
            return {}
        out: dict[str, float] = {}
        verdicts: list[float] = []
        failures = 0
        for run in range(runs):
            value = verdict_value(self.judge(question, answer, run=run))
            if value is None:
                failures += 1
                continue
            verdicts.append(value)
            if runs > 1:
                out[run_key(run)] = value
        if verdicts:
            out["judge"] = sum(verdicts) / len(verdicts)
        if failures:
            out["judge_parse_failure"] = failures / runs
        return out

    def run_metrics_many(
        self, items: Sequence[tuple[Question, str | None]], runs: int = 1, *, max_workers: int = 4
    ) -> list[dict[str, float]]:
        """``run_metrics`` for several answers, with up to ``max_workers`` requests in flight."""
        with ThreadPoolExecutor(max_workers=max_workers) as pool:
            return list(pool.map(lambda item: self.run_metrics(item[0], item[1], runs), items))

    def close(self) -> None:
        self._cache.close()
        for thing in self._owned:
            thing.close()
        self._owned.clear()

    def __enter__(self) -> LLMJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_judge(
    prompt: JudgePrompt,
    llm_config: Any = None,
    *,
    cache_dir: str | Path | None = None,
    llm: LLM | Any | None = None,
    max_tokens: int | None = None,
) -> LLMJudge:
    """A judge for ``--judge <prompt>``: the LLM from ``llm_config`` (an ``LLMConfig`` or its dict,
    as ``--llm.*``; or ``llm`` given directly), verdicts cached in ``cache_dir``. The judge closes
    the LLM it built."""
    from memlab.llm.config import LLMConfig, make_llm

    config = llm_config if isinstance(llm_config, LLMConfig) else LLMConfig.model_validate(llm_config or {})
    # the judge caches verdicts itself (keyed by run); a response cache underneath would replay runs
    client = make_llm(config.model_copy(update={"cache": False}), llm=llm)
    judge = LLMJudge(client, prompt=prompt, cache=cache_dir, max_tokens=max_tokens)
    if llm is None:
        judge._owned.append(client)
    return judge
