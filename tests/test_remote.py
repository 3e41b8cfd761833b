"""``RemoteMemoryClient`` and ``AsyncRemoteMemoryClient`` against a real ``memlab serve`` process.

The server serves ``notes`` (tests/test_server.py: every capability, a JSON file per user) or
``slow_notes``, which stores a message whose text contains "SLOW" and then sleeps before answering:
the test kills the server in that sleep (the write is on disk, its answer never sent), restarts it,
and the client's retry, with the same idempotency key, must get the first write's answer without
storing the message again.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_server import ADMIN_KEY, ALICE_KEY, KEYS_ENV, TESTS, NotesMemory, start_server

from memlab.client import MemoryClient
from memlab.errors import ConflictError, NotFoundError, UnsupportedCapabilityError
from memlab.memory import Memory
from memlab.remote import (
    AsyncRemoteMemoryClient,
    AuthenticationError,
    CapabilityNotSupportedError,
    PermissionDeniedError,
    RemoteConflictError,
    RemoteMemoryClient,
    RemoteNotFoundError,
    RemoteValidationError,
)
from memlab.testing.server_process import ServerProcess, free_port, memlab_serve_command, memlab_serve_env
from memlab.testing.server_process import start_server as start_process
from memlab.types import Message, Session


def slow(base: type[Memory]) -> type[Memory]:
    """``base`` that, after durably storing a message containing "SLOW", marks it and sleeps."""

    class Slow(base):  # type: ignore[valid-type,misc]
        name = f"slow_{base.name}"

        def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
            super()._ingest(session, user_id=user_id, first_turn=first_turn)  # on disk when it returns
            if any("SLOW" in m.content for m in session.messages):
                (self.data_dir / "stored.flag").write_text("stored")  # type: ignore[operator]
                time.sleep(60)

    return Slow


def serve_slow(argv: list[str]) -> int:
    from memlab.registry import backends
    from memlab.server.cli import main
    from memlab_plugins.full_context import FullContextMemory
    from memlab_plugins.rag import RagMemory

    backends.register("notes", NotesMemory)
    for base in (NotesMemory, FullContextMemory, RagMemory):
        backends.register(f"slow_{base.name}", slow(base))
    return main(argv)


SLOW_LAUNCHER = (
    "-c",
    f"import sys; sys.path.insert(0, {str(TESTS)!r}); from test_remote import serve_slow; sys.exit(serve_slow(sys.argv[1:]))",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("remote")
    process = start_server(tmp, "--backend", "notes", "--data-dir", str(tmp / "data"))
    yield process
    process.stop()


def test_remote_client_has_the_memory_client_methods(server: ServerProcess) -> None:
    public = {n for n in dir(MemoryClient) if not n.startswith("_") and not n.startswith("a") and n != "memory"}
    public -= {"data_dir", "max_k", "user_cache_size", "close"}
    assert public <= set(dir(RemoteMemoryClient)), public - set(dir(RemoteMemoryClient))
    assert public <= set(dir(AsyncRemoteMemoryClient))


def test_every_operation_over_http(server: ServerProcess) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    with RemoteMemoryClient(server.url, ADMIN_KEY) as memory:
        assert memory.backend == "notes" and memory.persistent and memory.supports("history")
        report = memory.remember(
            user,
            [("user", "I adopted a grey cat named Pixel."), Message(role="user", content="I keep bees on my roof.")],
            session_id="home",
            metadata={"topic": "pets"},
        )
        assert (report.session_id, report.first_turn, report.messages) == ("home", 0, 2)
        memory.remember(user, [{"role": "user", "content": "My manager moved the cat meeting."}], session_id="work")
        found = memory.recall(user, "cat", filters={"session_id": "home"})
        assert [i.text for i in found.items] == ["I adopted a grey cat named Pixel."]
        assert found.items[0].source["metadata"] == {"topic": "pets"}
        assert {i.text for i in memory.recall(user, "cat").items} >= {"My manager moved the cat meeting."}
        assert len(memory.memories(user, filters={"metadata": {"topic": "pets"}})) == 2
        first = memory.memories_page(user, limit=2)
        rest = memory.memories_page(user, limit=2, cursor=first.next_cursor)
        assert len(first.items) == 2 and len(rest.items) == 1 and rest.next_cursor is None
        item = next(i for i in first.items + rest.items if i.source["session_id"] == "home")  # ids are random
        assert memory.get(user, item.id) == item
        assert memory.update(user, item.id, "changed").text == "changed"
        assert [e["event"] for e in memory.history(user, item.id)] == ["ADD", "UPDATE"]
        page = memory.history_page(user, item.id, limit=1)
        assert len(page.items) == 1 and page.next_cursor
        assert memory.export(user, filters={"session_id": "work"})["items"][0]["text"].startswith("My manager")
        memory.delete(user, item.id)
        with pytest.raises(RemoteNotFoundError) as missing:
            memory.get(user, item.id)
        assert isinstance(missing.value, NotFoundError) and missing.value.status == 404
        with pytest.raises(RemoteValidationError, match="cursor"):  # the server checks what a client sends
            memory.memories_page(user, cursor="not-a-cursor")
        raw = httpx.get(
            f"{server.url}/v1/users/{user}/memories",
            params={"since": "yesterday", "metadata": '{"topic": "pets"}'},
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        )
        assert raw.status_code == 422 and "since" in raw.json()["error"]["message"]
        memory.forget(user)
        assert memory.memories(user) == []


def test_errors_are_typed(server: ServerProcess) -> None:
    with RemoteMemoryClient(server.url, "wrong-key-0123456789abcdef") as wrong:
        with pytest.raises(AuthenticationError) as caught:
            wrong.recall("alice", "cat")
        assert caught.value.status == 401 and caught.value.code == "unauthorized"
    with RemoteMemoryClient(server.url, ALICE_KEY) as alice:
        with pytest.raises(PermissionDeniedError):
            alice.recall("bob", "cat")
        alice.remember("alice", [("user", "first")], idempotency_key="reused-key-1")
        with pytest.raises(RemoteConflictError) as conflict:
            alice.remember("alice", [("user", "something else")], idempotency_key="reused-key-1")
        assert isinstance(conflict.value, ConflictError) and conflict.value.status == 409
        with pytest.raises(RemoteNotFoundError):
            alice.delete("alice", "n-no-such-note")


def test_capability_missing_is_typed(tmp_path: Path) -> None:
    process = start_server(tmp_path, "--backend", "full_context", "--data-dir", str(tmp_path / "data"))
    try:
        with RemoteMemoryClient(process.url, ADMIN_KEY) as memory:
            memory.remember("alice", [("user", "hello")])
            item = memory.memories("alice")[0]
            with pytest.raises(CapabilityNotSupportedError) as caught:
                memory.update("alice", item.id, "changed")
            assert isinstance(caught.value, UnsupportedCapabilityError) and not memory.supports("update")
    finally:
        process.stop()


def test_idempotency_key_stores_once_also_across_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    process = start_server(tmp_path, "--backend", "notes", "--data-dir", str(data))
    try:
        with RemoteMemoryClient(process.url, ADMIN_KEY) as memory:
            first = memory.remember("alice", [("user", "only once")], idempotency_key="k-1")
            again = memory.remember("alice", [("user", "only once")], idempotency_key="k-1")
            assert again == first
    finally:
        process.stop()
    process = start_server(tmp_path, "--backend", "notes", "--data-dir", str(data))
    try:
        with RemoteMemoryClient(process.url, ADMIN_KEY) as memory:
            assert memory.remember("alice", [("user", "only once")], idempotency_key="k-1") == first
            assert [i.text for i in memory.memories("alice")] == ["only once"]
            raw = httpx.post(
                f"{process.url}/v1/users/alice/messages",
                json={"messages": [{"role": "user", "content": "only once"}]},
                headers={"Authorization": f"Bearer {ADMIN_KEY}", "Idempotency-Key": "k-1"},
            )
            assert raw.status_code == 201 and raw.json() == first.model_dump(mode="json")
            memory.forget("alice")  # forgetting the user forgets its keys: the key stores anew
            memory.remember("alice", [("user", "only once")], idempotency_key="k-1")
            assert len(memory.memories("alice")) == 1
    finally:
        process.stop()


@pytest.mark.parametrize("backend", ["notes", "full_context", "rag"])
def test_a_retry_after_the_server_was_killed_mid_request_stores_nothing_twice(backend: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    options = ["--slow_rag.embedder", "hashing"] if backend == "rag" else []
    command = memlab_serve_command(
        "--backend", f"slow_{backend}", "--data-dir", str(data), *options, port=port, entry=SLOW_LAUNCHER
    )
    env = memlab_serve_env(KEYS_ENV)

    def launch(name: str) -> ServerProcess:
        return start_process(command, port=port, log=tmp_path / name, env=env, stop_timeout=5)

    first = launch("first.log")
    outcome: dict[str, Any] = {}

    def write() -> None:
        # timeout 2 s per attempt; retries spread over ~60 s while the server is killed and restarted
        with RemoteMemoryClient(first.url, ADMIN_KEY, timeout=2.0, retries=12, backoff=0.25) as memory:
            try:
                outcome["report"] = memory.remember("alice", [("user", "SLOW: my cat is called Pixel")], session_id="s")
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome["error"] = exc

    writer = threading.Thread(target=write)
    second: ServerProcess | None = None
    try:
        writer.start()
        deadline = time.monotonic() + 60
        while not (data / "stored.flag").exists():  # the write is on disk; its answer is not sent yet
            assert time.monotonic() < deadline, first.output_tail()
            time.sleep(0.05)
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
        second = launch("second.log")
        writer.join(120)
        assert not writer.is_alive()
        assert "error" not in outcome, outcome.get("error")
        report = outcome["report"]
        assert (report.session_id, report.first_turn, report.messages) == ("s", 0, 1)
        assert report.seconds == 0.0  # rebuilt by the restarted server from the intent it logged
        with RemoteMemoryClient(second.url, ADMIN_KEY) as memory:
            assert [i.text for i in memory.memories("alice")] == ["SLOW: my cat is called Pixel"]
    finally:
        first.stop()
        if second is not None:
            second.stop()
    if backend == "notes":
        stored = json.loads((data / "alice.json").read_text())
        assert len(stored["notes"]) == 1


def test_async_client(server: ServerProcess) -> None:
    user = f"a{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        async with AsyncRemoteMemoryClient(server.url, ADMIN_KEY) as memory:
            assert await memory.backend() == "notes" and await memory.supports("list")
            await asyncio.gather(
                *(memory.remember(user, [("user", f"fact {n} about cats")], session_id=f"s{n}") for n in range(5))
            )
            assert len(await memory.memories(user)) == 5
            found = await memory.recall(user, "cats", k=10, filters={"session_id": ["s1", "s2"]})
            assert sorted(i.text for i in found.items) == ["fact 1 about cats", "fact 2 about cats"]
            page = await memory.memories_page(user, limit=3)
            assert len(page.items) == 3 and page.next_cursor
            item = page.items[0]
            assert (await memory.get(user, item.id)).id == item.id
            await memory.update(user, item.id, "changed")
            assert len(await memory.history(user, item.id)) == 2
            await memory.delete(user, item.id)
            assert len((await memory.export(user))["items"]) == 4
            await memory.forget(user)
            assert await memory.memories(user) == []
            with pytest.raises(PermissionDeniedError):
                async with AsyncRemoteMemoryClient(server.url, ALICE_KEY) as alice:
                    await alice.recall("bob", "x")

    asyncio.run(scenario())


def test_langchain_retriever_accepts_a_remote_client(server: ServerProcess) -> None:
    from memlab.integrations.langchain import MemlabChatMessageHistory, MemlabRetriever

    user = f"l{uuid.uuid4().hex[:8]}"
    with RemoteMemoryClient(server.url, ADMIN_KEY) as memory:
        from langchain_core.messages import HumanMessage

        MemlabChatMessageHistory(memory, user_id=user, session_id="chat").add_messages(
            [HumanMessage("I adopted a grey cat named Pixel.")]
        )
        documents = MemlabRetriever(memory=memory, user_id=user).invoke("cat")
        assert [d.page_content for d in documents] == ["I adopted a grey cat named Pixel."]
        assert documents[0].metadata["backend"] == "notes"

    async def from_async() -> list[Any]:
        async with AsyncRemoteMemoryClient(server.url, ADMIN_KEY) as remote:
            return await MemlabRetriever(memory=remote, user_id=user).ainvoke("cat")

    assert [d.page_content for d in asyncio.run(from_async())] == ["I adopted a grey cat named Pixel."]
