"""The reader interface: a question, its options and a retrieval in; the chosen option out.

The contract (docs/plugins.md has a complete example):

- ``answer(question, retrieval)`` returns an ``Answer``: for a multiple-choice question ``choice``
  is the option index (0 = "(a)") or None when the reader could not decide, ``scores`` one number
  per option (higher is better) where the reader has them; for an open question ``text``. A
  failure that is the reader's own (unparseable reply, timeout) goes into ``error``, never into
  a wrong ``choice``; a setup that can never work raises ``ConfigurationError`` instead.
- ``answer.metadata["metrics"]`` (``dict[str, float]``) is averaged per result row by the runner
  (e.g. ``parse_failure``, ``lenient_only``).
- ``prepare(questions)`` (optional) is called once per job, before the replay, with every question
  the job will answer: what depends on the questions alone (their embeddings, their options') is
  computed there in large batches, so ``answer`` only does what needs the retrieval.
- ``describe()`` names everything that changes answers (model, parser, prompt): it is part of the
  result row's identity.
- ``uses_memory = False`` marks a blind control: it is never given a retrieval.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from memlab.memory import parse_plugin_config
from memlab.types import Answer, Question, Retrieval


class ReaderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Reader(ABC):
    """Answers questions from retrieved memory.

    ``uses_memory`` is False for blind controls (they never look at the retrieval).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Config: ClassVar[type[ReaderConfig]] = ReaderConfig
    uses_memory: ClassVar[bool] = True
    # False for readers whose text answer to an open question is not a written answer (the embedding
    # reader extracts a remembered turn): F1 and BLEU of such text measure nothing and are not scored.
    writes_open_answers: ClassVar[bool] = True

    def __init__(
        self, config: ReaderConfig | Mapping[str, Any] | None = None, *, cache_dir: str | Path | None = None
    ) -> None:
        # Where this reader caches embeddings / LLM responses; passed in by the runner, never a global.
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.config = parse_plugin_config(self.Config, config, f"reader {self.name!r}")

    @classmethod
    def backend_problem(cls, config: Mapping[str, Any], backend: str, backend_config: Any) -> str | None:
        """Why this reader cannot read backend ``backend`` (its parsed config given), or None. Checked
        by the run's preflight before any ingest; the default reads any backend."""
        return None

    @abstractmethod
    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        """Choose one of ``question.options`` given ``retrieval``."""

    def prepare(self, questions: Sequence[Question]) -> None:
        """Compute ahead what answering ``questions`` needs that does not depend on memory.

        The runner calls this once per job, before the replay, with the questions the job will
        answer (in order). It must not change any answer, only make ``answer`` cheaper: e.g. embed
        every question and option in one large batch through the embedding cache. The default
        does nothing.
        """

    def close(self) -> None:
        """Release clients and caches the reader opened (the runner calls this after each job)."""

    def describe(self) -> str:
        """Identity written to result files (name plus what changes its answers, e.g. the model)."""
        return self.name


def strip_option_label(option: str) -> str:
    """'(b) Some text' -> 'Some text'."""
    text = option.strip()
    if len(text) > 3 and text[0] == "(" and text[2] == ")":
        return text[3:].strip()
    return text


def argmax(scores: list[float]) -> int:
    """Index of the best score; ties go to the first (deterministic)."""
    return max(range(len(scores)), key=lambda i: (scores[i], -i))
