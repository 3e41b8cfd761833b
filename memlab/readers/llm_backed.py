"""What every LLM-backed reader shares (``llm``, ``personamem``, ``personamem_baseline``, ``locomo``,
``longmemeval``): its ``llm`` config block, the LLM built on first use, one request and the answer
made of its reply, concurrent answering and closing what it built. Each reader keeps only its own
prompt and parsing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import Field

from memlab.errors import ConfigurationError
from memlab.llm.base import LLM, ChatMessage, LLMResponse
from memlab.llm.config import LLMConfig, make_llm
from memlab.llm.errors import LLMConfigError, LLMError
from memlab.llm.managed import ManagedLLM
from memlab.readers.base import Reader, ReaderConfig
from memlab.types import Answer, Question, Retrieval


class LLMReaderSettings(ReaderConfig):
    """The base of every LLM-backed reader's Config: the ``llm`` block (``--llm.*`` on the CLI)."""

    llm: LLMConfig = Field(default_factory=LLMConfig)


def describe_llm(config: LLMConfig) -> str:
    """Model identity from the config alone: readers are described before any model is loaded."""
    provider = config.resolved_provider()
    if provider == "langchain":
        model = config.model or (config.langchain_class or "").rsplit(":", 1)[-1]
    elif provider == "hf" and config.model:
        model = config.gguf_file or Path(config.model).name
    else:
        model = config.model or "served-model"
    return f"{provider}:{model}"


def llm_config_for(config: LLMConfig, cache_dir: Path | None) -> LLMConfig:
    """The reader's LLM config with the runner's cache directory where the user named none."""
    if cache_dir is None or config.cache_dir is not None:
        return config
    return config.model_copy(update={"cache_dir": str(cache_dir)})


class LLMBackedReader(Reader):
    """A reader whose ``Config`` has an ``llm: LLMConfig`` block; ``llm=`` passes a ready LLM instead."""

    config: LLMReaderSettings  # each subclass narrows it to its own Config

    def __init__(
        self,
        config: ReaderConfig | Mapping[str, Any] | None = None,
        *,
        llm: LLM | Any | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        super().__init__(config, cache_dir=cache_dir)
        self._given = llm
        self._llm: ManagedLLM | None = None

    def llm_config(self) -> LLMConfig:
        """The config the LLM is built from (a reader may adjust it, e.g. provider-default decoding)."""
        return llm_config_for(self.config.llm, self.cache_dir)

    @property
    def llm(self) -> ManagedLLM:
        if self._llm is None:  # built on first use: the runner describes readers before running them
            self._llm = make_llm(self.llm_config(), llm=self._given)
        return self._llm

    def model_name(self) -> str:
        return self.llm.name if self._given is not None else describe_llm(self.config.llm)

    def describe(self) -> str:
        return f"{self.name}:{self.model_name()}"

    def ask_llm(
        self, messages: list[ChatMessage], *, temperature: float | None, max_tokens: int | None, json_mode: bool = False
    ) -> LLMResponse | Answer:
        """One request: the LLM's response, or the question's error ``Answer`` when the request failed."""
        try:
            return self.llm.chat(messages, json_mode=json_mode, temperature=temperature, max_tokens=max_tokens)
        except LLMConfigError:
            raise  # a broken setup (bad key, unknown model) is not one question's failure
        except LLMError as exc:
            return Answer(error=f"{type(exc).__name__}: {exc}", metadata={"model": self.llm.name})

    def reply_metadata(self, response: LLMResponse) -> dict[str, Any]:
        """What every answer made of a reply records; readers add their own keys (parser, options ...)."""
        return {
            "model": self.llm.name,
            "cost_usd": float(response.metadata.get("cost_usd", 0.0)),
            "spent_usd": float(response.metadata.get("spent_usd", 0.0)),
            "cached": response.cached,
            "raw_reply": response.text,
        }

    def answer_many(self, items: Sequence[tuple[Question, Retrieval]]) -> list[Answer]:
        """Answer several questions with up to ``llm.max_concurrency`` requests in flight."""
        _ = self.llm  # built before the threads: one client, one cache handle, one concurrency bound
        with ThreadPoolExecutor(max_workers=self.config.llm.max_concurrency) as pool:
            return list(pool.map(lambda item: self.answer(*item), items))

    def close(self) -> None:
        """Release the LLM this reader built (HTTP client, cache file), or only the cache of the
        wrapper around an LLM passed in (that LLM is the caller's to close)."""
        if self._llm is not None:
            if self._given is None:
                self._llm.close()
            elif self._llm is not self._given and self._llm.cache is not None:
                self._llm.cache.close()
        self._llm = None


def text_answer(text: str, response: LLMResponse, metadata: dict[str, Any]) -> Answer:
    """The answer to an open question: ``text`` (what the reader made of the reply) and the reply's usage."""
    return Answer(
        text=text,
        metadata=metadata,
        prompt_tokens=response.prompt_tokens,
        completion_tokens=response.completion_tokens,
    )


def choice_answer(choice: int | None, question: Question, response: LLMResponse, metadata: dict[str, Any]) -> Answer:
    """The answer to a multiple-choice question: the parsed ``choice`` (None: a parse failure, no
    scores), a score of 1 for it and 0 for the other options, and the reply as the text."""
    scores = [1.0 if i == choice else 0.0 for i in range(len(question.options))] if choice is not None else []
    return Answer(
        choice=choice,
        scores=scores,
        text=response.text.strip(),
        metadata=metadata,
        prompt_tokens=response.prompt_tokens,
        completion_tokens=response.completion_tokens,
    )


def require_open_question(reader: str, question: Question) -> None:
    """Open-question protocols (LoCoMo, LongMemEval) refuse a multiple-choice question as a setup error."""
    if question.is_multiple_choice:
        raise ConfigurationError(
            f"the {reader} reader answers open questions; {question.id} is multiple choice (use --reader llm)"
        )
