"""The REST service over real HTTP: a uvicorn server process on 127.0.0.1, driven with httpx.

Most tests serve ``notes``, a small persistent backend defined here that declares every capability
(list, update, delete, history, persist), so each endpoint does real work; the restart and 405
tests serve the built-in ``full_context``. The server process registers ``notes`` and then runs
``memlab.server.cli.main``, exactly what ``memlab serve`` runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memlab.memory import BackendConfig, Capability, Memory, MemoryFilter, render_turns, turn_source
from memlab.testing.server_process import (
    ServerProcess,
    free_port,
    memlab_serve_command,
    memlab_serve_env,
    start_memlab_serve,
)
from memlab.types import MemoryItem, Retrieval, Session

TESTS = Path(__file__).resolve().parent
ADMIN_KEY = "admin-key-0123456789abcdef"
ALICE_KEY = "alice-key-0123456789abcdef"
KEYS_ENV = f"{ADMIN_KEY},{ALICE_KEY}:alice"
PIXEL = "I adopted a grey cat named Pixel last spring."
BEES = "I keep bees on the roof of my apartment in Lisbon."


# ---------------------------------------------------------------------- a backend with every capability
class NotesMemory(Memory):
    """Each message is a note with a globally unique id; one JSON file per user; keyword search."""

    name = "notes"
    description = "Test backend: notes with list/update/delete/history, persisted as JSON per user."
    Config = BackendConfig
    capabilities = frozenset(Capability)

    def __init__(self, config=None, *, data_dir=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir)
        self._users: dict[str, dict[str, Any]] = {}

    def _state(self, user_id: str) -> dict[str, Any]:
        if user_id not in self._users:
            path = self._path(user_id)
            self._users[user_id] = (
                json.loads(path.read_text()) if path and path.exists() else {"notes": {}, "events": {}}
            )
        return self._users[user_id]

    def _path(self, user_id: str) -> Path | None:
        return self.data_dir / f"{user_id}.json" if self.data_dir else None

    def _save(self, user_id: str) -> None:
        path = self._path(user_id)
        if path is not None:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._users[user_id]))
            tmp.replace(path)

    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        turns = [
            n["source"]["turn_index"]
            for n in self._state(user_id)["notes"].values()
            if n["source"]["session_id"] == session_id
        ]
        events = [e for e in self._state(user_id)["events"].values() if e and e[0].get("session_id") == session_id]
        return max([t + 1 for t in turns] + [e[0]["turn_index"] + 1 for e in events], default=0)

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        state = self._state(user_id)
        for offset, message in enumerate(session.messages):
            note_id = f"n-{uuid.uuid4().hex}"
            source = turn_source(session, first_turn + offset, message)
            state["notes"][note_id] = {"id": note_id, "text": message.content, "source": source}
            state["events"][note_id] = [{"event": "ADD", "text": message.content, **source}]
        self._save(user_id)

    def _retrieve(self, query: str, *, user_id: str, k: int, filters: MemoryFilter | None = None) -> Retrieval:
        words = set(re.findall(r"\w+", query.lower()))
        scored = []
        for note in self._state(user_id)["notes"].values():
            overlap = len(words & set(re.findall(r"\w+", note["text"].lower())))
            item = MemoryItem(**note, score=float(overlap))
            if overlap and (filters is None or filters.matches(item)):
                scored.append(item)
        scored.sort(key=lambda i: -(i.score or 0))
        items = scored[:k]
        return Retrieval(items=items, context=render_turns(items))

    def _reset(self, user_id: str) -> None:
        self._users[user_id] = {"notes": {}, "events": {}}
        self._save(user_id)

    def _note(self, item_id: str, user_id: str) -> dict[str, Any]:
        try:
            return self._state(user_id)["notes"][item_id]
        except KeyError:
            raise KeyError(f"user {user_id!r} has no note {item_id!r}") from None

    def _list(self, user_id: str) -> list[MemoryItem]:
        return [MemoryItem(**n) for n in self._state(user_id)["notes"].values()]

    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        note = self._note(item_id, user_id)
        note["text"] = text
        self._state(user_id)["events"][item_id].append({"event": "UPDATE", "text": text})
        self._save(user_id)
        return MemoryItem(**note)

    def _delete(self, item_id: str, *, user_id: str) -> None:
        self._note(item_id, user_id)
        del self._state(user_id)["notes"][item_id]
        self._state(user_id)["events"][item_id].append({"event": "DELETE"})
        self._save(user_id)

    def _history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        if item_id not in self._state(user_id)["events"]:
            raise KeyError(f"user {user_id!r} has no note {item_id!r}")
        return list(self._state(user_id)["events"][item_id])


def serve(argv: list[str]) -> int:
    """What the server process runs: register ``notes``, then ``memlab serve``'s main."""
    from memlab.registry import backends
    from memlab.server.cli import main

    backends.register("notes", NotesMemory)
    return main(argv)


