"""LLMConfig: one config for every provider, and ``make_llm`` that builds a ready LLM from it.

The run config and the CLI fill it: ``--llm.base-url http://127.0.0.1:8000/v1 --llm.model m``
lands in the reader config's ``llm`` dict, which validates as an ``LLMConfig``.
"""

from __future__ import annotations

import pkgutil
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from memlab.devices import resolve_device, run_device
from memlab.llm.base import LLM
from memlab.llm.cache import ResponseCache, default_cache_dir
from memlab.llm.errors import LLMConfigError
from memlab.llm.managed import ManagedLLM
from memlab.llm.pricing import DEFAULT_PRICES, Price, find_price
from memlab.llm.retry import RetryPolicy

Provider = Literal["auto", "openai", "langchain", "hf"]


class LLMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: Provider = Field(
        default="auto",
        description="auto: 'langchain' if langchain_class is set, 'hf' if model is a local path or gguf_file "
        "is set, else 'openai' (any OpenAI-compatible endpoint)",
    )
    model: str | None = Field(default=None, description="model name, or a local model directory / .gguf file")
    # OpenAI-compatible endpoints (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio ...)
    base_url: str | None = Field(default=None, description="default: $OPENAI_BASE_URL, else api.openai.com")
    api_key: SecretStr | None = Field(default=None, description="default: $OPENAI_API_KEY")
    timeout: float = Field(default=120.0, gt=0, description="seconds per request")
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    extra_params: dict[str, Any] = Field(
        default_factory=dict, description="more request parameters (top_p, seed, extra_body ...)"
    )
    # Any LangChain chat model
    langchain_class: str | None = Field(default=None, description="'module:Class' of a BaseChatModel")
    langchain_kwargs: dict[str, Any] = Field(default_factory=dict)
    # Local Hugging Face causal LM (transformers), GGUF included
    gguf_file: str | None = Field(default=None, description="GGUF file name inside the model directory")
    device: str = Field(
        default="auto", description="auto: cuda if available, else cpu; unset: the run's --device, else auto"
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    # Sampling
    temperature: float = Field(default=0.0, ge=0)
    # Reliability and cost
    max_retries: int = Field(default=5, ge=0)
    initial_backoff: float = Field(default=1.0, ge=0)
    max_backoff: float = Field(default=60.0, ge=0)
    max_concurrency: int = Field(default=4, ge=1, description="requests in flight at once")
    cache: bool = Field(default=True, description="persistent response cache (reruns cost nothing)")
    cache_dir: str | None = Field(
        default=None, description="default: the run's cache dir, $MEMLAB_CACHE_DIR or ~/.cache/memlab"
    )
    price: Price | None = Field(default=None, description="price of this model; default: looked up in prices")
    prices: dict[str, Price] = Field(default_factory=dict, description="extra/overriding price table entries")

    def resolved_provider(self) -> str:
        if self.provider != "auto":
            return self.provider
        if self.langchain_class:
            return "langchain"
        if self.gguf_file or (self.model and not self.base_url and _is_local_model(self.model)):
            return "hf"
        return "openai"

    def price_for(self, model: str | None) -> Price | None:
        if self.price is not None:
            return self.price
        return find_price(model, {**DEFAULT_PRICES, **self.prices})

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries, initial_backoff=self.initial_backoff, max_backoff=self.max_backoff
        )


def _is_local_model(model: str) -> bool:
    return model.endswith(".gguf") or Path(model).expanduser().exists()


# Local models are heavy: one instance per (path, file, device, dtype) per process.
_local_models: dict[tuple[str, str | None, str, str], LLM] = {}
_local_lock = threading.Lock()


def build_provider(config: LLMConfig) -> LLM:
    """The bare provider LLM for ``config`` (no cache, retries or pricing)."""
    provider = config.resolved_provider()
    if provider == "openai":
        from memlab.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM(
            model=config.model,
            base_url=config.base_url,
            api_key=config.api_key.get_secret_value() if config.api_key else None,
            timeout=config.timeout,
            max_tokens_param=config.max_tokens_param,
            extra_params=config.extra_params,
        )
    if provider == "langchain":
        if not config.langchain_class:
            raise LLMConfigError("llm.provider 'langchain' needs llm.langchain_class ('module:Class')")
        from memlab.llm.langchain_adapter import LangChainLLM

        kwargs = dict(config.langchain_kwargs)
        if config.model and "model" not in kwargs:
            kwargs["model"] = config.model
        return LangChainLLM(_import_class(config.langchain_class)(**kwargs))
    if provider == "hf":
        if not config.model:
            raise LLMConfigError("llm.provider 'hf' needs llm.model (a local directory, a .gguf file or a hub id)")
        from memlab.llm.hf_local import HFLocalLLM

        device = config.device
        if "device" not in config.model_fields_set and run_device() is not None:
            device = run_device() or device  # the run's --device, where llm.device is not set
        device = resolve_device(device)  # "cuda" and "cuda:0" (and auto) name one loaded model
        key = (config.model, config.gguf_file, device, config.dtype)
        with _local_lock:
            if key not in _local_models:
                _local_models[key] = HFLocalLLM(
                    config.model, gguf_file=config.gguf_file, device=device, dtype=config.dtype
                )
            return _local_models[key]
    raise LLMConfigError(f"unknown llm.provider {provider!r}")


def release_local_models() -> None:
    """Drop the process-wide local models (frees their memory once nothing else holds them)."""
    with _local_lock:
        _local_models.clear()


def _import_class(target: str) -> Any:
    if ":" not in target:
        raise LLMConfigError(f"llm.langchain_class {target!r}: expected 'module:Class'")
    try:
        return pkgutil.resolve_name(target)
    except ImportError as exc:
        raise LLMConfigError(f"llm.langchain_class {target!r}: cannot import it ({exc})") from exc
    except (AttributeError, ValueError) as exc:
        raise LLMConfigError(f"llm.langchain_class {target!r}: no such class ({exc})") from exc


def make_llm(config: LLMConfig | dict[str, Any] | None = None, *, llm: LLM | Any | None = None) -> ManagedLLM:
    """A ready LLM for ``config``: the provider wrapped in cache, retries, concurrency and pricing.

    ``llm`` supplies the provider directly instead (a memlab ``LLM`` or any LangChain
    ``BaseChatModel``); the config still sets cache, retries and prices.
    """
    if not isinstance(config, LLMConfig):
        config = LLMConfig.model_validate(config or {})
    if llm is None:
        inner = build_provider(config)
    elif isinstance(llm, LLM):
        inner = llm
    else:
        from memlab.llm.langchain_adapter import LangChainLLM

        inner = LangChainLLM(llm)
    if isinstance(inner, ManagedLLM):
        return inner
    cache = ResponseCache(config.cache_dir or default_cache_dir()) if config.cache else None
    model = getattr(inner, "model", None) or config.model
    return ManagedLLM(
        inner,
        cache=cache,
        retry=config.retry_policy(),
        max_concurrency=config.max_concurrency,
        price=config.price_for(model),
        params=_answer_params(config),
    )


def _answer_params(config: LLMConfig) -> dict[str, Any]:
    """Config fields that change a response and are not already in the provider's name."""
    params: dict[str, Any] = {}
    if config.extra_params:
        params["extra_params"] = config.extra_params
    if config.langchain_kwargs:
        params["langchain_kwargs"] = config.langchain_kwargs
    return params
