"""The ``langmem`` backend: LangMem's memory store manager (``langmem.create_memory_store_manager``)
behind the memlab ``Memory`` interface.

Each ingested session part (or each window of ``infer_window`` messages) is handed to the manager,
which searches the user's existing memories in the store, asks the LLM (tool calls, through
trustcall) to insert new memories and patch or remove outdated ones, and writes the result to the
store. ``retrieve`` is the store's semantic search over the user's managed memories.

The store is a LangGraph ``BaseStore`` kept in ``<data_dir>/memlab_langmem_store.sqlite``
(``store.SQLiteMemoryStore``: LangGraph's own ``SqliteStore`` needs SQLite extensions memlab's
Python lacks), namespace ``("memories", <user id>)``, vectors of a memlab embedder (MiniLM by
default). LangMem calls tools, which memlab's JSON-mode LLM stack does not offer, so the chat model
is LangChain's ``ChatOpenAI`` on the configured endpoint (or the ``langchain_class`` of the llm
config, or ``chat_model=`` in Python); its calls, tokens and cost are counted by a callback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from memlab.errors import MemlabError, MissingDependencyError, NotFoundError
from memlab.memory import Capability
from memlab.types import MemoryItem, Retrieval, Session
from memlab_plugins.llm_systems import ExtractingConfig, ExtractingMemory, LLMUsage, part_source

LEDGER_FILE = "memlab_langmem.sqlite"
STORE_FILE = "memlab_langmem_store.sqlite"


class LangMemConfig(ExtractingConfig):
    infer_window: int | None = Field(
        default=None, ge=1, description="messages per memory-manager call (default: the whole ingested session part)"
    )
    query_limit: int = Field(default=5, ge=1, description="existing memories the manager sees per call (langmem's)")
    enable_deletes: bool = Field(default=True, description="let the manager remove outdated memories (langmem's)")
    instructions: str | None = Field(default=None, description="the manager's instructions (default: langmem's)")
    context: Literal["lines"] = Field(default="lines", description="how retrieved memories are shown: one per line")


def import_langmem() -> Any:
    try:
        import langmem
        from langchain_openai import ChatOpenAI  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "langmem",
            "the langmem backend needs langmem, langgraph and langchain-openai: pip install 'memlab[langmem]'",
        ) from exc
    return langmem


def usage_callback(usage: LLMUsage, price: Any | None) -> Any:
    """A LangChain callback that adds every chat-model call langmem makes, with its tokens and
    (memlab-priced) cost, to ``usage``."""
    from langchain_core.callbacks import BaseCallbackHandler

    class UsageCallback(BaseCallbackHandler):
        def on_llm_end(self, response: Any, **kwargs: Any) -> None:
            prompt = completion = 0
            for generation in (g for batch in response.generations for g in batch):
                tokens = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                prompt += int(tokens.get("input_tokens", 0))
                completion += int(tokens.get("output_tokens", 0))
            usage.add(prompt, completion, price.cost(prompt, completion) if price else 0.0)

    return UsageCallback()


def chat_model_for(settings: Mapping[str, Any]) -> tuple[Any, Any]:
    """A tool-calling LangChain chat model for memlab LLM settings, and the memlab price of its model."""
    from langchain_openai import ChatOpenAI

    from memlab.llm.config import LLMConfig, _import_class

    config = LLMConfig.model_validate(dict(settings))
    provider = config.resolved_provider()
    if provider == "langchain" and config.langchain_class:
        kwargs = dict(config.langchain_kwargs)
        if config.model and "model" not in kwargs:
            kwargs["model"] = config.model
        return _import_class(config.langchain_class)(**kwargs), config.price_for(config.model)
    if provider != "openai":
        raise MemlabError(
            f"langmem calls tools through LangChain: llm.provider {provider!r} cannot serve it; use an "
            "OpenAI-compatible endpoint (llm.base_url) or a LangChain chat model class (llm.langchain_class)"
        )
    # memlab's OpenAI-compatible client resolves what LangChain's needs as memlab does everywhere:
    # $OPENAI_BASE_URL / $OPENAI_API_KEY, any key for a local server, the one model a server serves.
    from memlab.llm.openai_compat import OpenAICompatLLM

    endpoint = OpenAICompatLLM(
        config.model,
        base_url=config.base_url,
        api_key=config.api_key.get_secret_value() if config.api_key else None,
        timeout=config.timeout,
    )
    api_key = endpoint._client.api_key
    endpoint.close()
    model = ChatOpenAI(
        model=endpoint.model,
        base_url=endpoint.base_url,
        api_key=api_key,  # type: ignore[arg-type]
        temperature=config.temperature,
        timeout=config.timeout,
        max_retries=config.max_retries,
        # request parameters ChatOpenAI declares (max_tokens, seed, top_p ...) as fields, the rest as model_kwargs
        **{k: v for k, v in config.extra_params.items() if k in ChatOpenAI.model_fields},
        model_kwargs={k: v for k, v in config.extra_params.items() if k not in ChatOpenAI.model_fields},
    )
    return model, config.price_for(endpoint.model)


class LangMemMemory(ExtractingMemory):
    name = "langmem"
    description = (
        "LangMem (langmem): an LLM memory manager that inserts, patches and removes memories in a LangGraph "
        "store (SQLite in the data dir); retrieval is the store's semantic search."
    )
    Config = LangMemConfig
    config: LangMemConfig
    capabilities = frozenset({Capability.LIST, Capability.UPDATE, Capability.DELETE, Capability.PERSIST})
    ledger_file = LEDGER_FILE

    def __init__(
        self,
        config: LangMemConfig | Mapping[str, Any] | None = None,
        *,
        data_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        chat_model: Any | None = None,
    ) -> None:
        """``chat_model``: a LangChain chat model that supports tool calling (overrides ``config.llm``)."""
        self._store: Any = None
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir, model=chat_model)

    def _build(self, model: Any | None) -> None:
        from memlab.embedders import get_embedder

        from .store import SQLiteMemoryStore

        cfg = self.config
        langmem = import_langmem()
        embedder = get_embedder(cfg.embedder, cfg.embedder_model, cache_dir=self.cache_dir)
        self.ledger.check_meta("embedder", f"{embedder.name}:{embedder.dim}", "langmem embedder")
        price = None
        if model is None:
            model, price = chat_model_for(cfg.llm or {})
        self._callback = usage_callback(self.usage, price)
        self._store = SQLiteMemoryStore(self.root / STORE_FILE, embedder)
        options: dict[str, Any] = {"instructions": cfg.instructions} if cfg.instructions else {}
        self.manager = langmem.create_memory_store_manager(
            model,
            namespace=("memories", "{langgraph_user_id}"),
            store=self._store,
            query_limit=cfg.query_limit,
            enable_deletes=cfg.enable_deletes,
            **options,
        )

    @property
    def store(self) -> Any:
        if self._store is None:
            raise MemlabError("the langmem backend is closed")
        return self._store

    # ------------------------------------------------------------------ ingest
    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        turns = [
            (first_turn + i, m) for i, m in enumerate(session.messages) if m.role != "system" and m.content.strip()
        ]
        window = self.config.infer_window or max(len(turns), 1)
        before = self.usage.snapshot()
        try:
            for start in range(0, len(turns), window):
                self._manage(session, turns[start : start + window], user_id)
        finally:
            self.record_usage_since(before)

    def _manage(self, session: Session, turns: list[tuple[int, Any]], user_id: str) -> None:
        from pydantic import ValidationError

        messages = [{"role": m.role, "content": m.content} for _, m in turns]
        first, last = turns[0][0], turns[-1][0]
        self.extraction.windows += 1
        try:
            puts = self.manager.invoke(
                {"messages": messages},
                config={"configurable": {"langgraph_user_id": user_id}, "callbacks": [self._callback]},
            )
        except Exception as exc:
            refused = _refusal(exc)
            # trustcall's validation of the tool calls (pydantic's ValueError) on a reply it cannot use
            unreadable = refused is None and isinstance(exc, (ValidationError, ValueError))
            self.skip_or_raise(
                exc, f"session {session.id!r}, turns {first}-{last}", refused=refused, unreadable=unreadable
            )
            return
        part = part_source(session, first, last - first + 1)
        known = self.ledger.sources([p["key"] for p in puts])
        sources = {}
        for put in puts:
            source = dict(part)
            if put["key"] in known:  # an updated memory keeps the turns it came from before
                earlier = known[put["key"]][1]
                source["turns"] = earlier.get("turns", []) + part["turns"]
            sources[put["key"]] = source
        self.ledger.add_sources(user_id, sources)

    # ------------------------------------------------------------------ retrieve
    def _namespace(self, user_id: str) -> tuple[str, ...]:
        return ("memories", user_id)

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        if not query.strip():
            return Retrieval()
        found = self.store.search(self._namespace(user_id), query=query, limit=k)
        items = self._items(user_id, found)
        return Retrieval(items=items, context="\n".join(f"- {item.text}" for item in items))

    def _items(self, user_id: str, found: list[Any]) -> list[MemoryItem]:
        from .store import memory_text

        sources = self.ledger.sources([item.key for item in found])
        return [
            MemoryItem(
                id=item.key,
                text=memory_text(item.value),
                score=getattr(item, "score", None),
                source=sources[item.key][1] if item.key in sources else {},
                metadata={
                    "kind": item.value.get("kind"),
                    "created_at": item.created_at.isoformat(),
                    "updated_at": item.updated_at.isoformat(),
                },
            )
            for item in found
        ]

    # ------------------------------------------------------------------ capabilities
    def _list(self, user_id: str) -> list[MemoryItem]:
        namespace = self._namespace(user_id)
        found = self.store.search(namespace, limit=self.store.count(namespace) + 1)
        return list(reversed(self._items(user_id, found)))  # oldest first

    def _owned(self, item_id: str, user_id: str) -> Any:
        item = self.store.get(self._namespace(user_id), item_id) if isinstance(item_id, str) and item_id else None
        if item is None:
            raise NotFoundError(f"no memory {item_id!r} for user {user_id!r}")
        return item

    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        item = self._owned(item_id, user_id)
        value = {**item.value, "content": {**(item.value.get("content") or {}), "content": text}}
        self.store.put(self._namespace(user_id), item_id, value)
        self.store.vacuum()  # the old text leaves the file
        return self._items(user_id, [self._owned(item_id, user_id)])[0]

    def _delete(self, item_id: str, *, user_id: str) -> None:
        self._owned(item_id, user_id)
        self.store.delete(self._namespace(user_id), item_id)
        self.ledger.drop_sources([item_id])
        self.store.vacuum()

    def _reset(self, user_id: str) -> None:
        self.store.drop_namespace(self._namespace(user_id))
        self.ledger.forget_user(user_id)
        self.store.vacuum()

    def _export(self, user_id: str) -> dict[str, Any]:
        return {
            "items": [item.model_dump(mode="json") for item in self._list(user_id)],
            "sessions": self.ledger.sessions(user_id),
            "extraction_stats": self.extraction_stats(),
        }

    # ------------------------------------------------------------------ lifetime
    def _close_library(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def _refusal(exc: BaseException) -> str | None:
    """Why the endpoint refused this one request (a 4xx other than auth / not found), if it did."""
    try:
        import openai
    except ImportError:  # pragma: no cover - langchain-openai needs it
        return None
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError)):
            return None
        if isinstance(cause, openai.APIStatusError) and 400 <= cause.status_code < 500 and cause.status_code != 429:
            return f"request rejected ({cause.status_code}): {str(cause)[:300]}"
        cause = cause.__cause__ or cause.__context__
    return None
