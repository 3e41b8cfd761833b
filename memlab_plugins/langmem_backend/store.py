"""A LangGraph ``BaseStore`` with semantic search, kept in one SQLite file of the data directory.

LangGraph's own ``SqliteStore`` searches through the ``sqlite-vec`` extension, which needs Python's
``sqlite3`` built with loadable extensions (memlab's Python 3.11 builds often are not:
``enable_load_extension`` is missing), and ``InMemoryStore`` forgets everything at exit. This store
implements LangGraph's store operations (get, put/delete, search, list namespaces) on plain SQLite:
each put commits at once (``synchronous=FULL``: a put that returned survives kill -9), vectors of a
memlab embedder are stored beside the values, and search is exact cosine over the namespace's rows
(one user's memories: hundreds, not millions). Several threads may call it (langmem writes from a
thread pool); one lock serialises them.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchItem, SearchOp

from memlab.embedders import Embedder
from memlab.integrations.store_ops import run_ops

_SEP = "\x1f"  # joins a namespace tuple into one column (not a character a namespace label carries)


def memory_text(value: dict[str, Any]) -> str:
    """The text a langmem value is about: ``{"kind": "Memory", "content": {"content": TEXT}}`` -> TEXT."""
    content = value.get("content", value)
    if isinstance(content, dict):
        inner = content.get("content")
        if isinstance(inner, str):
            return inner
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True)


class SQLiteMemoryStore(BaseStore):
    def __init__(self, path: Path, embedder: Embedder) -> None:
        self.path = path
        self.embedder = embedder
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS items (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
            " vector BLOB NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,"
            " PRIMARY KEY (namespace, key))"
        )
        self._db.commit()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise sqlite3.ProgrammingError(f"{self.path}: the store is closed")
        return self._db

    # ------------------------------------------------------------------ LangGraph's store protocol
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run_ops(ops, get=self._get, put=self._put, search=self._search, list_namespaces=self._namespaces)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)

    def _get(self, op: GetOp) -> Item | None:
        with self._lock:
            row = (
                self._conn()
                .execute(
                    "SELECT namespace, key, value, created_at, updated_at FROM items WHERE namespace = ? AND key = ?",
                    (_SEP.join(op.namespace), op.key),
                )
                .fetchone()
            )
        return None if row is None else _item(row)

    def _put(self, op: PutOp) -> None:
        namespace = _SEP.join(op.namespace)
        if op.value is None:
            with self._lock:
                self._conn().execute("DELETE FROM items WHERE namespace = ? AND key = ?", (namespace, op.key))
                self._conn().commit()
            return
        value = dict(op.value)
        vector = np.asarray(self.embedder.embed([memory_text(value)])[0], dtype=np.float32)
        now = datetime.now(timezone.utc).isoformat()
        with self._lock:
            self._conn().execute(
                "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, key) DO UPDATE SET "
                "value = excluded.value, vector = excluded.vector, updated_at = excluded.updated_at",
                (namespace, op.key, json.dumps(value), vector.tobytes(), now, now),
            )
            self._conn().commit()

    def _rows(self, prefix: tuple[str, ...]) -> list[tuple[Any, ...]]:
        joined = _SEP.join(prefix)
        with self._lock:
            return (
                self._conn()
                .execute(
                    "SELECT namespace, key, value, created_at, updated_at, vector FROM items "
                    "WHERE namespace = ? OR substr(namespace, 1, ?) = ? ORDER BY updated_at, key",
                    (joined, len(joined) + 1, joined + _SEP),
                )
                .fetchall()
            )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        rows = [r for r in self._rows(op.namespace_prefix) if _matches(json.loads(r[2]), op.filter)]
        if op.query and rows:
            query = np.asarray(self.embedder.embed([op.query], query=True)[0], dtype=np.float32)
            scores = np.stack([np.frombuffer(r[5], dtype=np.float32) for r in rows]) @ query
            ranked = sorted(zip(rows, scores.tolist()), key=lambda pair: -pair[1])
        else:
            ranked = [(r, None) for r in reversed(rows)]  # newest first, as LangGraph's stores list
        window = ranked[op.offset : op.offset + op.limit]
        return [_search_item(row, score) for row, score in window]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        with self._lock:
            names = sorted(
                {tuple(r[0].split(_SEP)) for r in self._conn().execute("SELECT DISTINCT namespace FROM items")}
            )
        if op.max_depth is not None:
            names = sorted({n[: op.max_depth] for n in names})
        return names[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ memlab's needs
    def count(self, namespace: tuple[str, ...]) -> int:
        with self._lock:
            row = self._conn().execute("SELECT COUNT(*) FROM items WHERE namespace = ?", (_SEP.join(namespace),))
            return int(row.fetchone()[0])

    def drop_namespace(self, namespace: tuple[str, ...]) -> None:
        with self._lock:
            self._conn().execute("DELETE FROM items WHERE namespace = ?", (_SEP.join(namespace),))
            self._conn().commit()

    def vacuum(self) -> None:
        """Rewrite the file so no freed page still holds a deleted memory's text."""
        with self._lock:
            self._conn().execute("VACUUM")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _matches(value: dict[str, Any], conditions: dict[str, Any] | None) -> bool:
    return not conditions or all(value.get(key) == wanted for key, wanted in conditions.items())


def _item(row: tuple[Any, ...]) -> Item:
    return Item(
        namespace=tuple(row[0].split(_SEP)),
        key=row[1],
        value=json.loads(row[2]),
        created_at=datetime.fromisoformat(row[3]),
        updated_at=datetime.fromisoformat(row[4]),
    )


def _search_item(row: tuple[Any, ...], score: float | None) -> SearchItem:
    return SearchItem(
        tuple(row[0].split(_SEP)),
        row[1],
        json.loads(row[2]),
        datetime.fromisoformat(row[3]),
        datetime.fromisoformat(row[4]),
        score=score,
    )
