"""rag and profile on PostgreSQL behave like their file stores: ids, deletion, export, errors;
and mem0 through its own pgvector vector store in the same database."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from pg_fixtures import pg_server  # noqa: F401 - the session fixture

from memlab.errors import ConfigurationError, DataFormatError, MemlabError, NotFoundError
from memlab.memory import Memory
from memlab.pg import DatabaseError, config_uses_database
from memlab.registry import create_backend
from memlab.testing import MemoryConformance, session

pytestmark = pytest.mark.pg
SECRET = "My social security number is SECRET-778899."
HISTORY = [
    session("s1", ("user", "I adopted a cat named Pixel."), ("assistant", "Lovely!"), ("user", SECRET)),
    session("s2", ("user", "I moved to Lisbon last year."), ("assistant", "Nice city.")),
    session(
        "s1",
        ("user", "Pixel likes tuna."),
    ),
]


def _ingest(memory: Memory, user: str = "alice") -> list[int]:
    return [memory.ingest(s, user_id=user).first_turn for s in HISTORY]


def _rows_containing(url: str, needle: str) -> int:
    """Live rows of any memlab table whose text contains ``needle``."""
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_name LIKE 'memlab_%%'"
            " OR table_schema='memlab_profile'"
        ).fetchall()
        return sum(
            conn.execute(f'SELECT count(*) FROM "{s}"."{t}" x WHERE x::text LIKE %s', (f"%{needle}%",)).fetchone()[0]
            for s, t in tables
        )


# ---------------------------------------------------------------------- rag
def test_rag_on_postgres_matches_the_file_store(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    on_files = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path / "files")
    on_pg = create_backend("rag", {"embedder": "hashing", "store": url}, data_dir=tmp_path / "pg")
    try:
        assert _ingest(on_pg) == _ingest(on_files) == [0, 0, 3]
        strip = lambda doc: {**doc, "items": [{**i, "score": None} for i in doc["items"]]}  # noqa: E731
        assert strip(on_pg.export("alice")) == strip(on_files.export("alice"))
        assert [i.id for i in on_pg.list_memories(user_id="alice")] == ["s1#0", "s1#1", "s1#2", "s2#0", "s2#1", "s1#3"]
        found = on_pg.retrieve("what is my cat called?", user_id="alice", k=2)
        assert [i.id for i in found.items] == [
            i.id for i in on_files.retrieve("what is my cat called?", user_id="alice", k=2).items
        ]
        on_pg.delete("s1#2", user_id="alice")
        assert (
            "SECRET" not in str(on_pg.export("alice"))
            and "SECRET" not in on_pg.retrieve("social security", user_id="alice").context
        )
        assert _rows_containing(url, "SECRET-778899") == 0
        with pytest.raises(NotFoundError):
            on_pg.delete("s1#2", user_id="alice")
        with pytest.raises(NotFoundError):
            on_pg.delete("s1#0", user_id="bob")
        on_pg.reset("alice")
        assert on_pg.export("alice")["items"] == [] and _rows_containing(url, "Pixel") == 0
        assert on_pg.ingest(HISTORY[0], user_id="alice").first_turn == 0, "forget resets the turn numbering"
    finally:
        on_files.close()
        on_pg.close()


def test_rag_postgres_refuses_what_it_cannot_do(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    with pytest.raises(ConfigurationError, match="lexical='bm25'"):
        create_backend("rag", {"embedder": "hashing", "store": url, "lexical": "bm25"})
    with pytest.raises(MemlabError, match="store must be a PostgreSQL URL"):
        create_backend("rag", {"embedder": "hashing", "store": "mysql://x"})
    create_backend("rag", {"embedder": "hashing", "store": url}).close()
    with pytest.raises(DataFormatError, match="built with other settings"):
        create_backend("rag", {"embedder": "hashing", "store": url, "chunking": "session"})
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE memlab_rag_meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(DataFormatError, match="schema version 99, newer"):
        create_backend("rag", {"embedder": "hashing", "store": url})
    missing = url.replace("/t_", "/no_such_db_")
    with pytest.raises(DatabaseError, match="cannot connect"):
        create_backend("rag", {"embedder": "hashing", "store": missing})
    assert config_uses_database({"store": url}) and not config_uses_database({"store": None})


# ---------------------------------------------------------------------- profile
def _comparable(export: dict) -> dict:
    """A profile export without what differs between two stores: random entry ids, times, sequence numbers."""
    entries = [(e["aspect"], e["value"], e["version"], e["valid_from"], e["valid_to"]) for e in export["entries"]]
    ops = [(o["op"], o["version"], o["session_id"]) for o in export["operations"]]
    return {"entries": sorted(entries), "ops": ops, "sessions": export["sessions"], "turns": export["turns"]}


def test_profile_on_postgres_matches_the_sqlite_store(pg_server, tmp_path: Path) -> None:  # noqa: F811
    url = pg_server.database_for(tmp_path)
    config = {"embedder": "hashing", "aspect_threshold": 0.5}
    on_files = create_backend("profile", config, data_dir=tmp_path / "files")
    on_pg = create_backend("profile", {**config, "store": url}, data_dir=tmp_path / "pg")
    try:
        assert _ingest(on_pg) == _ingest(on_files) == [0, 0, 3]
        assert _comparable(on_pg.export("alice")) == _comparable(on_files.export("alice"))
        # Sorted: entries of one session are ordered by their (random) entry ids.
        texts = lambda m: sorted(i.text for i in m.list_memories(user_id="alice"))  # noqa: E731
        assert texts(on_pg) == texts(on_files)
        for item in [i for i in on_pg.list_memories(user_id="alice") if "SECRET" in i.text]:
            on_pg.delete(item.id, user_id="alice")
        assert "SECRET" not in str(on_pg.export("alice"))
        assert "SECRET" not in on_pg.retrieve("social security number", user_id="alice").context
        assert _rows_containing(url, "SECRET-778899") == 0
        with pytest.raises(NotFoundError):
            on_pg.delete("p_nothere", user_id="alice")
        on_pg.reset("alice")
        assert _rows_containing(url, "Pixel") == 0
    finally:
        on_files.close()
        on_pg.close()


def test_profile_writes_of_one_user_are_serialised_across_store_instances(pg_server, tmp_path: Path) -> None:  # noqa: F811
    """Two backends on one database (two workers) continuing one session from many threads at once."""
    import threading

    url = pg_server.database_for(tmp_path)
    workers = [create_backend("profile", {"embedder": "hashing", "store": url}) for _ in range(2)]
    reports: list[int] = []

    def write(worker: Memory, n: int) -> None:
        for i in range(6):
            reports.append(
                worker.ingest(session("s", ("user", f"Note {n}.{i}: I like item {n}{i}.")), user_id="dana").first_turn
            )

    threads = [threading.Thread(target=write, args=(workers[n % 2], n)) for n in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(reports) == list(range(24)), "each ingest got its own turn, none skipped"
        turns = workers[0].export("dana")["turns"]
        assert sorted(t["turn_index"] for t in turns) == list(range(24))
    finally:
        for w in workers:
            w.close()


# ---------------------------------------------------------------------- mem0 on pgvector
class TestMem0OnPgvector(MemoryConformance):
    """mem0 with its own pgvector vector store (mem0's config, passed through memlab's `vector_store`)."""

    @pytest.fixture(autouse=True)
    def _database(self, pg_server) -> None:  # noqa: F811
        self.pg = pg_server

    def make_memory(self, data_dir: Path) -> Memory:
        vector_store = {
            "provider": "pgvector",
            "config": {
                "connection_string": self.pg.database_for(data_dir),
                "collection_name": "memlab_mem0",
                "embedding_model_dims": 256,
                "hnsw": True,
            },
        }
        return create_backend(
            "mem0", {"embedder": "hashing", "top_k": 3, "vector_store": vector_store}, data_dir=data_dir
        )


def test_profile_on_postgres_update_history_and_a_changed_embedder(pg_server, tmp_path: Path) -> None:  # noqa: F811
    from memlab.embedders.hashing import HashingEmbedder

    url = pg_server.database_for(tmp_path)
    config = {"embedder": "hashing", "aspect_threshold": 0.5, "store": url}
    memory = create_backend("profile", config)
    try:
        _ingest(memory)
        entry = next(i for i in memory.list_memories(user_id="alice") if i.id.startswith("p_") and "Lisbon" in i.text)
        updated = memory.update(entry.id, "I moved to Porto.", user_id="alice")
        assert "Porto" in updated.text
        assert len(memory.history(entry.id, user_id="alice")) == 2
    finally:
        memory.close()
    # Another embedder: the stored vectors are recomputed (rows addressed by their keys).
    reopened = create_backend("profile", config, embedder=HashingEmbedder(128))
    try:
        assert "Porto" in reopened.retrieve("where did I move?", user_id="alice").context
        with psycopg.connect(url) as conn:
            lengths = {r[0] for r in conn.execute("SELECT length(vector) FROM memlab_profile.turns").fetchall()}
        assert lengths == {128 * 4}
    finally:
        reopened.close()
