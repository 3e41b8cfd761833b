"""Forget on PostgreSQL (issue 25): after ``forget`` and ``memlab compact-store`` the deleted text is
in no table file of the database; plain ``DELETE`` leaves it there until the table is rewritten."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from pg_fixtures import pg_server  # noqa: F401 - the session fixture

from memlab.cli import main as memlab_main
from memlab.client import MemoryClient

pytestmark = pytest.mark.pg
SECRET = "SECRET-PG-5512"


def _table_files_holding(url: str, needle: str) -> list[str]:
    """Files of this database (heap, TOAST, index) that hold ``needle``, after a checkpoint wrote them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])
        oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
    base = data_dir / "base" / str(oid)
    return sorted(p.name for p in base.iterdir() if p.is_file() and needle.encode() in p.read_bytes())


@pytest.mark.parametrize("backend", ["rag", "profile"])
def test_forget_then_compact_leaves_no_byte_in_the_table_files(
    pg_server,  # noqa: F811
    tmp_path: Path,
    backend: str,
    capsys: pytest.CaptureFixture[str],  # noqa: F811
) -> None:
    url = pg_server.database_for(tmp_path)
    client = MemoryClient(backend, {"embedder": "hashing", "store": url})  # a database store needs no data_dir
    assert client.persistent
    client.remember("alice", [("user", f"My passport number is {SECRET}."), ("assistant", "Noted.")])
    client.remember("bob", [("user", "I keep bees.")])
    assert SECRET in client.recall("alice", "passport number", k=5).context
    assert _table_files_holding(url, SECRET), "the text reached the table files"
    client.forget("alice")
    client.close()
    assert memlab_main(["compact-store", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "rewritten:" in out and "WAL" in out
    assert _table_files_holding(url, SECRET) == [], "VACUUM FULL rewrote the tables without the deleted rows"
    again = MemoryClient(backend, {"embedder": "hashing", "store": url})
    assert again.recall("bob", "bees", k=1).items, "other users' data survives the rewrite"
    again.close()


@pytest.mark.parametrize("backend", ["rag", "profile"])
def test_nul_bytes_are_a_clear_4xx_on_postgres_too(pg_server, tmp_path: Path, backend: str) -> None:  # noqa: F811
    """issue 25: a NUL byte answered 500 (psycopg.DataError) on PostgreSQL and 201 on the file stores."""
    from fastapi.testclient import TestClient

    from memlab.errors import DataFormatError
    from memlab.server.app import create_app
    from memlab.server.settings import ServerSettings

    url = pg_server.database_for(tmp_path)
    settings = ServerSettings(backend=backend, backend_config={"embedder": "hashing", "store": url})
    with TestClient(create_app(settings)) as http:
        body = {"messages": [{"role": "user", "content": "a\x00b"}]}
        response = http.post("/v1/users/alice/messages", json=body)
        assert response.status_code == 422 and "NUL" in response.json()["error"]["message"]
        assert http.get("/v1/users/alice/memories/x%00y").status_code == 422
        assert http.get("/readyz").status_code == 200
        client = http.app.state.client  # type: ignore[attr-defined]
        with pytest.raises(DataFormatError, match="NUL"):
            client.remember("alice", [("user", "a\x00b")])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rag", "profile"])
def test_schemathesis_finds_no_server_error_on_postgres(pg_server, tmp_path: Path, backend: str) -> None:  # noqa: F811
    """issue 25: 0 responses 5xx on the PostgreSQL stores too; the service runs without --data-dir."""
    from test_service_ops import KEY, assert_no_server_errors

    from memlab.testing.server_process import start_memlab_serve

    url = pg_server.database_for(tmp_path)
    args = ("--backend", backend, f"--{backend}.store", url, f"--{backend}.embedder", "hashing")
    with start_memlab_serve(*args, log=tmp_path / "server.log", api_keys=KEY, timeout=180) as server:
        assert_no_server_errors(server.url, KEY, tmp_path)
    assert "Traceback" not in server.log.read_text(), server.log.read_text()[-4000:]
