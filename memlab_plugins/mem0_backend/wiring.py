"""How memlab builds mem0: importing it offline, its embedder, LLM and vector-store configs.

Everything here goes through mem0's public configuration (``mem0.Memory.from_config``) or wraps
an object mem0 exposes as an attribute (``embedding_model``, ``llm.langchain_model``); mem0's
code is never patched.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memlab.errors import MemlabError, MissingDependencyError

from .config import DEFAULT_EMBEDDER, MINILM_DIMS, Mem0Config

_import_lock = threading.Lock()


def import_mem0(mem0_home: Path, *, telemetry: bool = False) -> Any:
    """Import mem0 with telemetry off (unless opted in) and its home directory in ``mem0_home``.

    mem0 reads both variables once, at import: a user's explicit ``MEM0_DIR`` wins; telemetry
    follows the config only. If mem0 was already imported by someone else in another state, say so
    instead of silently running with telemetry on.
    """
    with _import_lock:
        if "mem0" not in sys.modules:  # importing any part of mem0 runs its whole package __init__
            if not os.environ.get("MEM0_DIR"):
                mem0_home.mkdir(parents=True, exist_ok=True)
                os.environ["MEM0_DIR"] = str(mem0_home)
            os.environ["MEM0_TELEMETRY"] = "True" if telemetry else "False"
        try:
            import mem0
            from mem0.memory import telemetry as mem0_telemetry
        except ImportError as exc:  # pragma: no cover - mem0ai is a core dependency
            raise MissingDependencyError("mem0ai", "the mem0 backend needs it: pip install 'mem0ai>=2,<3'") from exc
    if bool(mem0_telemetry.MEM0_TELEMETRY) != telemetry:
        state = "on" if mem0_telemetry.MEM0_TELEMETRY else "off"
        raise MemlabError(
            f"mem0 was already imported in this process with telemetry {state}, but the mem0 backend config "
            f"asks for telemetry={telemetry}; mem0 reads MEM0_TELEMETRY only at its first import. "
            "Set MEM0_TELEMETRY=False (or True to opt in) before anything imports mem0."
        )
    return mem0


# ----------------------------------------------------------------------------- vector store
def vector_store_config(config: Mem0Config, root: Path, dims: int) -> dict[str, Any]:
    """The user's mem0 vector_store config, or the crash-safe default.

    Default: mem0's ``qdrant`` provider in embedded mode (``path=``, ``on_disk``): qdrant-client's
    local storage keeps every point in SQLite and commits each upsert and delete, so a write that
    returned survives kill -9; mem0's ``faiss`` provider instead rewrites its index and JSON docstore
    in place on every insert and loses everything when killed mid-write. Embedded qdrant also
    filters by user before the nearest-neighbour search (FAISS filters after it).
    """
    if config.vector_store is not None:
        return dict(config.vector_store)
    return {
        "provider": "qdrant",
        "config": {
            "collection_name": config.collection,
            "path": str(root / "qdrant"),
            "on_disk": True,  # without it mem0 deletes the local path when it opens the store
            "embedding_model_dims": dims,
        },
    }


# ----------------------------------------------------------------------------- embedder
def _memlab_embeddings(embedder: Any) -> Any:
    """A langchain-core ``Embeddings`` over a memlab embedder (mem0's ``langchain`` provider)."""
    from langchain_core.embeddings import Embeddings

    class MemlabEmbeddings(Embeddings):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.inner.embed(list(texts)).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.inner.embed([text], query=True)[0].tolist()

    return MemlabEmbeddings(embedder)


def embedder_config(config: Mem0Config, cache_dir: Path | None) -> tuple[dict[str, Any], int, str]:
    """mem0 embedder config, its vector size, and an identity string stored with the data."""
    if isinstance(config.embedder, dict):
        dims = int(config.embedder["config"]["embedding_dims"])
        ident = f"{config.embedder['provider']}:{config.embedder['config'].get('model')}:{dims}"
        return dict(config.embedder), dims, ident
    if config.embedder == DEFAULT_EMBEDDER:
        from memlab.embedders.sentence_transformer import resolve_model

        model = resolve_model(config.embedder_model or "minilm")
        dims = MINILM_DIMS if config.embedder_model in (None, "minilm") else 0
        mem0_embedder: dict[str, Any] = {"model": model}
        if not dims:  # another model: ask it
            from sentence_transformers import SentenceTransformer

            probe = SentenceTransformer(model, device="cpu")
            dim_of = getattr(probe, "get_embedding_dimension", None) or probe.get_sentence_embedding_dimension
            dims = int(dim_of())
            del probe
        # known dims: mem0 then skips sentence-transformers' deprecated dimension getter (a FutureWarning)
        mem0_embedder["embedding_dims"] = dims
        from memlab.devices import resolve_device

        device = resolve_device(None)  # the run's --device (mem0 loads this model itself, in fp32)
        if device != "cpu":
            mem0_embedder["model_kwargs"] = {"device": device}
        ident = f"huggingface:{Path(model).name}:{dims}"
        return {"provider": "huggingface", "config": mem0_embedder}, dims, ident
    try:
        import langchain.embeddings.base  # noqa: F401  (mem0's langchain provider imports it)
    except ImportError as exc:
        raise MissingDependencyError(
            "langchain",
            f"mem0 embedder {config.embedder!r} goes through mem0's langchain provider: pip install langchain",
        ) from exc
    from memlab.embedders import get_embedder

    inner = get_embedder(config.embedder, config.embedder_model, cache_dir=cache_dir)
    mem0_embedder = {"model": _memlab_embeddings(inner), "embedding_dims": inner.dim}
    return {"provider": "langchain", "config": mem0_embedder}, inner.dim, f"memlab:{inner.name}:{inner.dim}"


def session_batch_embedding(inner: Any) -> Any:
    """Wrap mem0's embedding model so the messages of one session are embedded in one batch.

    ``prefetch`` computes the vectors of a session's texts at once; mem0's own per-message
    ``embed(text, "add")`` calls inside ``add()`` are then served from that batch. Every other call
    goes to the wrapped model unchanged. mem0's code is untouched: the wrapper is an
    ``EmbeddingBase`` set as this backend's ``embedding_model``.
    """
    import numpy as np
    from mem0.embeddings.base import EmbeddingBase

    from memlab.embedders.base import Embedder
    from memlab.embedders.coalescing import CoalescingEmbedder

    class SearchQueries(Embedder):
        """mem0's model as a memlab ``Embedder`` for the query coalescer (one model call at a time)."""

        def __init__(self, owner: Any) -> None:
            super().__init__()
            self.owner = owner
            self.name = "mem0-queries"
            self.dim = int(getattr(owner.wrapped.config, "embedding_dims", 0) or 0)

        def _embed(self, texts: list[str], *, query: bool) -> Any:
            owner = self.owner
            with owner._searches:
                owner._searches_waiting += 1
            try:
                with owner._model:
                    owner.model_calls += 1
                    return np.asarray(owner.wrapped.embed_batch(texts, "search"), dtype=np.float32)
            finally:
                with owner._searches:
                    owner._searches_waiting -= 1
                    owner._searches.notify_all()

    class SessionBatchEmbedding(EmbeddingBase):
        def __init__(self, wrapped: Any) -> None:
            super().__init__(wrapped.config)
            self.wrapped = wrapped
            self.ready: dict[str, Any] = {}
            self.model_calls = 0  # calls that reached the model (benchmarks compare them)
            # Requests of different users run in threads; a Hugging Face tokenizer is not safe for
            # concurrent calls ("Already borrowed"), so one model call at a time ...
            self._model = threading.Lock()
            # ... and searches that arrive while one runs share the next call (as rag's and profile's do).
            self._queries = CoalescingEmbedder(SearchQueries(self))
            # An ingest's next batch lets waiting searches have the model first (at most 1 s).
            self._searches = threading.Condition()
            self._searches_waiting = 0

        def vectors(self, texts: list[str]) -> list[Any]:
            """The vectors of ``texts`` in one model call (nothing is kept), after the searches waiting."""
            if not texts:
                return []
            with self._searches:
                self._searches.wait_for(lambda: self._searches_waiting == 0, timeout=1.0)
            lc_model = getattr(self.wrapped, "langchain_model", None)
            with self._model:
                self.model_calls += 1
                if lc_model is not None and hasattr(lc_model, "embed_documents"):
                    vectors = lc_model.embed_documents(texts)
                else:
                    vectors = self.wrapped.embed_batch(texts, "add")
            if len(vectors) != len(texts):
                raise MemlabError(f"mem0 embedder returned {len(vectors)} vectors for {len(texts)} texts")
            return list(vectors)

        def prefetch(self, texts: list[str]) -> None:
            todo = [t for t in dict.fromkeys(texts) if t not in self.ready]
            self.ready.update(zip(todo, self.vectors(todo)))

        def clear(self) -> None:
            self.ready.clear()

        def embed(self, text: Any, memory_action: Any = None) -> Any:
            if memory_action == "add" and isinstance(text, str) and text in self.ready:
                return self.ready[text]
            if memory_action == "search" and isinstance(text, str):
                return self._queries.embed([text], query=True)[0].tolist()
            with self._model:
                self.model_calls += 1
                return self.wrapped.embed(text, memory_action)

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> Any:
            with self._model:
                self.model_calls += 1
                return self.wrapped.embed_batch(texts, memory_action)

    return SessionBatchEmbedding(inner)


# ----------------------------------------------------------------------------- LLM
# mem0 always builds an LLM; without inference this OpenAI client is never called and points at
# the local machine, so even a stray call could not leave it.
UNUSED_LLM = {"provider": "openai", "config": {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}}


def chat_model_for(llm_config: dict[str, Any] | None, cache_dir: Path | None) -> tuple[Any, Any]:
    """A LangChain chat model over a memlab LLM config, and the memlab LLM to close later."""
    try:
        import langchain.chat_models.base  # noqa: F401  (mem0's langchain provider imports it)
    except ImportError as exc:
        raise MissingDependencyError(
            "langchain",
            "mem0 fact extraction (infer=true) goes through mem0's langchain provider: pip install langchain",
        ) from exc
    from memlab.llm import make_llm
    from memlab.llm.langchain_adapter import MemlabChatModel

    settings = dict(llm_config or {})
    if cache_dir is not None and not settings.get("cache_dir"):
        settings["cache_dir"] = str(cache_dir)  # the run's cache, never a process-wide default
    owned = make_llm(settings)
    return MemlabChatModel(llm=owned, json_mode=True), owned


def check_chat_model(chat_model: Any) -> None:
    from langchain_core.language_models.chat_models import BaseChatModel

    if not isinstance(chat_model, BaseChatModel):
        raise MemlabError(f"chat_model must be a LangChain BaseChatModel, got {type(chat_model).__name__}")


class UsageRecordingModel:
    """Stands in for the chat model inside mem0's ``langchain`` LLM and reports each reply's usage.

    mem0's provider calls ``invoke`` (and ``bind_tools`` for graph memory) and reads only the reply
    text, so the token counts LangChain puts on the ``AIMessage`` (``usage_metadata``) and memlab's
    cost (``response_metadata["cost_usd"]``) would be lost; ``record(prompt, completion, cost)``
    receives them instead.
    """

    def __init__(self, inner: Any, record: Callable[[int, int, float], None]) -> None:
        self.inner = inner
        self.record = record

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        reply = self.inner.invoke(*args, **kwargs)
        usage = getattr(reply, "usage_metadata", None) or {}
        cost = (getattr(reply, "response_metadata", None) or {}).get("cost_usd") or 0.0
        self.record(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), float(cost))
        return reply

    def bind_tools(self, *args: Any, **kwargs: Any) -> UsageRecordingModel:
        return UsageRecordingModel(self.inner.bind_tools(*args, **kwargs), self.record)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
