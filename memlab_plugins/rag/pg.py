"""The rag store on PostgreSQL + pgvector: N stateless workers share one database.

Chosen by ``store: postgresql://...`` in the rag config (``--rag.store``); the local store
(``local_store``) stays the default. ``PgRagStore`` implements ``store.RagStore``. Chunks, their vectors and the sessions' turn counts are rows, and every request reads
the database, so a write acknowledged by one worker is seen by the next search on any other.

- ``memlab_rag_chunks``: one row per chunk (user, item id, session, turn, text, source, metadata,
  ``embedding vector(dim)``), primary key (user, item id), a unique key on (user, session, turn)
  for turn chunks, and an HNSW index (``vector_ip_ops``: inner product on unit vectors = cosine,
  what the FAISS index computes). ``seq`` keeps conversation (insertion) order.
- ``memlab_rag_sessions``: turns stored per (user, session).
- ``memlab_rag_meta``: schema version, and the embedder/chunking signature the vectors were made
  with (opening a database built with another embedder is an error, as for the file store).

One ingest is one transaction: it takes the session's row lock (``SELECT ... FOR UPDATE``), reads
the turn count, inserts the chunks numbered from it and writes the new count. Two workers
continuing one session at once therefore number its turns uniquely and without gaps; ingests into
other sessions and searches never wait for it. Embedding happens before the transaction (chunk texts
do not depend on the turn numbers), so the lock is held only for the inserts.

Retrieval is SQL: ``index: flat`` ranks every chunk of the user exactly (the user's rows are taken
first, then ordered by ``<#>``), ``index: hnsw`` lets the HNSW index answer with
``hnsw.ef_search`` (and pgvector >= 0.8's iterative scan); when the shared index's candidates were
mostly other users' rows and fewer than k remain, the user's rows are ranked exactly instead.
Dense scoring only: BM25 fusion, neighbour expansion and BGE-M3 sparse/ColBERT re-ranking need the
whole per-user chunk set in memory and are refused with a configuration error on this store
(``RagMemory`` checks ``unsupported`` before it opens one).
Deletion removes the row; PostgreSQL frees the dead tuple at the next (auto)vacuum.
"""

from __future__ import annotations

import json
from typing import Any

from memlab.embedders import Embedder
from memlab.errors import DataFormatError, MemlabError, NotFoundError
from memlab.memory import MemoryFilter
from memlab.pg import (
    ensure_schema,
    ensure_vector_extension,
    get_meta,
    open_pool,
    redact,
    reject_nul,
    set_meta,
    vector_literal,
)
from memlab.types import MemoryItem, Session
from memlab_plugins.rag.index import IndexSpec
from memlab_plugins.rag.store import Chunker, RagStore, Vectors

PREFIX = "memlab_rag_"
SCHEMA_VERSION = 1


def unsupported(config: Any) -> list[str]:
    """Settings the PostgreSQL store cannot honour (they need the user's whole chunk set in memory)."""
    problems = []
    if config.lexical != "none":
        problems.append(f"lexical={config.lexical!r} (use lexical='none')")
    if config.neighbours:
        problems.append(f"neighbours={config.neighbours} (use 0)")
    if config.scoring != "dense":
        problems.append(f"scoring={config.scoring!r} (use scoring='dense')")
    return problems


def _create_schema(dim: int, spec: IndexSpec) -> Any:
    def create(conn: Any) -> None:
        conn.execute(
            f"""CREATE TABLE {PREFIX}sessions (
                user_id TEXT NOT NULL, session_id TEXT NOT NULL, turns INTEGER NOT NULL,
                PRIMARY KEY (user_id, session_id))"""
        )
        conn.execute(
            f"""CREATE TABLE {PREFIX}chunks (
                seq BIGSERIAL NOT NULL, user_id TEXT NOT NULL, item_id TEXT NOT NULL, session_id TEXT,
                turn_index INTEGER, text TEXT NOT NULL, source JSONB NOT NULL, metadata JSONB NOT NULL,
                embedding vector({int(dim)}) NOT NULL,
                PRIMARY KEY (user_id, item_id))"""
        )
        conn.execute(f"CREATE INDEX {PREFIX}chunks_order ON {PREFIX}chunks (user_id, seq)")
        conn.execute(
            f"CREATE UNIQUE INDEX {PREFIX}chunks_turn ON {PREFIX}chunks (user_id, session_id, turn_index)"
            " WHERE turn_index IS NOT NULL"
        )
        conn.execute(
            f"CREATE INDEX {PREFIX}chunks_hnsw ON {PREFIX}chunks USING hnsw (embedding vector_ip_ops)"
            f" WITH (m = {int(spec.hnsw_m)}, ef_construction = {int(spec.ef_construction)})"
        )

    return create


