"""LLM plumbing without any provider: pricing, retries, the response cache, ManagedLLM, config."""

from __future__ import annotations

import threading
import time

import pytest

from memlab.llm import (
    LLM,
    ChatMessage,
    LLMConfig,
    LLMConfigError,
    LLMRequestFailed,
    LLMResponse,
    ManagedLLM,
    Price,
    ResponseCache,
    RetryPolicy,
    TransientLLMError,
    make_llm,
)
from memlab.llm.cache import cache_key
from memlab.llm.pricing import DEFAULT_PRICES, find_price


class Scripted(LLM):
    """Answers from a script; 'transient' entries raise a retryable error. ``closed`` once closed."""

    def __init__(self, script: list[str] | None = None, name: str = "scripted:m") -> None:
        self.script = list(script or [])
        self.name = name
        self.calls: list[list[ChatMessage]] = []
        self.closed = False

    def _chat(self, messages, *, json_mode, temperature, max_tokens):
        self.calls.append(messages)
        item = self.script.pop(0) if self.script else "ok"
        if item == "transient":
            raise TransientLLMError("busy", retry_after=0.0)
        return LLMResponse(text=item, prompt_tokens=1000, completion_tokens=10)

    def close(self):
        self.closed = True


FAST = RetryPolicy(max_retries=2, initial_backoff=0.0, jitter=0.0)
HELLO = [{"role": "user", "content": "hello"}]


def test_price_lookup_exact_prefix_and_provider_prefix():
    assert find_price("gpt-4o-mini", DEFAULT_PRICES) == DEFAULT_PRICES["gpt-4o-mini"]
    assert find_price("gpt-4o-mini-2024-07-18", DEFAULT_PRICES) == DEFAULT_PRICES["gpt-4o-mini"]
    assert find_price("openai/gpt-4o", DEFAULT_PRICES) == DEFAULT_PRICES["gpt-4o"]
    assert find_price("llama3", DEFAULT_PRICES) is None
    assert Price(input_per_million=2.0, output_per_million=8.0).cost(1_000_000, 500_000) == pytest.approx(6.0)


def test_retry_delays_grow_exponentially_and_honour_retry_after():
    policy = RetryPolicy(initial_backoff=1.0, multiplier=2.0, max_backoff=5.0, jitter=0.0)
    assert [policy.delay(a) for a in range(4)] == [1.0, 2.0, 4.0, 5.0]
    assert policy.delay(0, retry_after=3.0) == 3.0
    assert policy.delay(0, retry_after=100.0) == 5.0


def test_retry_gives_up_after_max_retries():
    slept: list[float] = []
    policy = RetryPolicy(max_retries=3, initial_backoff=0.5, jitter=0.0)

    def always():
        raise TransientLLMError("429")

    with pytest.raises(LLMRequestFailed, match="after 4 attempts"):
        policy.call(always, sleep=slept.append)
    assert slept == [0.5, 1.0, 2.0]


def test_managed_retries_then_succeeds_and_prices(tmp_path):
    inner = Scripted(["transient", "transient", "fine"], name="scripted:gpt-4o-mini")
    llm = ManagedLLM(inner, retry=FAST, price=DEFAULT_PRICES["gpt-4o-mini"])
    response = llm.chat(HELLO)
    assert response.text == "fine"
    assert response.metadata["attempts"] == 3
    assert response.metadata["cost_usd"] == pytest.approx((1000 * 0.15 + 10 * 0.60) / 1e6)
    with pytest.raises(LLMRequestFailed):
        ManagedLLM(Scripted(["transient"] * 5), retry=FAST).chat(HELLO)


def test_cache_hit_on_rerun_in_a_new_process_state(tmp_path):
    first = Scripted(["answer one"])
    llm = ManagedLLM(
        first, cache=ResponseCache(tmp_path), retry=FAST, price=Price(input_per_million=1, output_per_million=1)
    )
    a = llm.chat(HELLO)
    assert not a.cached and a.metadata["spent_usd"] > 0
    # A new cache handle on the same directory: what a rerun or a resumed run sees.
    second = Scripted(["must not be used"])
    again = ManagedLLM(
        second, cache=ResponseCache(tmp_path), retry=FAST, price=Price(input_per_million=1, output_per_million=1)
    )
    b = again.chat(HELLO)
    assert b.cached and b.text == "answer one" and second.calls == []
    assert b.prompt_tokens == 1000 and b.metadata["cost_usd"] == a.metadata["cost_usd"]
    assert b.metadata["spent_usd"] == 0.0
    # Any change of parameters or prompt is a different key.
    again.chat(HELLO, max_tokens=5)
    again.chat([{"role": "user", "content": "hello!"}])
    assert len(second.calls) == 2


