"""A LangGraph long-term memory store backed by memlab: ``MemlabStore(client)``.

``MemlabStore`` implements ``langgraph.store.base.BaseStore`` (``put``, ``get``, ``search``,
``delete``, ``list_namespaces``, their ``a``-prefixed async twins, ``batch`` / ``abatch``) over a
``MemoryClient`` or a ``memlab.remote.RemoteMemoryClient``, as a drop-in for LangGraph's
``InMemoryStore`` (``MemlabStore(client, index=..., ttl=...)`` takes the same ``index`` config)::

    store = MemlabStore(MemoryClient("rag", data_dir="memdata"))
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    store.put(("memories", "alice"), "cat", {"memory": "Alice has a cat named Pixel"})
    store.search(("memories", "alice"), query="pets")     # the backend's own retrieval

How LangGraph's model maps onto memlab:

- **Users.** Each namespace belongs to one memlab user, named by one of its labels
  (``user_namespace``, see ``memlab.integrations.store_users``: by default the first label that is
  not a collection word such as ``memories``, so ``("user_123", "memories")`` and
  ``("memories", "user_123")`` are both ``user_123``'s). ``forget`` of that user removes the
  namespace's items, and keys bound to other users (REST service) never reach them. Searches and
  listings that do not name a user look through every user the store has written to (a catalog
  kept in ``shared_user``'s memory; a user found empty, e.g. forgotten, is dropped from it).
- **Items.** ``put`` stores the value as one memory turn (role ``user``, session ``session_id``;
  text: the value as JSON, see ``memlab.integrations.store_values``) whose metadata names its
  namespace, key, creation/update times, index fields and expiry. Putting an existing key stores
  the new value, then deletes the old turn. ``value=None`` (``delete``) deletes it. Namespaces may
  hold at most 8 labels in the turn's filterable metadata (deeper ones are matched here), and a
  namespace or key must fit in 256 characters (memlab's metadata bounds).
- **Search.** Without a query: the namespace's items, oldest first. With a query and no ``index``
  config: the backend's retrieval (at most the client's ``max_k`` candidates), best first with the
  backend's ``score``; items put with ``index=False`` are not retrieved. With an ``index`` config
  (``{"embed": ..., "dims": ..., "fields": [...]}``, as LangGraph's stores take it; ``embed`` is
  a LangChain ``Embeddings``, an embedding function, a ``"provider:model"`` string, a memlab
  ``Embedder`` or ``"memlab:<kind>"``): LangGraph's vector scoring, as ``InMemoryStore`` does it —
  each indexed field text is embedded at ``put`` (``index=[...]`` per put overrides ``fields``;
  ``index=False`` embeds nothing), an item scores the best cosine similarity of its texts, items
  without vectors come after the scored ones with score ``None``. Vectors are derived data: kept
  in process (by text), recomputed after a restart.
- **Filters** follow LangGraph's stores exactly: each key's value must equal the filter's (nested
  objects and lists compared whole), or meet its operators ``$eq``, ``$ne``, ``$gt``, ``$gte``,
  ``$lt``, ``$lte``; another operator raises ``ValueError``, as does a comparison of a value that
  is not a number. ``limit`` and ``offset`` page the matches.
- **TTL** (``ttl={"default_ttl": minutes, "refresh_on_read": bool, "omit_expired": bool,
  "sweep_interval_minutes": n}``, or ``put(..., ttl=minutes)``): an item expires ``ttl`` minutes
  after its last write (or read, when refreshed); ``sweep_ttl()`` deletes expired items,
  ``start_ttl_sweeper()`` runs it every ``sweep_interval_minutes``; with ``omit_expired`` reads
  skip expired items before the sweep.

The backend must list, delete and filter (the capabilities ``list``, ``delete``, ``filter``) and
keep each turn's text verbatim: ``full_context``, ``rag`` with ``chunking: turn``, ``mem0`` without
an LLM. A backend that rewrites what it stores (``profile``, mem0 with fact extraction) is refused
at the first ``put``, which reads its item back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from langgraph.store.base.embed import Embeddings

from memlab.client import MemoryClient
from memlab.errors import MemlabError, NotFoundError
from memlab.integrations.store_ops import run_ops
from memlab.integrations.store_users import DEFAULT_COLLECTION_LABELS, UserNamespace
from memlab.integrations.store_values import text_to_value, value_to_text
from memlab.memory import Capability
from memlab.types import MAX_METADATA_LIST_ITEMS, MAX_METADATA_STRING_CHARS, MemoryItem

__all__ = ["MemlabStore"]

logger = logging.getLogger(__name__)

NAMESPACE, PREFIXES, KEY = "langgraph_namespace", "langgraph_prefixes", "langgraph_key"
CREATED, UPDATED = "langgraph_created_at", "langgraph_updated_at"
INDEX, INDEXED, TYPED = "langgraph_index", "langgraph_indexed", "langgraph_typed"
EXPIRES, TTL_MINUTES = "langgraph_expires_at", "langgraph_ttl_minutes"
CATALOG, CATALOG_KIND = (
    "langgraph_store_user",
    "langgraph_kind",
)  # a catalog entry (shared_user's memory): a user written to
_SEPARATOR = "."  # LangGraph forbids periods in labels, so a joined namespace is unambiguous
_VECTOR_CACHE_SIZE = 100_000


def _joined(namespace: Sequence[str]) -> str:
    return _SEPARATOR.join(namespace)


def _compare(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics for one key (as its InMemoryStore compares)."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_compare(v, w) for v, w in zip(value, wanted))
        )
    return bool(value == wanted)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    # float() raises for a value that is not a number, as LangGraph's stores do.
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator == "$gt":
        return float(value) > float(operand)
    if operator == "$gte":
        return float(value) >= float(operand)
    if operator == "$lt":
        return float(value) < float(operand)
    if operator == "$lte":
        return float(value) <= float(operand)
    raise ValueError(f"Unsupported operator: {operator} (use $eq, $ne, $gt, $gte, $lt, $lte)")


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(wanted == "*" or label == wanted for label, wanted in pairs)


def _cosine(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    import numpy as np

    if not vectors:
        return []
    q, m = np.asarray(query, dtype=float), np.asarray(vectors, dtype=float)
    norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
    scores = np.zeros(len(m))
    nonzero = norms != 0
    scores[nonzero] = (m[nonzero] @ q) / norms[nonzero]
    return [float(s) for s in scores]


def _memlab_embeddings(embed: Any) -> Embeddings | None:
    """A memlab Embedder (or ``"memlab:<kind>"``) as LangChain Embeddings; None for anything else."""
    from memlab.embedders import get_embedder
    from memlab.embedders.base import Embedder

    if isinstance(embed, str) and embed.startswith("memlab:"):
        embed = get_embedder(embed.split(":", 1)[1])
    if not isinstance(embed, Embedder):
        return None
    embedder = embed

    class _Adapter(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in embedder.embed(texts)]

        def embed_query(self, text: str) -> list[float]:
            return [float(x) for x in embedder.embed_one(text, query=True)]

    return _Adapter()


class _Stored:
    """One item as stored: the memory turn's id and owner, the item, and how it is indexed."""

    __slots__ = ("memory_id", "user", "item", "index", "indexed", "expires", "ttl")

    def __init__(self, memory_id: str, user: str, item: Item, meta: dict[str, Any]) -> None:
        self.memory_id, self.user, self.item = memory_id, user, item
        index = meta.get(INDEX)
        self.index: list[str] | None = json.loads(index) if isinstance(index, str) and index.startswith("[") else None
        self.indexed: bool = meta.get(INDEXED, True) is not False
        expires = meta.get(EXPIRES)
        self.expires = datetime.fromisoformat(expires) if isinstance(expires, str) else None
        self.ttl: float | None = meta.get(TTL_MINUTES)

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and self.expires <= now


class MemlabStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are memlab memories (see the module doc)."""

    supports_ttl = True

    def __init__(
        self,
        client: Any,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        user_namespace: int | Collection[str] = DEFAULT_COLLECTION_LABELS,
        user_index: int | None = None,
        shared_user: str = "langgraph",
        session_id: str = "langgraph",
    ) -> None:
        from memlab.remote import RemoteMemoryClient

        if not isinstance(client, MemoryClient | RemoteMemoryClient):
            raise TypeError(
                f"MemlabStore needs a memlab MemoryClient or RemoteMemoryClient, got {type(client).__name__}"
            )
        missing = [c.value for c in (Capability.LIST, Capability.DELETE, Capability.FILTER) if not client.supports(c)]
        if missing:
            raise MemlabError(
                f"MemlabStore needs a backend that can {', '.join(missing)}; {client.backend!r} cannot "
                "(use full_context, rag with chunking 'turn', or mem0 without an LLM)"
            )
        self.client = client
        # user_index is the earlier name of a positional user_namespace (kept for existing callers).
        self.users = UserNamespace(user_index if user_index is not None else user_namespace, shared_user)
        self.session_id = session_id
        self.index_config: IndexConfig | None = None
        self.embeddings: Embeddings | None = None
        self._fields: list[tuple[str, str | list[str]]] = []
        if index:
            self.index_config = index.copy()
            embed = self.index_config.get("embed")
            self.embeddings = _memlab_embeddings(embed) or ensure_embeddings(embed)
            self._fields = [(p, tokenize_path(p) if p != "$" else p) for p in (index.get("fields") or ["$"])]
        self.ttl_config: TTLConfig | None = dict(ttl) if ttl else None  # type: ignore[assignment]
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()  # text -> embedding (LRU)
        self._vectors_lock = threading.Lock()
        self._catalog: set[str] | None = None  # users the store wrote to (loaded from shared_user's memory)
        self._catalog_lock = threading.Lock()
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()
        self._verified = False  # the first put reads its item back (a backend must keep values verbatim)

    # ------------------------------------------------------------------ users
    def _known_users(self) -> set[str]:
        with self._catalog_lock:
            if self._catalog is None:
                entries = self.client.memories(
                    self.users.shared_user, filters={"metadata": {CATALOG_KIND: "store_user"}}
                )
                self._catalog = {str(m.source.get("metadata", {}).get(CATALOG)) for m in entries}
                self._catalog.discard("None")
            return {*self._catalog, self.users.shared_user}

    def _register(self, user: str) -> None:
        if user == self.users.shared_user or user in self._known_users():
            return
        entry = {
            "role": "user",
            "content": f"langgraph store user {user}",
            "metadata": {CATALOG_KIND: "store_user", CATALOG: user},
        }
        self.client.remember(self.users.shared_user, [entry], session_id=self.session_id)
        with self._catalog_lock:
            assert self._catalog is not None
            self._catalog.add(user)

    def _drop_if_empty(self, user: str) -> None:
        """Forget a catalog entry whose user has no items left (e.g. after ``forget``)."""
        if user == self.users.shared_user or self._stored(user, ()):
            return
        for entry in self.client.memories(self.users.shared_user, filters={"metadata": {CATALOG: user}}):
            self._discard(self.users.shared_user, entry.id)
        with self._catalog_lock:
            if self._catalog is not None:
                self._catalog.discard(user)
        if self._stored(user, ()):  # a put (here or in another process) raced the check: list the user again
            self._register(user)

    def _users_under(self, prefix: Sequence[str]) -> list[str]:
        user = self.users.user_of_prefix(prefix)
        return [user] if user is not None else sorted(self._known_users())

    # ------------------------------------------------------------------ items
    def _parse(self, memory: MemoryItem, user: str) -> _Stored | None:
        meta = memory.source.get("metadata") or {}
        if NAMESPACE not in meta or KEY not in meta:
            return None  # not written by a MemlabStore
        value = text_to_value(memory.text, bool(meta.get(TYPED)))
        if value is None:
            return None
        created = datetime.fromisoformat(meta[CREATED])
        updated = meta.get(UPDATED) or memory.source.get("timestamp") or meta[CREATED]
        item = Item(
            namespace=tuple(meta[NAMESPACE].split(_SEPARATOR)),
            key=meta[KEY],
            value=value,
            created_at=created,
            updated_at=datetime.fromisoformat(updated),
        )
        return _Stored(memory.id, user, item, meta)

    def _metadata_filter(self, prefix: Sequence[str], key: str | None = None) -> dict[str, Any]:
        wanted: dict[str, Any] = {}
        if prefix:
            wanted[PREFIXES] = _joined(prefix[:MAX_METADATA_LIST_ITEMS])
        if key is not None:
            wanted[KEY] = key
        return wanted

    def _stored(self, user: str, prefix: Sequence[str], key: str | None = None) -> list[_Stored]:
        """The items of ``user`` under ``prefix`` (one key's, when given), oldest first."""
        wanted = self._metadata_filter(prefix, key)
        memories = self.client.memories(user, filters={"metadata": wanted} if wanted else None)
        found = []
        for memory in memories:
            stored = self._parse(memory, user)
            if stored is not None and stored.item.namespace[: len(prefix)] == tuple(prefix):
                found.append(stored)
        found.sort(key=lambda s: (s.item.created_at, s.item.updated_at))
        return found

    def _omit_expired(self) -> bool:
        return bool(self.ttl_config and self.ttl_config.get("omit_expired"))

    def _live(self, found: list[_Stored]) -> list[_Stored]:
        if not self._omit_expired():
            return found
        now = datetime.now(timezone.utc)
        return [s for s in found if not s.expired(now)]

    def _current(self, namespace: tuple[str, ...], key: str) -> tuple[str, list[_Stored]]:
        user = self.users.user_of(namespace)
        versions = [s for s in self._stored(user, namespace, key) if s.item.namespace == namespace]
        return user, versions

    def _discard(self, user: str, memory_id: str) -> None:
        """Delete one turn; one already gone (a concurrent put or refresh took it) is no error."""
        try:
            self.client.delete(user, memory_id)
        except NotFoundError:
            pass

    @staticmethod
    def _latest(found: list[_Stored]) -> list[_Stored]:
        """One version per (namespace, key), the newest: an interrupted put or two concurrent
        refreshes may leave two turns for a moment."""
        newest: dict[tuple[tuple[str, ...], str], _Stored] = {}
        for stored in found:
            known = newest.get((stored.item.namespace, stored.item.key))
            if known is None or stored.item.updated_at >= known.item.updated_at:
                newest[(stored.item.namespace, stored.item.key)] = stored
        kept = set(map(id, newest.values()))
        return [s for s in found if id(s) in kept]

    # ------------------------------------------------------------------ vectors
    def _texts(self, value: dict[str, Any], index: list[str] | None) -> list[str]:
        fields = self._fields if index is None else [(p, tokenize_path(p)) for p in index]
        texts: list[str] = []
        for _, path in fields:
            texts.extend(get_text_at_path(value, path))
        return texts

    def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self.embeddings is not None
        with self._vectors_lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            vectors = self.embeddings.embed_documents(missing)
            with self._vectors_lock:
                for text, vector in zip(missing, vectors):
                    self._vectors[text] = list(vector)
                while len(self._vectors) > _VECTOR_CACHE_SIZE:
                    self._vectors.popitem(last=False)
        with self._vectors_lock:
            found = []
            for text in texts:
                if text not in self._vectors:  # evicted meanwhile: embed it alone
                    self._vectors[text] = list(self.embeddings.embed_documents([text])[0])
                self._vectors.move_to_end(text)
                found.append(self._vectors[text])
            return found

    # ------------------------------------------------------------------ operations
    def _get(self, op: GetOp) -> Item | None:
        user, versions = self._current(op.namespace, op.key)
        live = self._live(versions)
        if not live:
            return None
        latest = max(live, key=lambda s: s.item.updated_at)
        if op.refresh_ttl:
            self._refresh(latest)
        return latest.item

    def _put(self, op: PutOp) -> None:
        user, old = self._current(op.namespace, op.key)
        if op.value is not None:
            self._write(user, op, old)
        # The new value is stored before the old one goes: an interruption leaves two versions (the
        # newer one wins), never none.
        for stored in old:
            self._discard(user, stored.memory_id)

    def _write(self, user: str, op: PutOp, old: list[_Stored]) -> None:
        joined = _joined(op.namespace)
        for what, text in (("namespace", joined), ("key", op.key)):
            if len(text) > MAX_METADATA_STRING_CHARS:
                raise ValueError(f"MemlabStore {what} {text[:40]!r}... is over {MAX_METADATA_STRING_CHARS} characters")
        now = datetime.now(timezone.utc)
        created = min((s.item.created_at for s in old), default=now)
        text, typed = value_to_text(dict(op.value or {}))
        index = op.index
        metadata: dict[str, Any] = {
            NAMESPACE: joined,
            PREFIXES: [
                _joined(op.namespace[:n]) for n in range(1, min(len(op.namespace), MAX_METADATA_LIST_ITEMS) + 1)
            ],
            KEY: op.key,
            CREATED: created.isoformat(),
            UPDATED: now.isoformat(),
            INDEXED: index is not False,
        }
        if isinstance(index, list):
            metadata[INDEX] = json.dumps(index)
            if len(metadata[INDEX]) > MAX_METADATA_STRING_CHARS:
                raise ValueError(
                    f"MemlabStore put index fields {index!r} are over {MAX_METADATA_STRING_CHARS} characters"
                )
        if typed:
            metadata[TYPED] = True
        if op.ttl is not None:
            metadata[TTL_MINUTES] = float(op.ttl)
            metadata[EXPIRES] = (now + timedelta(minutes=op.ttl)).isoformat()
        self._remember(user, text, metadata, now)
        if self.embeddings is not None and index is not False:
            self._embed(self._texts(dict(op.value or {}), index if isinstance(index, list) else None))
        if not self._verified:
            self._verify(user, op, old)
        self._register(user)

    def _remember(self, user: str, text: str, metadata: dict[str, Any], when: datetime) -> None:
        message = {"role": "user", "content": text, "timestamp": when.isoformat(), "metadata": metadata}
        self.client.remember(user, [message], session_id=self.session_id)

    def _refresh(self, stored: _Stored) -> None:
        """Restart an item's TTL (a read with ``refresh_ttl``): rewrite it with a later expiry."""
        if stored.ttl is None:
            return
        try:
            memory = self.client.get(stored.user, stored.memory_id)
        except NotFoundError:
            return  # rewritten or deleted meanwhile
        now = datetime.now(timezone.utc)
        metadata = {**(memory.source.get("metadata") or {}), EXPIRES: (now + timedelta(minutes=stored.ttl)).isoformat()}
        self._remember(stored.user, memory.text, metadata, datetime.fromisoformat(metadata[UPDATED]))
        self._discard(stored.user, stored.memory_id)

    def _verify(self, user: str, op: PutOp, old: list[_Stored]) -> None:
        known = {s.memory_id for s in old}
        stored = [s for s in self._current(op.namespace, op.key)[1] if s.memory_id not in known]
        if not stored or stored[-1].item.value != text_to_value(*value_to_text(dict(op.value or {}))):
            raise MemlabError(
                f"backend {self.client.backend!r} did not keep the stored value verbatim, so MemlabStore cannot "
                "read it back; use full_context, rag with chunking 'turn', or mem0 without an LLM"
            )
        self._verified = True

    def _candidates(self, prefix: tuple[str, ...]) -> list[_Stored]:
        found: list[_Stored] = []
        for user in self._users_under(prefix):
            found.extend(self._stored(user, prefix))
        found.sort(key=lambda s: (s.item.created_at, s.item.namespace, s.item.key))
        return self._live(self._latest(found))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        selected: list[tuple[_Stored, float | None]]
        if op.query and self.embeddings is not None:
            selected = self._vector_search(op, prefix)
        elif op.query:
            selected = self._retrieve(op, prefix)
        else:
            selected = [(s, None) for s in self._candidates(prefix) if self._passes(s, op)]
            selected = selected[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            for stored, _ in selected:
                self._refresh(stored)
        return [
            SearchItem(s.item.namespace, s.item.key, s.item.value, s.item.created_at, s.item.updated_at, score=score)
            for s, score in selected
        ]

    @staticmethod
    def _passes(stored: _Stored, op: SearchOp) -> bool:
        return not op.filter or all(_compare(stored.item.value.get(k), v) for k, v in op.filter.items())

    def _retrieve(self, op: SearchOp, prefix: tuple[str, ...]) -> list[tuple[_Stored, float | None]]:
        """A query search through the backend's retrieval, merged across the users it spans."""
        # index=False items are dropped here, not by the backend's filter: turns stored before the
        # flag existed carry no INDEXED key, and a metadata filter would miss them.
        wanted = self._metadata_filter(prefix)
        k = self.client.max_k if isinstance(self.client, MemoryClient) else None
        found: list[tuple[_Stored, float | None]] = []
        for user in self._users_under(prefix):
            recalled = self.client.recall(user, op.query or "", k=k, filters={"metadata": wanted} if wanted else None)
            for rank, memory in enumerate(recalled.items):
                stored = self._parse(memory, user)
                if stored is not None and stored.indexed and stored.item.namespace[: len(prefix)] == prefix:
                    found.append((stored, memory.score if memory.score is not None else -float(rank)))
        found.sort(key=lambda pair: -(pair[1] or 0.0))  # merged across users: best first
        live = {id(s) for s in self._live(self._latest([s for s, _ in found]))}
        kept = [(s, score) for s, score in found if id(s) in live and self._passes(s, op)]
        return kept[op.offset : op.offset + op.limit]

    def _vector_search(self, op: SearchOp, prefix: tuple[str, ...]) -> list[tuple[_Stored, float | None]]:
        """LangGraph's scoring: the best cosine similarity of an item's indexed texts; unscored items last."""
        assert self.embeddings is not None
        candidates = [s for s in self._candidates(prefix) if self._passes(s, op)]
        query = self.embeddings.embed_query(op.query or "")
        scored: list[tuple[_Stored, float | None]] = []
        scoreless: list[_Stored] = []
        for stored in candidates:
            texts = self._texts(stored.item.value, stored.index) if stored.indexed else []
            if not texts:
                scoreless.append(stored)
                continue
            scored.append((stored, max(_cosine(query, self._embed(texts)))))
        scored.sort(key=lambda pair: -(pair[1] or 0.0))
        kept = scored[op.offset : op.offset + op.limit]
        if len(kept) < op.limit:
            kept.extend((s, None) for s in scoreless[: op.limit - len(kept)])
        return kept

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = list(op.match_conditions or ())
        prefixes = [tuple(c.path) for c in conditions if c.match_type == "prefix"]
        scope = prefixes[0] if prefixes else ()
        literal = tuple(label for label in scope[: next((i for i, x in enumerate(scope) if x == "*"), len(scope))])
        users = self._users_under(scope)
        namespaces: set[tuple[str, ...]] = set()
        for user in users:
            found = self._live(self._stored(user, literal))
            if not found and self.users.user_of_prefix(scope) is None:
                self._drop_if_empty(user)
            namespaces.update(s.item.namespace for s in found)
        kept = [ns for ns in namespaces if all(_namespace_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            kept = [ns[: op.max_depth] for ns in kept]
        return sorted(set(kept))[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ TTL
    def sweep_ttl(self) -> int:
        """Delete every expired item the store can reach; returns how many were deleted."""
        now = datetime.now(timezone.utc)
        deleted = 0
        for user in sorted(self._known_users()):
            for stored in self._stored(user, ()):
                if stored.expired(now):
                    self._discard(user, stored.memory_id)
                    deleted += 1
        return deleted

    async def asweep_ttl(self) -> int:
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> threading.Thread:
        """Run ``sweep_ttl`` every ``sweep_interval_minutes`` (the ttl config's, else 5) in a daemon thread."""
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        if self._sweeper is not None and self._sweeper.is_alive():
            return self._sweeper
        self._sweeper_stop.clear()

        def loop() -> None:
            while not self._sweeper_stop.wait(float(interval) * 60):
                try:
                    self.sweep_ttl()
                except Exception as exc:  # one failed sweep (backend busy, closed) must not end the sweeper
                    logger.warning("MemlabStore TTL sweep failed: %s", exc)

        self._sweeper = threading.Thread(target=loop, name="memlab-langgraph-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return self._sweeper

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True when it has ended."""
        self._sweeper_stop.set()
        if self._sweeper is None:
            return True
        self._sweeper.join(timeout)
        return not self._sweeper.is_alive()

    # ------------------------------------------------------------------ BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)  # before anything runs: a bad label fails the batch, not half of it
        return run_ops(ops, get=self._get, put=self._put, search=self._search, list_namespaces=self._list_namespaces)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The clients are thread-safe (per-user locks): run the batch off the event loop.
        return await asyncio.to_thread(self.batch, list(ops))
