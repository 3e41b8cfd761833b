"""The conformance suite for rag and profile on a real PostgreSQL + pgvector database."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_fixtures import pg_server  # noqa: F401 - the session fixture

from memlab.memory import Memory
from memlab.registry import create_backend
from memlab.testing import MemoryConformance

pytestmark = pytest.mark.pg


class _OnPostgres(MemoryConformance):
    backend = ""
    options: dict = {}
    stores_in_data_dir = False  # the database is the state

    @pytest.fixture(autouse=True)
    def _database(self, pg_server) -> None:  # noqa: F811
        self.pg = pg_server

    def make_memory(self, data_dir: Path) -> Memory:
        # One database per data directory: a fresh one per test, the same one on reopen.
        store = self.pg.database_for(data_dir)
        return create_backend(self.backend, {**self.options, "store": store}, data_dir=data_dir)


class TestRagPostgresHashing(_OnPostgres):
    backend, options = "rag", {"embedder": "hashing", "top_k": 3}


class TestRagPostgresHnswMiniLM(_OnPostgres):
    backend, options = "rag", {"top_k": 3, "index": "hnsw"}


class TestProfilePostgresHashing(_OnPostgres):
    backend, options = "profile", {"embedder": "hashing", "aspect_threshold": 0.5, "top_k": 3}


class TestProfilePostgresMiniLM(_OnPostgres):
    backend, options = "profile", {"top_k": 3}
