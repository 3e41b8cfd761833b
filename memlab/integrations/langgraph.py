"""A LangGraph long-term memory store backed by memlab: ``MemlabStore(client)``.

``MemlabStore`` implements ``langgraph.store.base.BaseStore`` (``put``, ``get``, ``search``,
``delete``, ``list_namespaces`` and their ``a``-prefixed async twins, all through ``batch`` /
``abatch``) over a ``MemoryClient`` or a ``memlab.remote.RemoteMemoryClient``::

    store = MemlabStore(MemoryClient("rag", data_dir="memdata"))
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    store.put(("memories", "alice"), "cat", {"memory": "Alice has a cat named Pixel"})
    store.search(("memories", "alice"), query="pets")     # the backend's own retrieval

How namespaces map onto memlab:

- The label at ``user_index`` (default 1, as in ``("memories", user_id)``) is the memlab user:
  every item of that namespace lives in that user's memory, so ``forget`` of the user removes it,
  and keys bound to other users (REST service) never reach it. A namespace without that label, or
  whose label is not a valid user id (``memlab.memory.validate_user_id``), is refused with
  ``InvalidNamespaceError``; so is a search or ``list_namespaces`` whose prefix does not name the
  user (memlab keeps users apart and never enumerates them).
- ``put`` stores the value as one memory turn (role ``user``; text: the value as JSON, which the
  backend indexes and retrieves) in session ``session_id``, with metadata naming its namespace,
  key and creation time (``memlab.types.Message.metadata``); the turn's timestamp is the update
  time. Putting an existing key stores the new value, then deletes the old turn. ``value=None``
  (``delete``) deletes it.
- ``search`` without a query lists the namespace's items (oldest first); with a query it asks the
  backend's retrieval (at most the client's ``max_k`` candidates) and returns them best first with
  their ``score``. ``filter`` follows LangGraph's stores: each key's value must equal the filter's
  (nested objects and lists compared whole), or meet its operators ``$eq``, ``$ne``, ``$gt``,
  ``$gte``, ``$lt``, ``$lte``. ``limit`` and ``offset`` page the matches.

The backend must list, delete and filter (the capabilities ``list``, ``delete``, ``filter``) and
keep each turn's text verbatim: ``full_context``, ``rag`` with ``chunking: turn``, ``mem0`` without
an LLM. A backend that rewrites what it stores (``profile``, mem0 with fact extraction) is refused
at the first ``put``, which reads its item back. TTLs are not supported (``supports_ttl`` False).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memlab.client import MemoryClient
from memlab.errors import MemlabError
from memlab.integrations.store_ops import run_ops
from memlab.memory import Capability, validate_user_id
from memlab.types import MemoryItem

__all__ = ["MemlabStore"]

NAMESPACE, PREFIXES, KEY, CREATED = "langgraph_namespace", "langgraph_prefixes", "langgraph_key", "langgraph_created_at"
_SEPARATOR = "."  # LangGraph forbids periods in labels, so a joined namespace is unambiguous


def _joined(namespace: tuple[str, ...]) -> str:
    return _SEPARATOR.join(namespace)


def _matches_value(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics for one key (see the module doc)."""
    if isinstance(wanted, dict):
        operators = {k: v for k, v in wanted.items() if k.startswith("$")}
        if operators:
            return all(_operator(value, op, operand) for op, operand in operators.items())
        return isinstance(value, dict) and all(_matches_value(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_matches_value(v, w) for v, w in zip(value, wanted))
        )
    return bool(value == wanted)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    comparisons = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
    if operator not in comparisons:
        raise ValueError(f"unsupported filter operator {operator!r} (use $eq, $ne, $gt, $gte, $lt, $lte)")
    try:
        return bool(comparisons[operator](float(value), float(operand)))
    except (TypeError, ValueError):
        return False


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(wanted == "*" or label == wanted for label, wanted in pairs)


class MemlabStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are memlab memories (see the module doc)."""

    supports_ttl = False

    def __init__(self, client: Any, *, user_index: int = 1, session_id: str = "langgraph") -> None:
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
        if user_index < 0:
            raise ValueError(f"user_index must be >= 0, got {user_index}")
        self.client = client
        self.user_index = user_index
        self.session_id = session_id
        self._verified = False  # the first put reads its item back (a backend must keep values verbatim)

    # ------------------------------------------------------------------ namespaces and items
    def _user(self, namespace: tuple[str, ...], what: str = "namespace") -> str:
        if len(namespace) <= self.user_index:
            raise InvalidNamespaceError(
                f"cannot map {what} {namespace} to a memlab user: it needs a user id at position "
                f"{self.user_index} (MemlabStore(user_index=...))"
            )
        label = namespace[self.user_index]
        try:
            return validate_user_id(label)
        except ValueError as exc:
            raise InvalidNamespaceError(f"cannot map {what} {namespace} to a memlab user: {exc}") from None

    @staticmethod
    def _item(memory: MemoryItem, cls: type[Item] = Item) -> Item | None:
        meta = memory.source.get("metadata") or {}
        if NAMESPACE not in meta or KEY not in meta:
            return None  # not written by a MemlabStore
        try:
            value = json.loads(memory.text)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        updated = memory.source.get("timestamp") or meta[CREATED]
        fields = {
            "namespace": tuple(meta[NAMESPACE].split(_SEPARATOR)),
            "key": meta[KEY],
            "value": value,
            "created_at": datetime.fromisoformat(meta[CREATED]),
            "updated_at": datetime.fromisoformat(updated),
        }
        if cls is SearchItem:
            return SearchItem(**fields, score=memory.score)
        return Item(**fields)

    def _stored(self, user: str, namespace: tuple[str, ...], key: str | None = None) -> list[tuple[str, Item]]:
        """(memory id, item) of the namespace's items (one key's, when given), oldest first."""
        wanted: dict[str, Any] = {PREFIXES: _joined(namespace)}
        if key is not None:
            wanted[KEY] = key
        found = []
        for memory in self.client.memories(user, filters={"metadata": wanted}):
            item = self._item(memory)
            if item is not None and (key is None or item.namespace == namespace):
                found.append((memory.id, item))
        found.sort(key=lambda pair: (pair[1].created_at, pair[1].updated_at))
        return found

    # ------------------------------------------------------------------ operations
    def _get(self, op: GetOp) -> Item | None:
        versions = self._stored(self._user(op.namespace), op.namespace, op.key)
        return max(versions, key=lambda pair: pair[1].updated_at)[1] if versions else None

    def _put(self, op: PutOp) -> None:
        user = self._user(op.namespace)
        old = self._stored(user, op.namespace, op.key)
        if op.value is not None:
            now = datetime.now(timezone.utc)
            created = min((item.created_at for _, item in old), default=now)
            metadata = {
                NAMESPACE: _joined(op.namespace),
                PREFIXES: [_joined(op.namespace[:n]) for n in range(1, len(op.namespace) + 1)],
                KEY: op.key,
                CREATED: created.isoformat(),
            }
            text = json.dumps(dict(op.value), ensure_ascii=False)
            message = {"role": "user", "content": text, "timestamp": now.isoformat(), "metadata": metadata}
            self.client.remember(user, [message], session_id=self.session_id)
            if not self._verified:
                self._verify(user, op, old)
        # The new value is stored before the old one goes: an interruption leaves two versions (the
        # newer one wins), never none.
        for memory_id, _ in old:
            self.client.delete(user, memory_id)

    def _verify(self, user: str, op: PutOp, old: list[tuple[str, Item]]) -> None:
        stored = [pair for pair in self._stored(user, op.namespace, op.key) if pair not in old]
        if not stored or stored[-1][1].value != dict(op.value or {}):
            raise MemlabError(
                f"backend {self.client.backend!r} did not keep the stored value verbatim, so MemlabStore cannot "
                "read it back; use full_context, rag with chunking 'turn', or mem0 without an LLM"
            )
        self._verified = True

    def _search(self, op: SearchOp) -> list[SearchItem]:
        user = self._user(op.namespace_prefix, "search prefix")
        prefix = _joined(op.namespace_prefix)
        selected: list[SearchItem]
        if op.query:
            recalled = self.client.recall(
                user,
                op.query,
                k=self.client.max_k if isinstance(self.client, MemoryClient) else None,
                filters={"metadata": {PREFIXES: prefix}},
            ).items
            if recalled and all(m.score is not None for m in recalled):
                recalled = sorted(recalled, key=lambda m: -(m.score or 0.0))
            parsed = [self._item(m, SearchItem) for m in recalled]
            selected = [i for i in parsed if isinstance(i, SearchItem)]
        else:
            selected = [
                SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at)
                for _, i in self._stored(user, op.namespace_prefix)
            ]
        if op.filter:
            selected = [i for i in selected if all(_matches_value(i.value.get(k), v) for k, v in op.filter.items())]
        return selected[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefixes = [c for c in op.match_conditions or () if c.match_type == "prefix"]
        named = [c for c in prefixes if len(c.path) > self.user_index and c.path[self.user_index] != "*"]
        if not named:
            raise InvalidNamespaceError(
                "list_namespaces needs a prefix that names the user (memlab keeps users apart and does not "
                f"enumerate them): e.g. prefix=('memories', '<user id>') with user_index={self.user_index}"
            )
        user = self._user(tuple(named[0].path), "prefix")
        root = tuple(named[0].path[: self.user_index + 1])
        namespaces = {item.namespace for _, item in self._stored(user, root)}
        kept = [ns for ns in namespaces if all(_namespace_matches(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            kept = [ns[: op.max_depth] for ns in kept]
        return sorted(set(kept))[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run_ops(ops, get=self._get, put=self._put, search=self._search, list_namespaces=self._list_namespaces)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The clients are thread-safe (per-user locks): run the batch off the event loop.
        return await asyncio.to_thread(self.batch, list(ops))