# ---------------------------------------------------------------------- running a server process
# ``python -c`` this instead of ``-m memlab.server.cli``: the child registers ``notes`` first.
LAUNCHER = (
    "-c",
    f"import sys; sys.path.insert(0, {str(TESTS)!r}); from test_server import serve; sys.exit(serve(sys.argv[1:]))",
)


def start_server(tmp: Path, *args: str, keys: str | None = KEYS_ENV, ready_timeout: float = 60.0) -> ServerProcess:
    """``memlab serve *args`` (``notes`` registered) with ``keys`` as MEMLAB_API_KEYS, its output in ``tmp``."""
    log = tmp / f"server-{uuid.uuid4().hex[:8]}.log"
    return start_memlab_serve(*args, log=log, api_keys=keys, entry=LAUNCHER, timeout=ready_timeout)


def serve_until_exit(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``memlab serve *args`` without API keys, run until it exits: a start that must be refused."""
    command = memlab_serve_command(*args, port=free_port())
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=memlab_serve_env())


def http(server: ServerProcess, key: str | None = ADMIN_KEY, *, header: str = "bearer") -> httpx.Client:
    headers = {}
    if key is not None:
        headers = {"Authorization": f"Bearer {key}"} if header == "bearer" else {"X-API-Key": key}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30.0, trust_env=False)


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["status"] == response.status_code
    assert body["error"]["message"], "every error says what went wrong"
    return body["error"]


@pytest.fixture(scope="module")
def notes_server(tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    tmp = tmp_path_factory.mktemp("notes-server")
    server = start_server(tmp, "--backend", "notes", "--data-dir", str(tmp / "data"), "--max-body-bytes", "65536")
    yield server
    server.stop()


def add(client: httpx.Client, user: str, *texts: str, session_id: str = "s1") -> httpx.Response:
    return client.post(
        f"/v1/users/{user}/messages",
        json={"session_id": session_id, "messages": [{"role": "user", "content": t} for t in texts]},
    )


# ---------------------------------------------------------------------- tests
def test_auth_required_and_enforced(notes_server: ServerProcess) -> None:
    with http(notes_server, None) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        missing = anonymous.post("/v1/users/alice/search", json={"query": "cat"})
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert "missing API key" in error_of(missing)["message"]
        assert anonymous.get("/v1/info").status_code == 401
        assert add(anonymous, "alice", PIXEL).status_code == 401
    with http(notes_server, "wrong-key-0123456789abcdef") as wrong:
        assert error_of(wrong.get("/v1/info"))["message"] == "invalid API key"
    with http(notes_server) as admin:
        info = admin.get("/v1/info").json()
        assert info["backend"] == "notes" and info["persistent"] and info["auth"]
        assert set(info["capabilities"]) == {c.value for c in Capability}
    with http(notes_server, ALICE_KEY, header="x-api-key") as alice:
        assert add(alice, "alice", PIXEL).status_code == 201
        assert "Pixel" in alice.post("/v1/users/alice/search", json={"query": "cat Pixel"}).json()["context"]
        # A key bound to alice cannot act for bob on any endpoint.
        for method, path, body in [
            ("POST", "/v1/users/bob/messages", {"messages": [{"role": "user", "content": "hi"}]}),
            ("POST", "/v1/users/bob/search", {"query": "x"}),
            ("GET", "/v1/users/bob/memories", None),
            ("GET", "/v1/users/bob/memories/n-1", None),
            ("PATCH", "/v1/users/bob/memories/n-1", {"text": "x"}),
            ("DELETE", "/v1/users/bob/memories/n-1", None),
            ("GET", "/v1/users/bob/memories/n-1/history", None),
            ("DELETE", "/v1/users/bob", None),
        ]:
            response = alice.request(method, path, json=body)
            assert response.status_code == 403, (method, path, response.text)
            assert error_of(response)["code"] == "forbidden"


def test_user_cannot_reach_another_users_memories_by_id(notes_server: ServerProcess) -> None:
    with http(notes_server) as admin:
        assert add(admin, "carol", PIXEL).status_code == 201
        assert add(admin, "dave", BEES).status_code == 201
        dave_id = admin.get("/v1/users/dave/memories").json()["items"][0]["id"]
        carol_items = admin.get("/v1/users/carol/memories").json()["items"]
        assert [i["text"] for i in carol_items] == [PIXEL]
        for method, path, body in [
            ("GET", f"/v1/users/carol/memories/{dave_id}", None),
            ("PATCH", f"/v1/users/carol/memories/{dave_id}", {"text": "overwritten"}),
            ("GET", f"/v1/users/carol/memories/{dave_id}/history", None),
            ("DELETE", f"/v1/users/carol/memories/{dave_id}", None),
        ]:
            response = admin.request(method, path, json=body)
            assert response.status_code == 404, (method, path, response.text)
            assert dave_id in error_of(response)["message"]
        assert "bees" not in admin.post("/v1/users/carol/search", json={"query": "bees roof"}).text
        # dave's memory is untouched, and dave can manage it himself.
        item = admin.get(f"/v1/users/dave/memories/{dave_id}").json()
        assert item["text"] == BEES
        assert (
            admin.patch(f"/v1/users/dave/memories/{dave_id}", json={"text": "I keep bees."}).json()["text"]
            == "I keep bees."
        )
        assert admin.delete(f"/v1/users/dave/memories/{dave_id}").status_code == 204
        events = admin.get(f"/v1/users/dave/memories/{dave_id}/history").json()["events"]
        assert [e["event"] for e in events] == ["ADD", "UPDATE", "DELETE"]
        assert admin.get(f"/v1/users/dave/memories/{dave_id}").status_code == 404
        assert admin.delete("/v1/users/carol").status_code == 204
        assert admin.get("/v1/users/carol/memories").json()["items"] == []


def test_oversized_and_malformed_bodies_get_4xx_with_a_message(notes_server: ServerProcess) -> None:
    with http(notes_server) as admin:
        big = {"messages": [{"role": "user", "content": "x" * 70_000}]}
        too_big = admin.post("/v1/users/alice/messages", json=big)
        assert too_big.status_code == 413
        assert error_of(too_big)["message"] == "request body too large: the limit is 65536 bytes"

        def chunks():  # no Content-Length: the server counts while it reads
            for _ in range(20):
                yield b" " * 8192

        chunked = admin.post("/v1/users/alice/search", content=chunks(), headers={"content-type": "application/json"})
        assert chunked.status_code == 413 and error_of(chunked)["code"] == "payload_too_large"

        malformed = admin.post(
            "/v1/users/alice/search", content=b'{"query": "cat"', headers={"content-type": "application/json"}
        )
        assert malformed.status_code == 422 and error_of(malformed)["code"] == "malformed_json"

        cases = [
            ({"query": 42}, "body.query"),
            ({"query": "cat", "k": 0}, "body.k"),
            ({"query": "cat", "unknown": 1}, "body.unknown"),
            ([1, 2, 3], "body"),
        ]
        for body, where in cases:
            response = admin.post("/v1/users/alice/search", json=body)
            assert response.status_code == 422, body
            error = error_of(response)
            assert where in error["message"] and error["details"], error
        bad_role = add(admin, "alice", "x")
        assert bad_role.status_code == 201
        bad = admin.post("/v1/users/alice/messages", json={"messages": [{"role": "robot", "content": "x"}]})
        assert bad.status_code == 422 and "role" in error_of(bad)["message"]
        many = admin.post("/v1/users/alice/messages", json={"messages": [{"role": "user", "content": "x"}] * 501})
        assert many.status_code == 422 and "at most 500" in error_of(many)["message"]
        bad_user = admin.post("/v1/users/not%20valid/search", json={"query": "x"})
        assert bad_user.status_code == 422 and "user_id" in error_of(bad_user)["message"]
        empty_update = admin.patch("/v1/users/alice/memories/whatever", json={"text": "   "})
        assert empty_update.status_code == 422
        unknown = admin.get("/v1/nothing-here")
        assert unknown.status_code == 404 and "no such endpoint" in error_of(unknown)["message"]


def test_restart_keeps_data_and_unsupported_capability_is_405(tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = ("--backend", "full_context", "--data-dir", str(data), "--full_context.max_tokens", "5000")
    server = start_server(tmp_path, *args)
    try:
        with http(server) as admin:
            assert add(admin, "alice", PIXEL, session_id="monday").json()["first_turn"] == 0
            item_id = admin.get("/v1/users/alice/memories").json()["items"][0]["id"]
            assert item_id == "monday#0"
            assert admin.get(f"/v1/users/alice/memories/{quote(item_id, safe='')}").json()["text"] == PIXEL
            item_id = quote(item_id, safe="")  # ids are path segments: percent-encode them ('#')
            refused = admin.patch(f"/v1/users/alice/memories/{item_id}", json={"text": "changed"})
            assert refused.status_code == 405
            error = error_of(refused)
            assert error["code"] == "capability_not_supported" and "does not support 'update'" in error["message"]
            assert refused.headers["allow"] == "GET, DELETE"
            no_history = admin.get(f"/v1/users/alice/memories/{item_id}/history")
            assert no_history.status_code == 405 and no_history.headers.get("allow", "") == ""  # nothing allowed
    finally:
        server.stop()
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal: -SIGTERM is a clean exit.
    assert server.process.returncode in (0, -signal.SIGTERM), server.log.read_text()
    assert "Traceback" not in server.log.read_text()
    server = start_server(tmp_path, *args)
    try:
        with http(server) as admin:
            found = admin.post("/v1/users/alice/search", json={"query": "what is my cat called?"}).json()
            assert "Pixel" in found["context"]
            assert found["items"][0]["source"] == {"session_id": "monday", "turn_index": 0, "role": "user"}
            assert add(admin, "alice", "More.", session_id="monday").json()["first_turn"] == 1
            assert admin.post("/v1/users/bob/search", json={"query": "cat"}).json()["items"] == []
    finally:
        server.stop()


def test_refuses_unsafe_configurations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import uvicorn

    from memlab.server.cli import main

    monkeypatch.delenv("MEMLAB_API_KEYS", raising=False)

    def must_not_serve(*args: object, **kwargs: object) -> None:
        raise AssertionError("an unsafe configuration got as far as starting uvicorn")

    monkeypatch.setattr(uvicorn, "run", must_not_serve)
    monkeypatch.setattr(uvicorn, "Server", must_not_serve)
    assert main(["--host", "0.0.0.0", "--data-dir", str(tmp_path)]) == 2
    assert "refusing to serve on '0.0.0.0' without an API key" in capsys.readouterr().err
    assert main(["--backend", "none", "--data-dir", str(tmp_path)]) == 2
    assert "does not declare the 'persist' capability" in capsys.readouterr().err
    assert main(["--backend", "full_context"]) == 2
    assert "--data-dir is required" in capsys.readouterr().err
    assert main(["--api-key", "short", "--data-dir", str(tmp_path)]) == 2
    assert "16-256 characters" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "--full_context.no_such_option", "1"]) == 2
    assert "no_such_option" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "--rag.top_k", "3"]) == 2
    assert "use --full_context.top_k" in capsys.readouterr().err


def test_settings_key_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    from memlab.server.settings import ServerSettings

    monkeypatch.setenv("MEMLAB_API_KEYS", f" {ADMIN_KEY} , {ALICE_KEY}:alice|al.ice@x ")
    settings = ServerSettings(host="10.0.0.5").with_env_keys()
    assert [k.users for k in settings.api_keys] == [(), ("alice", "al.ice@x")]
    settings.check_startable()  # keys present: a non-loopback host is allowed
    assert settings.api_keys[1].allows("al.ice@x") and not settings.api_keys[1].allows("bob")
    assert ADMIN_KEY not in repr(settings), "keys never appear in reprs or logs"


def test_rejected_keys_are_not_echoed_in_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A rejected key is often a real one mistyped; `memlab serve` prints validation errors to stderr.
    from pydantic import ValidationError

    from memlab.server.cli import main
    from memlab.server.settings import ServerSettings

    secret = "Mistyped+SecretKey0123456789"  # '+' is not allowed
    for attempt in ({"api_keys": [f"{secret}:alice"]}, {"api_keys": [{"key": secret}]}):
        with pytest.raises(ValidationError, match="16-256 characters") as caught:
            ServerSettings.model_validate(attempt)
        assert secret not in str(caught.value)
    with pytest.raises(ValidationError, match="16-256 characters") as caught:
        ServerSettings().with_env_keys({"MEMLAB_API_KEYS": f"{ADMIN_KEY},{secret}"})
    assert secret not in str(caught.value)
    monkeypatch.setenv("MEMLAB_API_KEYS", secret)
    assert main(["--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "16-256 characters" in err and secret not in err


def test_unreadable_settings_files_are_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memlab.server.cli import main

    broken = tmp_path / "serve.yaml"
    broken.write_text("backend: [unclosed\n", encoding="utf-8")
    assert main(["--config", str(broken), "--data-dir", str(tmp_path)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["--config", str(tmp_path / "missing.json"), "--data-dir", str(tmp_path)]) == 2
    assert "cannot read the settings file" in capsys.readouterr().err


@pytest.mark.slow  # ~15 s alone, ~20 s on a busy 2-core machine
def test_schemathesis_finds_no_server_errors(tmp_path: Path) -> None:
    # Limits chosen so every schema-valid body fits the byte limit: otherwise valid-but-huge bodies get
    # 413 before validation, which the negative/positive data checks count as wrong answers. Turn
    # metadata (bounded by its schema: 16 keys, lists of 8 strings of 256 chars) can take ~200 KB
    # \u-escaped, on the body and on each message: 2 messages x (2000 chars + metadata) + the body's
    # metadata is under 1 MiB. The fuzzer also sends filters, pages (limit/cursor) and Idempotency-Key.
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"max_messages": 2, "max_message_chars": 2000}))
    server = start_server(tmp_path, "--backend", "notes", "--data-dir", str(tmp_path / "data"), "--config", str(config))
    try:
        with http(server) as admin:  # some data, so id lookups also meet existing memories
            add(admin, "alice", PIXEL, BEES)
        command = [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{server.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {ADMIN_KEY}",
            "--checks",
            "all",
            "--max-examples",
            "15",
            "--seed",
            "1",
            "--workers",
            "1",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--request-timeout",
            "10",
            "--no-shrink",
        ]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,  # its cache dir
            env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false"},
        )
        report = result.stdout[-6000:] + result.stderr[-2000:]
        assert result.returncode == 0, report
        # --checks all includes not_a_server_error: exit code 0 means no 5xx (and no schema violations).
        assert re.search(r"\d+ generated, \d+ passed", result.stdout), report
    finally:
        server.stop()
    assert "Traceback" not in server.log.read_text(), server.log.read_text()[-4000:]


def test_settings_from_file_flags_and_backend_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlab.server.cli import build_settings

    monkeypatch.delenv("MEMLAB_API_KEYS", raising=False)
    config = tmp_path / "serve.yaml"
    config.write_text(
        f"backend: full_context\nport: 9000\napi_keys: ['{ADMIN_KEY}']\nbackend_config: {{max_tokens: 100, top_k: 3}}\n"
    )
    settings = build_settings(
        [
            "--config",
            str(config),
            "--port",
            "9001",
            "--full_context.max-tokens",
            "500",
            "--full_context.include_system=false",
            "--api-key",
            f"{ALICE_KEY}:alice",
        ]
    )
    assert settings.port == 9001  # the flag beats the file
    assert settings.backend_config == {"max_tokens": 500, "top_k": 3, "include_system": False}
    assert [k.users for k in settings.api_keys] == [(), ("alice",)]
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json: line 1"):
        build_settings(["--config", str(broken)])
    with pytest.raises(ValueError, match="needs a value"):
        build_settings(["--full_context.max_tokens"])


# ---------------------------------------------------------------------- export, content type, keys, one writer
def test_export_and_missing_content_type_hint(notes_server: ServerProcess) -> None:
    with http(notes_server) as admin:
        assert add(admin, "erin", PIXEL).status_code == 201
        document = admin.get("/v1/users/erin/export")
        assert document.status_code == 200
        body = document.json()
        assert body["backend"] == "notes" and body["user_id"] == "erin"
        assert [i["text"] for i in body["items"]] == [PIXEL]
        assert admin.get("/v1/users/nobody-yet/export").json()["items"] == []
        # curl -d without -H 'Content-Type: application/json' sends form encoding: say what to send.
        raw = admin.post(
            "/v1/users/erin/search",
            content=b'{"query": "cat"}',
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert raw.status_code == 422
        assert "Content-Type: application/json" in error_of(raw)["message"]
        missing = admin.post("/v1/users/erin/search", content=b'{"query": "cat"}')
        assert missing.status_code == 422  # FastAPI reads a body as JSON only when it says so
        assert "no Content-Type" in error_of(missing)["message"]
    with http(notes_server, ALICE_KEY) as alice:
        assert alice.get("/v1/users/erin/export").status_code == 403


def test_key_configuration_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import uvicorn

    from memlab.server.cli import main

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("a bad key configuration was served"))
    monkeypatch.setattr(uvicorn, "Server", lambda *a, **k: pytest.fail("a bad key configuration was served"))
    monkeypatch.delenv("MEMLAB_API_KEYS", raising=False)
    cases = [
        (["--api-key", f"{ADMIN_KEY}:"], "empty user list"),
        (["--api-key", ADMIN_KEY, "--api-key", ADMIN_KEY], "listed twice"),
        (["--api-key", f"{ADMIN_KEY}:alice", "--api-key", f"{ADMIN_KEY}:bob"], "bound in two places"),
    ]
    for args, reason in cases:
        assert main(["--data-dir", str(tmp_path / "d"), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("memlab: error:") and reason in err, err
        assert "'admi...'" in err and ADMIN_KEY not in err, "only a redacted prefix names the key"
    monkeypatch.setenv("MEMLAB_API_KEYS", f"{ADMIN_KEY}:alice")
    assert main(["--data-dir", str(tmp_path / "d"), "--api-key", f"{ADMIN_KEY}:bob"]) == 2  # env vs flag
    assert "bound in two places" in capsys.readouterr().err
    keyfile = tmp_path / "keys.txt"
    keyfile.write_text(f"# rotated weekly\n{ALICE_KEY}:alice\n{ALICE_KEY}:\n")
    monkeypatch.delenv("MEMLAB_API_KEYS")
    assert main(["--data-dir", str(tmp_path / "d"), "--api-keys-file", str(keyfile)]) == 2
    err = capsys.readouterr().err
    assert "keys.txt: line 3" in err and ALICE_KEY not in err
    keyfile.write_text("# nothing yet\n")
    assert main(["--data-dir", str(tmp_path / "d"), "--api-keys-file", str(keyfile)]) == 2
    assert "lists no keys" in capsys.readouterr().err


def test_keys_rotate_without_a_restart(tmp_path: Path) -> None:
    new_key = "rotated-key-0123456789abcdef"
    keyfile = tmp_path / "keys.txt"
    keyfile.write_text(f"{ALICE_KEY}:alice\n")
    server = start_server(
        tmp_path,
        "--backend",
        "full_context",
        "--data-dir",
        str(tmp_path / "data"),
        "--api-keys-file",
        str(keyfile),
        keys=None,
    )
    try:

        def status(key: str) -> int:
            with http(server, key) as client:
                return client.post("/v1/users/alice/search", json={"query": "x"}).status_code

        assert status(ALICE_KEY) == 200 and status(new_key) == 401
        keyfile.write_text(f"{new_key}:alice\n{ALICE_KEY}:alice\n")  # rotation step 1: both keys
        assert status(new_key) == 200 and status(ALICE_KEY) == 200
        keyfile.write_text(f"{new_key}:alice\n")  # step 2: the old key is gone
        assert status(ALICE_KEY) == 401 and status(new_key) == 200
        keyfile.write_text(f"{new_key}:\n")  # a broken edit keeps the keys in force
        assert status(new_key) == 200
        # SIGHUP re-reads even a file whose size and modification time look unchanged.
        stamp = keyfile.stat()
        replacement = f"{ALICE_KEY}\n#"  # same size as the broken file, padded by a comment
        keyfile.write_text(replacement.ljust(stamp.st_size - 1, "x") + "\n")
        assert keyfile.stat().st_size == stamp.st_size
        os.utime(keyfile, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        assert status(new_key) == 200, "no reload without a change or a signal"
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while status(ALICE_KEY) != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status(ALICE_KEY) == 200 and status(new_key) == 401
    finally:
        server.stop()
    assert new_key not in server.log.read_text() and ALICE_KEY not in server.log.read_text()


def test_second_service_on_one_data_directory_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with start_server(tmp_path, "--backend", "full_context", "--data-dir", str(data)) as first:
        second = serve_until_exit("--backend", "full_context", "--data-dir", str(data), timeout=60)
        assert second.returncode == 2
        assert second.stderr.startswith(f"memlab: error: {data} is in use") and "in use" in second.stderr
        assert f"memlab serve (pid {first.process.pid})" in second.stderr, second.stderr
        with http(first) as admin:  # the first one is unharmed
            assert add(admin, "alice", PIXEL).status_code == 201


def test_damaged_user_files_never_leak_their_text(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    good = [
        json.dumps(
            {"id": f"s1#{i}", "text": f"fact {i}", "source": {"session_id": "s1", "turn_index": i, "role": "user"}}
        )
        for i in range(2)
    ]
    # alice: a torn last line (a write cut short by kill -9); bob: a damaged line in the middle.
    (data / "alice.jsonl").write_text("\n".join(good) + '\n{"id": "s1#2", "text": "SECRET-7788')
    (data / "bob.jsonl").write_text(good[0] + '\n{"id": "s1#1", "text": "SECRET-778899"}garbage\n' + good[1] + "\n")
    server = start_server(tmp_path, "--backend", "full_context", "--data-dir", str(data))
    try:
        with http(server) as admin:
            found = admin.post("/v1/users/alice/search", json={"query": "facts"})
            assert found.status_code == 200 and [i["text"] for i in found.json()["items"]] == ["fact 0", "fact 1"]
            assert add(admin, "alice", "fact 2", session_id="s1").json()["first_turn"] == 2
            broken = admin.post("/v1/users/bob/search", json={"query": "facts"})
            assert broken.status_code == 500 and "SECRET" not in broken.text
            assert "line 2 is not a stored turn" in error_of(broken)["message"]
            assert admin.post("/v1/users/carol/search", json={"query": "x"}).status_code == 200
    finally:
        server.stop()
    assert "SECRET" not in server.log.read_text()


def test_user_cache_size_and_key_file_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlab.server.cli import build_settings

    monkeypatch.delenv("MEMLAB_API_KEYS", raising=False)
    monkeypatch.setenv("MEMLAB_USER_CACHE_SIZE", "64")
    monkeypatch.setenv("MEMLAB_API_KEYS_FILE", str(tmp_path / "keys.txt"))
    settings = build_settings([])
    assert settings.user_cache_size == 64 and settings.api_keys_file == tmp_path / "keys.txt"
    assert settings.auth_enabled, "a key file turns auth on, even before it lists a key"
    assert build_settings(["--user-cache-size", "8"]).user_cache_size == 8  # the flag beats the environment
    assert build_settings([]).compute_threads == 1
    monkeypatch.setenv("MEMLAB_COMPUTE_THREADS", "2")
    assert build_settings([]).compute_threads == 2 and build_settings(["--compute-threads", "3"]).compute_threads == 3
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"user_cache_size": 16}))
    assert build_settings(["--config", str(config)]).user_cache_size == 16
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        build_settings(["--user-cache-size", "0"])
