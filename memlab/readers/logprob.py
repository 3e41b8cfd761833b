"""The ``logprob`` reader: a local causal LM scores each option by its log-probability given the
memory and the user's message (PersonaMem's generative setting).

Two knobs, both recorded in ``describe()``:

- ``template``: ``raw`` (default, the paper's ``eval_gen.py``): the raw context text, memory then
  the user's message, with the option as its plain continuation, no chat template; ``chat``: the
  memory in a system prompt, the message as the user turn, the option as the assistant's reply.
- ``normalize``: ``sum`` (default, the paper's: the joint log-probability of the option) or ``mean``
  (per option token, so long options do not lose just for being long).

Nothing is cut unless ``max_context_tokens`` is set: a prompt longer than the model's window is a
per-question error naming the limit. memlab's earlier variant is ``normalize=mean, template=chat,
max_context_tokens=2048``. The prompt is run once and its KV cache reused for the four options.
Open questions (no options) are answered by greedy generation with the same model.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from memlab.llm.base import ChatMessage
from memlab.llm.cache import ResponseCache, cache_key, default_cache_dir
from memlab.llm.config import LLMConfig, build_provider, make_llm
from memlab.llm.errors import LLMConfigError, LLMError
from memlab.llm.managed import ManagedLLM
from memlab.readers.base import Reader, ReaderConfig, argmax, strip_option_label
from memlab.readers.llm import (
    MEMORY_SYSTEM_PROMPT,
    OPEN_INSTRUCTIONS,
    SystemPrompt,
    final_text,
    memory_text,
)
from memlab.readers.llm_backed import describe_llm, llm_config_for
from memlab.types import Answer, Question, Retrieval


class LogprobReaderConfig(ReaderConfig):
    llm: LLMConfig = Field(default_factory=lambda: LLMConfig(provider="hf"))
    normalize: Literal["sum", "mean"] = Field(
        default="sum", description="sum: the option's joint log-prob (the paper's); mean: per option token"
    )
    template: Literal["raw", "chat"] = Field(
        default="raw",
        description="raw: memory + message as plain text (the paper's eval_gen.py); chat: the chat template",
    )
    max_context_tokens: int | None = Field(
        default=None, ge=1, description="keep only the newest part of the memory (approximate tokens); default: no cut"
    )
    open_max_tokens: int = Field(default=64, ge=1)
    system_prompt: SystemPrompt = Field(default=MEMORY_SYSTEM_PROMPT, description="must contain {memory}")

    @field_validator("llm")
    @classmethod
    def _local(cls, value: LLMConfig) -> LLMConfig:
        if value.resolved_provider() == "openai" and value.provider == "auto" and not value.base_url:
            return value.model_copy(update={"provider": "hf"})  # a hub id: look for it locally
        if value.resolved_provider() != "hf":
            raise ValueError("the logprob reader needs token log-probs from a local model: llm.provider 'hf'")
        return value


class LogprobReader(Reader):
    name = "logprob"
    description = "a local LM scores each option by its (length-normalised) log-probability given memory"
    Config = LogprobReaderConfig

    def __init__(
        self, config: LogprobReaderConfig | Mapping[str, Any] | None = None, *, cache_dir: str | Path | None = None
    ) -> None:
        super().__init__(config, cache_dir=cache_dir)
        self.config: LogprobReaderConfig
        self._model: Any = None
        self._cache: ResponseCache | None = None
        self._open_llm: ManagedLLM | None = None

    def describe(self) -> str:
        return f"{self.name}:{describe_llm(self.config.llm)}:{self.config.normalize}:{self.config.template}"

    @property
    def model(self) -> Any:
        # Loaded on first use (the runner describes readers before running them); shared per process.
        if self._model is None:
            if not self.config.llm.model:
                raise LLMConfigError("the logprob reader needs llm.model: a local model directory or .gguf file")
            self._model = build_provider(self.config.llm)
            if self.config.llm.cache:
                self._cache = ResponseCache(self.config.llm.cache_dir or self.cache_dir or default_cache_dir())
        return self._model

    def messages(self, question: Question, retrieval: Retrieval) -> list[ChatMessage]:
        memory = memory_text(retrieval, self.config.max_context_tokens)
        return [
            ChatMessage(role="system", content=self.config.system_prompt.format(memory=memory)),
            ChatMessage(role="user", content=question.text),
        ]

    def raw_text(self, question: Question, retrieval: Retrieval) -> str:
        """The raw context text of the ``raw`` template: the memory, a blank line, the user's message
        and a newline; each option is scored as what follows."""
        context = retrieval.context.strip()
        if context and self.config.max_context_tokens:
            context = memory_text(retrieval, self.config.max_context_tokens)
        return f"{context}\n\n{question.text}\n" if context else f"{question.text}\n"

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        if not question.is_multiple_choice:
            return self._answer_open(question, retrieval)
        model = self.model
        options = [strip_option_label(o) for o in question.options]
        if self.config.template == "raw":
            text = self.raw_text(question, retrieval)
            key = cache_key(model.cache_identity, {"kind": "option_logprobs_raw"}, [text, options])
        else:
            messages = self.messages(question, retrieval)
            key = cache_key(
                model.cache_identity, {"kind": "option_logprobs"}, [[m.model_dump() for m in messages], options]
            )
        cached = self._cache.get(key) if self._cache is not None else None
        if cached is None:
            try:
                if self.config.template == "raw":
                    scores, prompt_len = model.score_text_continuations(text, options)
                else:
                    scores, prompt_len = model.score_continuations(messages, options)
            except LLMError as exc:
                return Answer(error=f"{type(exc).__name__}: {exc}", metadata={"model": model.name})
            cached = {
                "sum": [s.sum_logprob for s in scores],
                "tokens": [s.tokens for s in scores],
                "prompt_tokens": prompt_len,
            }
            if self._cache is not None:
                self._cache.put(key, model.name, cached)
        sums, lengths = cached["sum"], cached["tokens"]
        means = [s / n for s, n in zip(sums, lengths)]
        chosen = means if self.config.normalize == "mean" else sums
        return Answer(
            choice=argmax(chosen),
            scores=chosen,
            prompt_tokens=cached["prompt_tokens"] + sum(lengths),  # every token the model read
            completion_tokens=0,
            metadata={
                "model": model.name,
                "sum_logprob": sums,
                "mean_logprob": means,
                "option_tokens": lengths,
                "cost_usd": 0.0,
                "parse_failure": False,
                "normalize": self.config.normalize,
                "template": self.config.template,
            },
        )

    def _answer_open(self, question: Question, retrieval: Retrieval) -> Answer:
        if self._open_llm is None:
            self._open_llm = make_llm(llm_config_for(self.config.llm, self.cache_dir), llm=self.model)
        llm = self._open_llm
        memory = memory_text(retrieval, self.config.max_context_tokens)
        messages = [
            ChatMessage(role="system", content=self.config.system_prompt.format(memory=memory)),
            ChatMessage(role="user", content=f"{question.text}\n\n{OPEN_INSTRUCTIONS}"),
        ]
        try:
            response = llm.chat(messages, max_tokens=self.config.open_max_tokens)
        except LLMError as exc:
            return Answer(error=f"{type(exc).__name__}: {exc}", metadata={"model": llm.name})
        return Answer(
            text=final_text(response.text),
            prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
            metadata={"model": llm.name, "cost_usd": 0.0, "cached": response.cached},
        )

    def close(self) -> None:
        """Close the score cache and the open-question LLM's cache. The model itself stays loaded:
        it is shared by every reader of this process (``release_local_models`` frees it)."""
        if self._open_llm is not None and self._open_llm.cache is not None:
            self._open_llm.cache.close()
        if self._cache is not None:
            self._cache.close()
        self._open_llm = self._cache = None
        self._model = None