MIGRATIONS: dict[int, Any] = {}  # version -> upgrade to version + 1 (none yet: schema 1 is the first)


class PgRagStore(RagStore):
    """Every user's chunks, vectors and turn counts in one PostgreSQL database (see the module doc).

    ``signature`` (embedder, chunking) is stored with the tables and checked on open, as the
    files' is; the data directory (if the backend has one) is neither written nor locked, so any
    number of workers may share the database.
    """

    def __init__(
        self, url: str, *, embedder: Embedder, signature: dict[str, Any], spec: IndexSpec, pool_size: int = 4
    ) -> None:
        self.url = url
        self.embedder, self.signature, self.spec = embedder, signature, spec
        self._iterative_scan = False
        self._pool = open_pool(self.url, max_size=pool_size)
        try:
            ensure_vector_extension(self._pool, self.url)
            ensure_schema(
                self._pool,
                PREFIX,
                SCHEMA_VERSION,
                _create_schema(self.embedder.dim, spec),
                MIGRATIONS,
                url=self.url,
            )
            self._check_signature()
            self._iterative_scan = self._vector_version() >= (0, 8)
        except BaseException:
            self.close()
            raise

    @property
    def _db(self) -> Any:
        """The open connection pool (``_pool`` is None only after ``close``, and then this raises)."""
        if self._pool is None:
            raise MemlabError("the rag PostgreSQL store is closed")
        return self._pool

    def _vector_version(self) -> tuple[int, ...]:
        with self._db.connection() as conn:
            (version,) = conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()
        return tuple(int(p) for p in version.split(".")[:2] if p.isdigit())

    def _check_signature(self) -> None:
        wanted = {**self.signature, "dim": int(self.embedder.dim)}
        with self._db.connection() as conn, conn.transaction():
            stored = get_meta(conn, PREFIX, "signature")
            if stored is None:
                set_meta(conn, PREFIX, "signature", json.dumps(wanted, sort_keys=True))
                return
        have = json.loads(stored)
        if have != wanted:
            diff = {k: (have.get(k), wanted.get(k)) for k in set(have) | set(wanted) if have.get(k) != wanted.get(k)}
            raise DataFormatError(
                f"{redact(self.url)}: its rag tables were built with other settings (stored vs configured: {diff}); "
                "use the same rag embedder/model/chunking, or another database"
            )

    # ------------------------------------------------------------------ ingest
    def next_turn(self, user_id: str, session_id: str) -> int:
        with self._db.connection() as conn:
            row = conn.execute(
                f"SELECT turns FROM {PREFIX}sessions WHERE user_id=%s AND session_id=%s", (user_id, session_id)
            ).fetchone()
        return int(row[0]) if row else 0

    def check_ready(self) -> None:
        """A real read: the store's schema version, from the database."""
        with self._db.connection() as conn:
            conn.execute(f"SELECT value FROM {PREFIX}meta WHERE key='schema_version'").fetchone()

    def add(self, user_id: str, session: Session, chunk: Chunker, vectors: Vectors) -> int:
        reject_nul(session)  # PostgreSQL text cannot hold U+0000: a clear error, nothing written
        # The backend embedded before the transaction: the row lock is held only for the inserts.
        dense = vectors.dense
        with self._db.connection() as conn, conn.transaction():
            conn.execute(
                f"INSERT INTO {PREFIX}sessions VALUES (%s, %s, 0) ON CONFLICT DO NOTHING", (user_id, session.id)
            )
            (start,) = conn.execute(
                f"SELECT turns FROM {PREFIX}sessions WHERE user_id=%s AND session_id=%s FOR UPDATE",
                (user_id, session.id),
            ).fetchone()
            chunks = chunk(int(start))
            if len(chunks) != len(dense):  # pragma: no cover - chunk texts never depend on numbering
                raise AssertionError("the chunks changed with the turn numbering")
            if chunks:
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {PREFIX}chunks (user_id, item_id, session_id, turn_index, text, source, metadata,"
                        " embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s::vector)",
                        [
                            (
                                user_id,
                                c.id,
                                session.id,
                                c.source.get("turn_index"),
                                c.text,
                                json.dumps(c.source),
                                json.dumps(c.metadata),
                                vector_literal(v),
                            )
                            for c, v in zip(chunks, dense)
                        ],
                    )
            conn.execute(
                f"UPDATE {PREFIX}sessions SET turns=%s WHERE user_id=%s AND session_id=%s",
                (int(start) + len(session.messages), user_id, session.id),
            )
        return int(start)

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _row_item(row: Any, score: float | None = None) -> MemoryItem:
        _, item_id, text, source, metadata = row[:5]
        return MemoryItem(id=item_id, text=text, source=source, metadata=metadata, score=score)

    def search(self, user_id: str, query: str, k: int, filters: MemoryFilter | None = None) -> list[MemoryItem]:
        if filters is not None:
            return self._search_filtered(user_id, query, k, filters)
        q = vector_literal(self.embedder.embed([query], query=True)[0])
        columns = "seq, item_id, text, source, metadata"
        with self._db.connection() as conn, conn.transaction():
            rows = []
            if self.spec.kind == "hnsw":
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(max(self.spec.ef_search, k))}")
                if self._iterative_scan:
                    conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                sql = (
                    f"SELECT {columns}, -(embedding <#> %s::vector) FROM {PREFIX}chunks WHERE user_id=%s"
                    " ORDER BY embedding <#> %s::vector LIMIT %s"
                )
                rows = conn.execute(sql, (q, user_id, q, k)).fetchall()
            if len(rows) < k:
                # Flat, or HNSW whose candidates were mostly other users' rows (the index is shared
                # and pgvector < 0.8 cannot continue the scan): rank this user's rows exactly,
                # taken first (MATERIALIZED keeps the planner off the approximate index).
                sql = (
                    f"WITH mine AS MATERIALIZED (SELECT {columns}, embedding FROM {PREFIX}chunks WHERE user_id=%s)"
                    f" SELECT {columns}, -(embedding <#> %s::vector) FROM mine"
                    " ORDER BY embedding <#> %s::vector, seq LIMIT %s"
                )
                rows = conn.execute(sql, (user_id, q, q, k)).fetchall()
        rows.sort(key=lambda r: r[0])  # conversation order, as the file store returns them
        return [self._row_item(r, float(r[5])) for r in rows]

    def _search_filtered(self, user_id: str, query: str, k: int, filters: MemoryFilter) -> list[MemoryItem]:
        """The k nearest among the chunks ``filters`` selects: the user's rows ranked exactly, then filtered."""
        q = vector_literal(self.embedder.embed([query], query=True)[0])
        with self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT seq, item_id, text, source, metadata, -(embedding <#> %s::vector) FROM {PREFIX}chunks"
                " WHERE user_id=%s ORDER BY embedding <#> %s::vector, seq",
                (q, user_id, q),
            ).fetchall()
        found = [(r[0], item) for r in rows if filters.matches(item := self._row_item(r, float(r[5])))][:k]
        found.sort(key=lambda pair: pair[0])  # conversation order
        return [item for _, item in found]

    def items(self, user_id: str) -> list[MemoryItem]:
        with self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT seq, item_id, text, source, metadata FROM {PREFIX}chunks WHERE user_id=%s ORDER BY seq",
                (user_id,),
            ).fetchall()
        return [self._row_item(r) for r in rows]

    def sessions(self, user_id: str) -> dict[str, int]:
        with self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT session_id, turns FROM {PREFIX}sessions WHERE user_id=%s ORDER BY session_id", (user_id,)
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    # ------------------------------------------------------------------ deletion, export
    def delete(self, user_id: str, item_id: str) -> None:
        with self._db.connection() as conn, conn.transaction():
            cursor = conn.execute(f"DELETE FROM {PREFIX}chunks WHERE user_id=%s AND item_id=%s", (user_id, item_id))
            if cursor.rowcount == 0:
                raise NotFoundError(f"no memory item {item_id!r} for user {user_id!r}")

    def reset(self, user_id: str) -> None:
        with self._db.connection() as conn, conn.transaction():
            conn.execute(f"DELETE FROM {PREFIX}chunks WHERE user_id=%s", (user_id,))
            conn.execute(f"DELETE FROM {PREFIX}sessions WHERE user_id=%s", (user_id,))

    def close(self) -> None:
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.close()
