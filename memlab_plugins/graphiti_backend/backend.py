"""The ``graphiti`` backend: the real graphiti-core library behind the memlab ``Memory`` interface.

Each ingested session part is one Graphiti *episode* (its messages as ``role: text`` lines, dated
by the session's timestamp when it has one, else by the time of ingest); Graphiti's LLM extracts
entities and facts (edges), deduplicates them against the user's graph and, when a new fact
contradicts an old one, sets the old fact's ``invalid_at`` instead of deleting it. ``retrieve`` is
Graphiti's hybrid search (BM25 + cosine, ``reranker`` rrf by default) over the user's facts; each
item is a fact with its validity interval and the episodes it came from (session and turns), and
the context lists the facts with their dates, invalidated ones marked (or left out: ``invalidated:
hide``).

Storage: one embedded Kuzu database file per user under ``<data_dir>/graphs`` (Graphiti maps a
group id to its own graph on FalkorDB the same way; FalkorDB Lite needs Python >= 3.12, memlab runs
on 3.11), plus memlab's provenance ledger. Graphiti is asynchronous: its coroutines run on this
backend's own event loop thread; calls are serialised by one lock. Deleting a fact rewrites the
user's database file without it (Kuzu keeps deleted values in its pages until then); ``reset``
removes the user's file.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from memlab.errors import MemlabError, MissingDependencyError, NotFoundError
from memlab.llm.errors import refused_request
from memlab.memory import Capability, format_date
from memlab.types import MemoryItem, Retrieval, Session
from memlab_plugins.llm_systems import ExtractingMemory, part_source, transcript

from .config import GraphitiConfig

LEDGER_FILE = "memlab_graphiti.sqlite"
GRAPHS_DIR = "graphs"
TELEMETRY_ENV = "GRAPHITI_TELEMETRY_ENABLED"
_QUERY_NOISE = re.compile(r"[^\w\s]+")  # Kuzu's full-text query finds nothing once a word carries punctuation
T = TypeVar("T")


def import_graphiti(telemetry: bool) -> Any:
    """graphiti-core, with its anonymous telemetry off unless the config opts in (read at each event)."""
    os.environ[TELEMETRY_ENV] = "true" if telemetry else "false"
    try:
        import graphiti_core
        import kuzu  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "graphiti-core", "the graphiti backend needs graphiti-core and kuzu: pip install 'memlab[graphiti]'"
        ) from exc
    return graphiti_core


@dataclass
class _UserGraph:
    driver: Any
    graphiti: Any


class GraphitiMemory(ExtractingMemory):
    name = "graphiti"
    description = (
        "Graphiti (graphiti-core): a bi-temporal knowledge graph of facts extracted by an LLM from each session, "
        "contradicted facts invalidated, hybrid search; embedded Kuzu per user in the data dir."
    )
    Config = GraphitiConfig
    config: GraphitiConfig
    capabilities = frozenset({Capability.LIST, Capability.DELETE, Capability.HISTORY, Capability.PERSIST})
    ledger_file = LEDGER_FILE

    def __init__(
        self,
        config: GraphitiConfig | Mapping[str, Any] | None = None,
        *,
        data_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        llm: Any | None = None,
    ) -> None:
        """``llm``: a memlab ``LLM`` (or LangChain chat model) for Graphiti's extraction, instead of ``config.llm``."""
        self._graphs: dict[str, _UserGraph] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._llm: Any = None
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir, model=llm)

    # ------------------------------------------------------------------ building
    def _build(self, model: Any | None) -> None:
        from memlab.embedders import get_embedder
        from memlab.llm import make_llm

        cfg = self.config
        import_graphiti(cfg.telemetry)
        from .clients import EmbeddingCrossEncoder, MemlabEmbedder, MemlabLLMClient

        embedder = get_embedder(cfg.embedder, cfg.embedder_model, cache_dir=self.cache_dir)
        self.ledger.check_meta("embedder", f"{embedder.name}:{embedder.dim}", "graphiti embedder")
        settings = dict(cfg.llm or {})
        if self.cache_dir is not None and not settings.get("cache_dir"):
            settings["cache_dir"] = str(self.cache_dir)  # the run's cache, never a process-wide default
        self._llm = make_llm(settings, llm=model)
        self.llm_client = MemlabLLMClient(self._llm, self.usage)
        self._embedder = MemlabEmbedder(embedder)
        self._cross_encoder = EmbeddingCrossEncoder(embedder)
        (self.root / GRAPHS_DIR).mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, name="memlab-graphiti-loop", daemon=True).start()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            raise MemlabError("the graphiti backend is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def graph_path(self, user_id: str) -> Path:
        return self.root / GRAPHS_DIR / f"{user_id}.kuzu"

    def _graph(self, user_id: str, *, create: bool = True) -> _UserGraph | None:
        """The user's open graph; opened (and created when ``create``) on first use."""
        graph = self._graphs.get(user_id)
        if graph is not None:
            return graph
        path = self.graph_path(user_id)
        if not create and not path.exists():
            return None
        from graphiti_core import Graphiti

        from .clients import MemlabKuzuDriver

        async def open_graph() -> _UserGraph:
            driver = MemlabKuzuDriver(path)
            graphiti = Graphiti(
                graph_driver=driver,
                llm_client=self.llm_client,
                embedder=self._embedder,
                cross_encoder=self._cross_encoder,
                store_raw_episode_content=self.config.store_raw_episode_content,
                max_coroutines=self.config.max_coroutines,
            )
            await graphiti.build_indices_and_constraints()
            return _UserGraph(driver, graphiti)

        try:
            graph = self._run(open_graph())
        except MemlabError:
            raise
        except Exception as exc:
            raise MemlabError(f"cannot open the graphiti graph {path}: {type(exc).__name__}: {exc}") from exc
        self._graphs[user_id] = graph
        return graph

    def release(self, user_id: str) -> None:
        """Close the user's graph (the client's LRU of users calls this); the next call reopens it."""
        with self._calls:
            self._close_graph(user_id)

    # ------------------------------------------------------------------ ingest
    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        body = transcript(session.messages)
        if not body:
            return
        from graphiti_core.nodes import EpisodeType

        from .clients import UnreadableReply

        graph = self._graph(user_id)
        assert graph is not None
        when = next((m.timestamp for m in session.messages if m.timestamp is not None), None)
        reference = when if when is not None else datetime.now(timezone.utc)
        if reference.tzinfo is None:
            reference = reference.replace(tzinfo=timezone.utc)
        last = first_turn + len(session.messages) - 1
        before = self.usage.snapshot()
        self.extraction.windows += 1
        try:
            result = self._run(
                graph.graphiti.add_episode(
                    name=f"{session.id}#{first_turn}",
                    episode_body=body,
                    source_description=f"conversation session {session.id}, turns {first_turn}-{last}",
                    reference_time=reference,
                    source=EpisodeType.message,
                    group_id=user_id,
                )
            )
        except Exception as exc:
            refused = refused_request(exc)
            # a reply that is not the JSON (UnreadableReply) or the fields (pydantic's ValueError) Graphiti asked for
            unreadable = refused is None and isinstance(exc, (UnreadableReply, ValueError))
            self.skip_or_raise(
                exc, f"session {session.id!r}, turns {first_turn}-{last}", refused=refused, unreadable=unreadable
            )
            return
        finally:
            self.record_usage_since(before)
        # Kuzu 0.11 crashes (SIGSEGV) replaying a write-ahead log left by a killed process: fold the
        # episode into the database file before the ingest is acknowledged.
        self._run(graph.driver.execute_query("CHECKPOINT"))
        source = part_source(session, first_turn, len(session.messages))
        self.ledger.add_sources(user_id, {result.episode.uuid: source})

    # ------------------------------------------------------------------ retrieve
    def _search_config(self, limit: int) -> Any:
        from graphiti_core.search.search_config import EdgeReranker, EdgeSearchConfig, EdgeSearchMethod, SearchConfig

        methods = [EdgeSearchMethod.bm25, EdgeSearchMethod.cosine_similarity]
        if self.config.reranker == "cross_encoder":
            methods.append(EdgeSearchMethod.bfs)
        edge = EdgeSearchConfig(search_methods=methods, reranker=EdgeReranker[self.config.reranker])
        return SearchConfig(edge_config=edge, limit=limit)

    def _search_filter(self) -> Any:
        from graphiti_core.search.search_filters import ComparisonOperator, DateFilter, SearchFilters

        if self.config.invalidated == "mark":
            return SearchFilters()
        current = [[DateFilter(comparison_operator=ComparisonOperator.is_null)]]
        return SearchFilters(invalid_at=current, expired_at=current)

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        graph = self._graph(user_id, create=False)
        words = " ".join(_QUERY_NOISE.sub(" ", query).split())
        if graph is None or not words:
            return Retrieval()
        limit = min(k, 1000)
        results = self._run(
            graph.graphiti.search_(
                words, config=self._search_config(limit), group_ids=[user_id], search_filter=self._search_filter()
            )
        )
        scores = list(results.edge_reranker_scores) + [None] * len(results.edges)
        edges = [(edge, score) for edge, score in zip(results.edges, scores)][:k]
        items = self._items(user_id, edges)
        return Retrieval(items=items, context=render_facts(items))

    def _items(self, user_id: str, edges: list[tuple[Any, float | None]]) -> list[MemoryItem]:
        episode_ids = sorted({e for edge, _ in edges for e in edge.episodes})
        sources = self.ledger.sources(episode_ids)
        items = []
        for edge, score in edges:
            refs = [sources[e][1] for e in edge.episodes if e in sources and sources[e][0] == user_id]
            source: dict[str, Any] = {}
            if refs:
                source = {
                    "session_id": refs[0]["session_id"],
                    "turns": [turn for ref in refs for turn in ref["turns"]],
                }
                stamps = [ref["timestamp"] for ref in refs if ref.get("timestamp")]
                if stamps:
                    source["timestamp"] = stamps[0]
            metadata = {
                "relation": edge.name,
                "valid_at": _iso(edge.valid_at),
                "invalid_at": _iso(edge.invalid_at),
                "expired_at": _iso(edge.expired_at),
                "created_at": _iso(edge.created_at),
                "episodes": list(edge.episodes),
                "invalidated": edge.invalid_at is not None or edge.expired_at is not None,
            }
            items.append(MemoryItem(id=edge.uuid, text=edge.fact, score=score, source=source, metadata=metadata))
        return items

    # ------------------------------------------------------------------ capabilities
    def _edges(self, user_id: str) -> list[Any]:
        from graphiti_core.edges import EntityEdge
        from graphiti_core.errors import GroupsEdgesNotFoundError

        graph = self._graph(user_id, create=False)
        if graph is None:
            return []
        try:
            return list(self._run(EntityEdge.get_by_group_ids(graph.driver, [user_id])) or [])
        except GroupsEdgesNotFoundError:
            return []

    def _list(self, user_id: str) -> list[MemoryItem]:
        edges = sorted(self._edges(user_id), key=lambda e: (e.created_at, e.uuid))
        return self._items(user_id, [(edge, None) for edge in edges])

    def _owned_edge(self, item_id: str, user_id: str) -> Any:
        edge = next((e for e in self._edges(user_id) if e.uuid == item_id), None)
        if edge is None:
            raise NotFoundError(f"no fact {item_id!r} for user {user_id!r}")
        return edge

    def _delete(self, item_id: str, *, user_id: str) -> None:
        edge = self._owned_edge(item_id, user_id)
        graph = self._graph(user_id)
        assert graph is not None
        self._run(edge.delete(graph.driver))
        # endpoints that no fact connects any more go too (their names came from the deleted fact)
        remaining = self._edges(user_id)
        linked = {e.source_node_uuid for e in remaining} | {e.target_node_uuid for e in remaining}
        for node_uuid in {edge.source_node_uuid, edge.target_node_uuid} - linked:
            self._run(graph.driver.execute_query("MATCH (n:Entity {uuid: $uuid}) DETACH DELETE n", uuid=node_uuid))
        # Graphiti folds facts into its entities' summaries: the endpoints' summaries are cleared (a later
        # episode that mentions the entity writes a new one), so the deleted fact's text leaves them too.
        for node_uuid in {edge.source_node_uuid, edge.target_node_uuid} & linked:
            self._run(graph.driver.execute_query("MATCH (n:Entity {uuid: $uuid}) SET n.summary = ''", uuid=node_uuid))
        self._compact(user_id)

    def _compact(self, user_id: str) -> None:
        """Rewrite the user's database without deleted values (Kuzu keeps them in freed pages):
        EXPORT DATABASE, IMPORT into a new file, swap it in."""
        import kuzu

        graph = self._graph(user_id)
        assert graph is not None
        path = self.graph_path(user_id)
        work = Path(tempfile.mkdtemp(prefix=".compact-", dir=path.parent))
        try:
            self._run(graph.driver.execute_query(f"EXPORT DATABASE '{work / 'export'}'"))
            self._close_graph(user_id)
            # Kuzu 0.11 cannot import its own export of several full-text indexes ("default_english_stopwords
            # already exists"): the indexes are left out here and rebuilt when the graph is next opened.
            (work / "export" / "index.cypher").write_text("")
            fresh = kuzu.Database(str(work / "graph.kuzu"))
            connection = kuzu.Connection(fresh)
            connection.execute(f"IMPORT DATABASE '{work / 'export'}'")
            connection.execute("CHECKPOINT")
            connection.close()
            fresh.close()
            # the graph was closed cleanly (checkpointed, no write-ahead log left); its side files, if any,
            # go before the new file takes its place atomically: there is no moment without the user's graph
            for side_file in path.parent.glob(f"{path.name}.*"):
                side_file.unlink()
            os.replace(work / "graph.kuzu", path)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        """The fact's bi-temporal record: when it was learned, from when it held, when it stopped."""
        edge = self._owned_edge(item_id, user_id)
        events = [{"event": "ADD", "at": _iso(edge.created_at), "fact": edge.fact, "episodes": list(edge.episodes)}]
        if edge.valid_at is not None:
            events.append({"event": "VALID_FROM", "at": _iso(edge.valid_at)})
        if edge.invalid_at is not None or edge.expired_at is not None:
            events.append({"event": "INVALIDATED", "at": _iso(edge.invalid_at), "recorded_at": _iso(edge.expired_at)})
        return events

    def _export(self, user_id: str) -> dict[str, Any]:
        from graphiti_core.nodes import EpisodicNode

        graph = self._graph(user_id, create=False)
        episodes = [] if graph is None else self._run(EpisodicNode.get_by_group_ids(graph.driver, [user_id]))
        return {
            "items": [item.model_dump(mode="json") for item in self._list(user_id)],
            "episodes": [
                {"uuid": e.uuid, "name": e.name, "content": e.content, "valid_at": _iso(e.valid_at)}
                for e in sorted(episodes or [], key=lambda e: e.valid_at)
            ],
            "sessions": self.ledger.sessions(user_id),
            "extraction_stats": self.extraction_stats(),
        }

    def _reset(self, user_id: str) -> None:
        self._close_graph(user_id)
        path = self.graph_path(user_id)
        for stale in path.parent.glob(f"{path.name}*"):
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()
        self.ledger.forget_user(user_id)

    # ------------------------------------------------------------------ lifetime
    def _close_graph(self, user_id: str) -> None:
        graph = self._graphs.pop(user_id, None)
        if graph is not None and self._loop is not None:

            async def close() -> None:
                graph.driver.close_database()

            self._run(close())

    def _close_library(self) -> None:
        for user_id in list(self._graphs):
            self._close_graph(user_id)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop = None
        if self._llm is not None:
            self._llm.close()
            self._llm = None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def render_facts(items: list[MemoryItem]) -> str:
    """Facts in the order they became true, each with its validity interval; invalidated ones say so."""

    def start(item: MemoryItem) -> str:
        return item.metadata.get("valid_at") or item.metadata.get("created_at") or ""

    lines = []
    for item in sorted(items, key=start):
        valid_at, invalid_at = item.metadata.get("valid_at"), item.metadata.get("invalid_at")
        since = format_date(valid_at) if valid_at else "date unknown"
        if item.metadata.get("invalidated"):
            until = format_date(invalid_at) if invalid_at else "a later date"
            lines.append(f"- {item.text} (valid {since} until {until}; no longer true)")
        else:
            lines.append(f"- {item.text} (valid since {since}; still true)")
    return "\n".join(lines)
