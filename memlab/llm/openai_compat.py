"""OpenAI-compatible Chat Completions through the ``openai`` SDK: OpenAI itself, vLLM, Ollama,
llama.cpp's server, LM Studio, LiteLLM proxies ...

The SDK's own retries are switched off: ``ManagedLLM`` retries with backoff and counts attempts,
so every provider behaves the same. Here each failure is mapped to transient (retry) or config
(stop the run) errors.
"""

from __future__ import annotations

import json
import os
from typing import Any

from memlab.errors import MissingDependencyError
from memlab.llm.base import LLM, ChatMessage, LLMResponse, response_with_usage
from memlab.llm.errors import LLMConfigError, LLMError, TransientLLMError

try:
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("openai", "the OpenAI-compatible LLM needs it: pip install 'memlab[llm]'") from exc


class OpenAICompatLLM(LLM):
    supports_json_mode = True

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_tokens_param: str = "max_tokens",
        extra_params: dict[str, Any] | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            if base_url is None:
                raise LLMConfigError("no API key for api.openai.com: set OPENAI_API_KEY or llm.api_key")
            api_key = "EMPTY"  # local servers (vLLM, llama.cpp, Ollama) accept any key
        self.base_url = base_url
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
        self.model = model or self._only_served_model()
        self.max_tokens_param = max_tokens_param
        self.extra_params = dict(extra_params or {})
        self.name = f"openai:{self.model}"

    @property
    def cache_identity(self) -> str:
        """Provider, model and endpoint: two servers serving one model name never share cached answers."""
        return f"{self.name}@{(self.base_url or 'https://api.openai.com/v1').rstrip('/')}"

    def _only_served_model(self) -> str:
        # vLLM and llama.cpp serve one model; asking for it saves the user from typing its name.
        where = self.base_url or "api.openai.com"
        try:
            served = [m.id for m in self._client.models.list()]
        except openai.OpenAIError as exc:
            raise LLMConfigError(f"llm.model is not set and {where}/models could not be listed: {exc}") from exc
        if len(served) != 1:
            raise LLMConfigError(f"llm.model is not set and {where} serves {len(served)} models: {served[:10]}")
        return served[0]

    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float | None, max_tokens: int | None
    ) -> LLMResponse:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            **self.extra_params,
        }
        if temperature is not None:  # None: the provider's default sampling, as the references send it
            request["temperature"] = temperature
        if max_tokens is not None:
            request[self.max_tokens_param] = max_tokens
        if json_mode:
            request["response_format"] = {"type": "json_object"}
        try:
            completion = self._client.chat.completions.create(**request)
        except openai.RateLimitError as exc:
            raise TransientLLMError(f"rate limited (429): {_brief(exc)}", retry_after=_retry_after(exc)) from exc
        except openai.APITimeoutError as exc:
            raise TransientLLMError(f"timed out: {exc}") from exc
        except openai.APIConnectionError as exc:
            raise TransientLLMError(f"connection failed: {exc}") from exc
        except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
            raise LLMConfigError(f"{self.name} at {self.base_url or 'api.openai.com'}: {_brief(exc)}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (408, 409):
                raise TransientLLMError(
                    f"server error {exc.status_code}: {_brief(exc)}", retry_after=_retry_after(exc)
                ) from exc
            raise LLMError(f"request rejected ({exc.status_code}): {_brief(exc)}") from exc
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise TransientLLMError(f"malformed response body: {exc}") from exc
        return self._parse(completion, messages)

    def _parse(self, completion: Any, messages: list[ChatMessage]) -> LLMResponse:
        # A proxy answering 200 with an HTML page or a half object decodes to a str or a model
        # without choices; both are treated as transient (a retry usually gets a real answer).
        choices = getattr(completion, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            raise TransientLLMError(f"malformed response body: no choices in {str(completion)[:200]!r}")
        text = choices[0].message.content
        if not isinstance(text, str):
            raise TransientLLMError(f"malformed response body: message content is {type(text).__name__}")
        usage = getattr(completion, "usage", None)
        metadata = {"finish_reason": choices[0].finish_reason, "model": getattr(completion, "model", None)}
        reported = None  # some servers omit usage
        if usage is not None and usage.prompt_tokens is not None:
            reported = (int(usage.prompt_tokens), int(usage.completion_tokens or 0))
        return response_with_usage(text, messages, reported, metadata)

    def close(self) -> None:
        self._client.close()


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _brief(exc: openai.APIStatusError) -> str:
    return str(exc.message if hasattr(exc, "message") else exc)[:300]
