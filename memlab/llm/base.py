"""The one LLM interface used by readers and by extractors (profile store, Mem0).

A provider implements ``_chat``; the public ``chat`` validates messages and returns text plus token
usage. Providers: OpenAI-compatible endpoints, any LangChain chat model, local Hugging Face models.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memlab.tokens import count_tokens


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class LLMResponse(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


def response_with_usage(
    text: str, messages: list[ChatMessage], usage: tuple[int, int] | None, metadata: dict[str, Any]
) -> LLMResponse:
    """The reply with the provider's (prompt, completion) token usage; where the provider reported
    none, counted here and marked ``metadata["usage_estimated"]``: an estimate beats a zero cost."""
    if usage is None:
        usage = (sum(count_tokens(m.content) for m in messages), count_tokens(text))
        metadata = {**metadata, "usage_estimated": True}
    prompt_tokens, completion_tokens = usage
    return LLMResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, metadata=metadata)


class LLM(ABC):
    """A chat model. ``name`` identifies provider and model (it keys the response cache)."""

    name: str = "llm"
    supports_json_mode: bool = False

    @property
    def cache_identity(self) -> str:
        """What keys cached responses: the name, plus whatever else changes the answers (local
        models add their weights' location and dtype). Shown names stay short."""
        return self.name

    def chat(
        self,
        messages: list[ChatMessage] | list[dict[str, str]],
        *,
        json_mode: bool = False,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        """``temperature=None`` and ``max_tokens=None`` leave them to the provider's defaults
        (OpenAI-compatible requests then carry neither field)."""
        parsed = [m if isinstance(m, ChatMessage) else ChatMessage.model_validate(m) for m in messages]
        if not parsed:
            raise ValueError("chat() needs at least one message")
        return self._chat(parsed, json_mode=json_mode, temperature=temperature, max_tokens=max_tokens)

    @abstractmethod
    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float | None, max_tokens: int | None
    ) -> LLMResponse:
        """Call the model."""

    def close(self) -> None:
        """Release clients, files or model memory held by this LLM (default: nothing to release)."""


JSON_MODE_INSTRUCTION = "Reply with one JSON object and nothing else."


def with_json_instruction(messages: list[ChatMessage]) -> list[ChatMessage]:
    """JSON mode for providers without a native one: ask for it in the system message."""
    if messages and messages[0].role == "system":
        first = ChatMessage(role="system", content=f"{messages[0].content}\n\n{JSON_MODE_INSTRUCTION}")
        return [first, *messages[1:]]
    return [ChatMessage(role="system", content=JSON_MODE_INSTRUCTION), *messages]
