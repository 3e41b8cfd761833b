"""Retries with exponential backoff for transient LLM errors (rate limits, timeouts, 5xx)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from memlab.llm.errors import LLMRequestFailed, TransientLLMError

T = TypeVar("T")


class RetryPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_retries: int = Field(default=5, ge=0, description="retries after the first attempt")
    initial_backoff: float = Field(default=1.0, ge=0, description="seconds before the first retry")
    max_backoff: float = Field(default=60.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    jitter: float = Field(default=0.25, ge=0, le=1, description="random extra fraction, spreads clients apart")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_backoff)  # the server knows best, within our bound
        base = min(self.max_backoff, self.initial_backoff * self.multiplier**attempt)
        return base * (1 + self.jitter * random.random())

    def call(
        self, fn: Callable[[], T], *, what: str = "LLM request", sleep: Callable[[float], None] = time.sleep
    ) -> tuple[T, int]:
        """Run ``fn``, retrying on ``TransientLLMError``; returns (result, attempts made)."""
        for attempt in range(self.max_retries + 1):
            try:
                return fn(), attempt + 1
            except TransientLLMError as exc:
                if attempt == self.max_retries:
                    raise LLMRequestFailed(f"{what} failed after {attempt + 1} attempts: {exc}") from exc
                sleep(self.delay(attempt, exc.retry_after))
        raise AssertionError("unreachable")
