"""The objects memlab hands to graphiti-core: its LLM client, embedder, cross-encoder and Kuzu driver.

All are subclasses of graphiti-core's public base classes (``LLMClient``, ``EmbedderClient``,
``CrossEncoderClient``, ``KuzuDriver``); graphiti's code is never patched.

* ``MemlabLLMClient``: graphiti's requests go through memlab's LLM stack (any OpenAI-compatible
  endpoint, LangChain class or local model, with memlab's cache, retries and prices). graphiti's own
  ``LLMClient.generate_response`` appends the reply's JSON schema to the prompt ("Respond with a JSON
  object in the following format: ...", graphiti's path for clients without native structured
  output); the request asks for JSON mode. Calls, tokens and cost are counted into the backend's
  ``LLMUsage``: graphiti sends them from worker threads and tasks, not from the thread that called ``ingest``.
* ``MemlabEmbedder`` / ``EmbeddingCrossEncoder``: a memlab embedder (MiniLM by default).
* ``MemlabKuzuDriver``: graphiti's Kuzu driver on a database file with a bounded buffer pool and
  address space, the full-text indexes graphiti's Kuzu search needs, and two gaps of graphiti-core
  0.31 filled: ``KuzuDriver`` lacks the ``_database`` attribute ``Graphiti.add_episode`` reads, and its
  ``build_indices_and_constraints`` creates no full-text index (searches then fail with "Table
  RelatesToNode_ doesn't have an index with name edge_name_and_fact").
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.kuzu_driver import KuzuDriver
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.graph_queries import get_fulltext_indices
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.llm_client.config import DEFAULT_MAX_TOKENS, LLMConfig, ModelSize
from pydantic import BaseModel

from memlab.embedders import Embedder
from memlab.errors import MemlabError
from memlab.llm.base import LLM, ChatMessage
from memlab_plugins.llm_systems import LLMUsage

_CODE_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*|\s*```$")
_FTS_INDEX = re.compile(r"CREATE_FTS_INDEX\('(?P<table>[^']+)', '(?P<name>[^']+)'")
KUZU_BUFFER_POOL = 256 << 20  # bytes of page cache per open user graph
KUZU_MAX_DB_SIZE = 1 << 38  # virtual address space reserved per database (kuzu's default is 8 TB)


class UnreadableReply(MemlabError):
    """The model's reply to one of graphiti's requests is not the JSON object graphiti asked for."""


class MemlabLLMClient(LLMClient):
    def __init__(self, llm: LLM, usage: LLMUsage, *, max_tokens: int | None = None) -> None:
        super().__init__(LLMConfig(model=getattr(llm, "name", "memlab"), temperature=0.0), cache=False)
        self.llm = llm
        self.usage = usage
        self.reply_max_tokens = max_tokens

    async def _generate_response(
        self,
        messages: list[Any],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        model_size: ModelSize = ModelSize.medium,
        **overrides: Any,
    ) -> dict[str, Any]:
        chat = [ChatMessage(role=m.role, content=m.content) for m in messages if m.role in ("system", "user")]
        # graphiti asks for up to 16k reply tokens; memlab leaves the budget to the endpoint (or llm.extra_params)
        response = await asyncio.to_thread(
            self.llm.chat, chat, json_mode=True, temperature=self.temperature, max_tokens=self.reply_max_tokens
        )
        self.usage.add(
            response.prompt_tokens, response.completion_tokens, float(response.metadata.get("cost_usd") or 0.0)
        )
        text = _CODE_FENCE.sub("", response.text.strip())
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            what = response_model.__name__ if response_model else "JSON"
            raise UnreadableReply(f"the reply to graphiti's {what} request is not JSON: {text[:200]!r}") from exc
        if not isinstance(parsed, dict):
            raise UnreadableReply(f"the reply to graphiti's request is a JSON {type(parsed).__name__}, not an object")
        return parsed


class MemlabEmbedder(EmbedderClient):
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        text = input_data if isinstance(input_data, str) else next(iter(input_data), "")  # graphiti: the first
        return [float(x) for x in self.embedder.embed([str(text)])[0]]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        if not input_data_list:
            return []
        return [[float(x) for x in row] for row in self.embedder.embed(list(input_data_list))]


class EmbeddingCrossEncoder(CrossEncoderClient):
    """``reranker: cross_encoder`` without a reranking model: cosine of the memlab embedder."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        if not passages:
            return []
        query_vector = self.embedder.embed([query], query=True)[0]
        scores = np.asarray(self.embedder.embed(passages)) @ query_vector
        return sorted(zip(passages, (float(s) for s in scores)), key=lambda pair: -pair[1])


class MemlabKuzuDriver(KuzuDriver):
    """graphiti's Kuzu driver on ``path`` (one database file per user); see the module docstring."""

    def __init__(self, path: Path) -> None:
        import kuzu

        super().__init__(db=":memory:", max_concurrent_queries=1)  # graphiti's setup of its operations
        self.db.close()  # then the real, bounded database in its place
        self.db = kuzu.Database(str(path), buffer_pool_size=KUZU_BUFFER_POOL, max_db_size=KUZU_MAX_DB_SIZE)
        self.setup_schema()
        self.client = kuzu.AsyncConnection(self.db, max_concurrent_queries=1)
        self._database = ""  # read by Graphiti._resolve_request_scope; group ids are filters here
        self.path = path

    async def build_indices_and_constraints(self, delete_existing: bool = False) -> None:
        rows, _, _ = await self.execute_query("CALL SHOW_INDEXES() RETURN *")
        have = {(r.get("table_name"), r.get("index_name")) for r in rows if isinstance(r, dict)}
        for query in get_fulltext_indices(self.provider):
            match = _FTS_INDEX.search(query)
            if match and (match.group("table"), match.group("name")) not in have:
                await self.execute_query(query)

    def close_database(self) -> None:
        self.client.close()
        self.db.close()
