"""The wrapper every configured LLM goes through: response cache, bounded concurrency, retries
with backoff, and cost accounting. Providers stay simple (one request, mapped errors)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memlab.llm.base import LLM, ChatMessage, LLMResponse
from memlab.llm.cache import ResponseCache, cache_key
from memlab.llm.errors import LLMError
from memlab.llm.pricing import Price
from memlab.llm.retry import RetryPolicy


class ManagedLLM(LLM):
    """Wraps a provider LLM.

    Each response carries ``metadata``: ``cost_usd`` (what its tokens cost at the configured price,
    also when it came from the cache, so reruns report the same cost per question), ``spent_usd``
    (what this call actually paid: 0 for a cache hit), ``cached`` and ``attempts``.
    """

    def __init__(
        self,
        inner: LLM,
        *,
        cache: ResponseCache | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int = 4,
        price: Price | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.inner = inner
        self.name = inner.name
        self.supports_json_mode = inner.supports_json_mode
        self.cache = cache
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency
        self.price = price
        self.params = dict(params or {})  # provider parameters that change answers (part of the cache key)
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self.requests = 0  # requests actually sent (cache misses, retries included)
        self._count_lock = threading.Lock()

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return self.price.cost(prompt_tokens, completion_tokens) if self.price else 0.0

    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float | None, max_tokens: int | None
    ) -> LLMResponse:
        params = {"temperature": temperature, "max_tokens": max_tokens, "json_mode": json_mode, **self.params}
        key = cache_key(self.inner.cache_identity, params, [m.model_dump() for m in messages])
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                response = LLMResponse.model_validate(hit)
                response.cached = True
                # Priced now, so a corrected price table applies to cached answers too.
                cost = self._cost(response.prompt_tokens, response.completion_tokens)
                response.metadata.update(cached=True, attempts=0, cost_usd=cost, spent_usd=0.0)
                return response

        def once() -> LLMResponse:
            with self._slots:
                with self._count_lock:
                    self.requests += 1
                return self.inner._chat(messages, json_mode=json_mode, temperature=temperature, max_tokens=max_tokens)

        response, attempts = self.retry.call(once, what=f"{self.name} request")
        cost = self._cost(response.prompt_tokens, response.completion_tokens)
        response.metadata.update(cost_usd=cost)
        if self.cache is not None:
            self.cache.put(key, self.name, response.model_dump(mode="json"))
        response.metadata.update(cached=False, attempts=attempts, spent_usd=cost)
        return response

    def chat_many(
        self, requests: Sequence[dict[str, Any]], *, max_workers: int | None = None
    ) -> list[LLMResponse | LLMError]:
        """Run several ``chat(**request)`` calls on a thread pool bounded by ``max_concurrency``.

        Failed requests come back as their ``LLMError`` in place, so one failure costs one item.
        """

        def one(request: dict[str, Any]) -> LLMResponse | LLMError:
            try:
                return self.chat(**request)
            except LLMError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=max_workers or self.max_concurrency) as pool:
            # each request in a copy of the caller's context: the data subject (memlab.data_subject) goes along
            futures = [pool.submit(contextvars.copy_context().run, one, request) for request in requests]
            return [future.result() for future in futures]

    def close(self) -> None:
        self.inner.close()
        if self.cache is not None:  # its SQLite handle would otherwise stay open for the process
            self.cache.close()