def test_failures_are_not_cached(tmp_path):
    cache = ResponseCache(tmp_path)
    with pytest.raises(LLMRequestFailed):
        ManagedLLM(Scripted(["transient"] * 3), cache=cache, retry=FAST).chat(HELLO)
    assert len(cache) == 0


def test_cache_key_is_stable_and_order_free():
    assert cache_key("p:m", {"a": 1, "b": 2}, ["x"]) == cache_key("p:m", {"b": 2, "a": 1}, ["x"])
    assert cache_key("p:m", {"a": 1}, ["x"]) != cache_key("p:m2", {"a": 1}, ["x"])


def test_concurrency_is_bounded():
    active, peak, lock = [0], [0], threading.Lock()

    class Slow(LLM):
        name = "slow:m"

        def _chat(self, messages, *, json_mode, temperature, max_tokens):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.05)
            with lock:
                active[0] -= 1
            return LLMResponse(text=messages[0].content)

    llm = ManagedLLM(Slow(), max_concurrency=2, retry=FAST)
    out = llm.chat_many([{"messages": [{"role": "user", "content": str(i)}]} for i in range(8)], max_workers=8)
    assert [r.text for r in out] == [str(i) for i in range(8)]
    assert peak[0] == 2


def test_provider_resolution(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    assert LLMConfig(model="gpt-4o-mini").resolved_provider() == "openai"
    assert LLMConfig(model=str(gguf)).resolved_provider() == "hf"
    assert LLMConfig(model=str(tmp_path)).resolved_provider() == "hf"
    assert LLMConfig(model=str(tmp_path), base_url="http://x/v1").resolved_provider() == "openai"
    assert LLMConfig(langchain_class="a:B").resolved_provider() == "langchain"
    with pytest.raises(ValueError):
        LLMConfig(modle="typo")


def test_api_key_is_not_dumped():
    dumped = LLMConfig(model="m", api_key="sk-secret").model_dump_json()
    assert "sk-secret" not in dumped


def test_make_llm_config_errors(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        make_llm({"model": "gpt-4o-mini", "cache": False})
    with pytest.raises(LLMConfigError, match="module:Class"):
        make_llm({"langchain_class": "nothing", "cache": False})
    with pytest.raises(LLMConfigError, match="cannot import"):
        make_llm({"langchain_class": "no_such_module_x:Chat", "cache": False})


def test_make_llm_wraps_a_given_llm_with_cache(tmp_path):
    inner = Scripted(["x"])
    llm = make_llm({"cache_dir": str(tmp_path), "price": {"input_per_million": 1, "output_per_million": 2}}, llm=inner)
    assert isinstance(llm, ManagedLLM) and llm.name == "scripted:m"
    assert llm.chat(HELLO).metadata["cost_usd"] == pytest.approx((1000 + 20) / 1e6)
    assert llm.chat(HELLO).cached


def test_cached_answers_are_priced_with_the_current_table(tmp_path):
    ManagedLLM(Scripted(["a"]), cache=ResponseCache(tmp_path), retry=FAST).chat(HELLO)
    priced = ManagedLLM(
        Scripted([]), cache=ResponseCache(tmp_path), retry=FAST, price=Price(input_per_million=1, output_per_million=0)
    )
    response = priced.chat(HELLO)
    assert response.cached and response.metadata["cost_usd"] == pytest.approx(1000 / 1e6)
    assert priced.requests == 0


def test_close_releases_the_cache_file_and_the_provider(tmp_path):
    import sqlite3

    inner = Scripted(["a"])
    llm = make_llm({"cache_dir": str(tmp_path)}, llm=inner)
    llm.chat(HELLO)
    llm.close()
    assert inner.closed
    with pytest.raises(sqlite3.ProgrammingError):  # the SQLite handle is closed, not leaked
        llm.cache.get("any")


def test_cache_identity_defaults_to_the_name() -> None:
    from memlab.llm.base import LLM, LLMResponse

    class Named(LLM):
        name = "openai:some-model"

        def _chat(self, messages, *, json_mode, temperature, max_tokens):  # type: ignore[no-untyped-def]
            return LLMResponse(text="x")

    assert Named().cache_identity == "openai:some-model"


def test_caches_opened_at_once_on_a_new_file_all_open(tmp_path):
    """Two readers of one run open the response cache together: SQLite fails one of two connections
    switching a new file to WAL at once without waiting ("database is locked", seen in the README's
    SmolLM2 run); every opener gets the cache."""
    errors: list[BaseException] = []

    def open_and_write(path, n):
        try:
            ResponseCache(path).put(f"k{n}", "test", "v")
        except Exception as exc:  # noqa: BLE001 - collected for the assert
            errors.append(exc)

    for round_ in range(150):
        path = tmp_path / f"run{round_}"
        threads = [threading.Thread(target=open_and_write, args=(path, n)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
