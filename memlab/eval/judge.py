"""An LLM judge for free-form answers: CORRECT or WRONG against the gold answer.

Token F1 punishes a right answer in other words ("May 7th" vs "7 May 2023"), so Mem0, MemOS and
others also report an LLM judge on LoCoMo. The prompt follows Mem0's LoCoMo judge (generous about
wording and date formats); adversarial questions are judged on whether the answer declines.

Verdicts are cached by (judge version, model name, prompt): in memory, and in a SQLite file when a
cache path is given, so an interrupted or repeated run pays for each verdict once. Failed calls are
not cached; an unparseable verdict is returned with ``parse_failure`` set (and cached, since a
deterministic judge would answer the same again).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

from memlab.llm.base import LLM, ChatMessage
from memlab.types import Question

JUDGE_VERSION = "locomo-judge-v1"
CACHE_FILE = "judge_cache.sqlite"

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


def judge_prompt(question: Question, answer: str) -> str:
    if question.answer_text is None:
        raise ValueError(f"question {question.id} has no answer_text to judge against")
    template = _ADVERSARIAL if _is_adversarial(question) else _ANSWERABLE
    return template.format(question=question.text, gold=question.answer_text, answer=answer.strip() or "(no answer)")


def parse_verdict(text: str) -> tuple[bool | None, str]:
    """(correct, reason) from the judge's reply; correct is None when no single label is found."""
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


class _Cache:
    """Key -> raw judge reply; SQLite when a path is given (safe across processes), else a dict."""

    def __init__(self, path: Path | None) -> None:
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
            self._db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._db.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if key in self._memory:
                return self._memory[key]
            if self._db is not None:
                row = self._db.execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
                if row:
                    self._memory[key] = json.loads(row[0])
                    return self._memory[key]
        return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._memory[key] = value
            if self._db is not None:
                self._db.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?)", (key, json.dumps(value)))
                self._db.commit()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class LLMJudge:
    """``LLMJudge(llm, cache=path).judge(question, answer)`` -> verdict dict.

    ``cache``: a SQLite file, or a directory (the file ``judge_cache.sqlite`` in it), or None for an
    in-memory cache only.
    """

    def __init__(self, llm: LLM, *, cache: str | Path | None = None, max_tokens: int = 200) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        path = Path(cache) if cache is not None else None
        if path is not None and (path.is_dir() or not path.suffix):
            path = path / CACHE_FILE
        self._cache = _Cache(path)

    def _key(self, prompt: str) -> str:
        return hashlib.sha256(f"{JUDGE_VERSION}\0{self.llm.name}\0{prompt}".encode()).hexdigest()

    def judge(self, question: Question, answer: str | None) -> dict[str, Any]:
        """Returns ``correct`` (bool, or None on a parse failure), ``parse_failure``, ``reason``,
        ``cached``, ``prompt_tokens``/``completion_tokens`` (0 when cached) and the ``raw`` reply."""
        prompt = judge_prompt(question, answer or "")
        key = self._key(prompt)
        hit = self._cache.get(key)
        if hit is None:
            response = self.llm.chat(
                [ChatMessage(role="system", content=_SYSTEM), ChatMessage(role="user", content=prompt)],
                json_mode=self.llm.supports_json_mode,
                temperature=0.0,
                max_tokens=self.max_tokens,
            )
            hit = {"raw": response.text, "prompt_tokens": response.prompt_tokens,
                   "completion_tokens": response.completion_tokens}
            self._cache.put(key, hit)
            cached = False
        else:
            cached = True
        correct, reason = parse_verdict(hit["raw"])
        return {
            "correct": correct,
            "parse_failure": correct is None,
            "reason": reason,
            "cached": cached,
            "prompt_tokens": 0 if cached else int(hit["prompt_tokens"]),
            "completion_tokens": 0 if cached else int(hit["completion_tokens"]),
            "raw": hit["raw"],
        }

    def metrics(self, question: Question, answer: str | None) -> dict[str, float]:
        """The verdict as prediction metrics: ``judge`` 1/0, or ``judge_parse_failure`` 1."""
        verdict = self.judge(question, answer)
        if verdict["correct"] is None:
            return {"judge_parse_failure": 1.0}
        return {"judge": 1.0 if verdict["correct"] else 0.0}

    def close(self) -> None:
        self._cache.close()

    def __enter__(self) -> "LLMJudge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
