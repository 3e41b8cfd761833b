"""A deterministic, optionally slow chat model served over a local OpenAI-compatible endpoint, for
tests and benchmarks of LLM readers (no network, no model weights).

``HashChoiceLLM`` answers a multiple-choice prompt with ``<final_answer>(x)`` where the letter is a
hash of the prompt, so the same request always gets the same reply whatever the order or
concurrency of the requests; ``delay`` seconds per request stand in for a hosted model's latency.
``serve(llm)`` starts it on 127.0.0.1 and answers requests concurrently.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memlab.llm.base import LLM, ChatMessage, LLMResponse
from memlab.llm.server import OpenAICompatServer


class HashChoiceLLM(LLM):
    """Replies ``prefix + <final_answer>(letter)``, the letter a hash of the prompt; counts requests."""

    def __init__(
        self,
        name: str = "fake-model",
        *,
        delay: float = 0.0,
        prefix: str = "",
        reply: Callable[[list[ChatMessage]], str] | None = None,
    ) -> None:
        self.name = name
        self.delay = delay
        self.prefix = prefix
        self._reply = reply
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float | None, max_tokens: int | None
    ) -> LLMResponse:
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            if self._reply is not None:
                text = self._reply(messages)
            else:
                digest = hashlib.sha256("\n".join(m.content for m in messages).encode("utf-8")).digest()
                text = f"{self.prefix}<final_answer>({'abcd'[digest[0] % 4]})"
            return LLMResponse(text=text, prompt_tokens=sum(len(m.content) // 4 for m in messages), completion_tokens=8)
        finally:
            with self._lock:
                self.in_flight -= 1


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def serve(llm: LLM, *, model_id: str | None = None) -> OpenAICompatServer:
    """Serve ``llm`` on 127.0.0.1 (a free port), answering requests concurrently; ``.stop()`` ends it."""
    server = OpenAICompatServer(llm, model_id=model_id)
    server.lock = _NoLock()  # type: ignore[assignment]  # a fake model needs no one-at-a-time lock
    return server.start()


def _serve_forever(delay: float, model_id: str, ready: multiprocessing.Queue[str]) -> None:
    server = serve(HashChoiceLLM(model_id, delay=delay))
    ready.put(server.base_url)
    while True:
        time.sleep(3600)


@contextmanager
def served_in_subprocess(delay: float = 0.0, model_id: str = "fake-model") -> Iterator[str]:
    """A ``HashChoiceLLM`` server in its own process (as a hosted model would be: its request
    handling never competes with the caller for the GIL); yields its base URL."""
    context = multiprocessing.get_context("spawn")
    ready: multiprocessing.Queue[str] = context.Queue()
    process = context.Process(target=_serve_forever, args=(delay, model_id, ready), daemon=True)
    process.start()
    try:
        yield ready.get(timeout=120)
    finally:
        process.terminate()
        process.join(10)
