"""MemoryClient and MemoryChat: persistence across reopen, isolation, concurrent writers, policies."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import pytest

from memlab.client import (
    EphemeralMemoryWarning,
    MemoryChat,
    MemoryClient,
    MemoryNotFoundError,
    PersistenceError,
)
from memlab.errors import UnknownNameError, UnsupportedCapabilityError
from memlab.llm import LLM, ChatMessage, LLMResponse
from memlab.memory import Capability
from memlab.types import Message, Retrieval
from memlab_plugins.full_context import FullContextMemory

PIXEL = "I adopted a grey cat named Pixel last spring."
BEES = "I keep bees on the roof of my apartment in Lisbon."


def test_persists_across_reopen(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        assert client.persistent
        client.remember("alice", [("user", PIXEL), {"role": "assistant", "content": "What a nice name!"}])
    with MemoryClient("full_context", data_dir=tmp_path) as reopened:
        recalled = reopened.recall("alice", "what is my cat called?")
        assert "Pixel" in recalled.context
        # The next part of the session continues the stored turn numbering.
        assert reopened.remember("alice", [Message(role="user", content="More.")]).first_turn == 2
        assert [m.source["turn_index"] for m in reopened.memories("alice")] == [0, 1, 2]


def test_users_are_isolated(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("alice", [("user", PIXEL)])
        client.remember("bob", [("user", BEES)])
        assert "Pixel" not in client.recall("bob", "cat").context
        assert "bees" not in client.recall("alice", "bees").context
        bob_id = client.memories("bob")[0].id
        alice_id = client.memories("alice")[0].id
        assert bob_id == alice_id == "default#0"  # ids are per user: same id, different memories
        assert client.get("alice", alice_id).text == PIXEL
        assert client.get("bob", bob_id).text == BEES
        with pytest.raises(MemoryNotFoundError):
            client.get("alice", "default#1")
        client.forget("alice")
        assert client.recall("alice", "cat").is_empty
        assert "bees" in client.recall("bob", "bees").context


def test_concurrent_writers_keep_every_turn(tmp_path: Path) -> None:
    # Many threads append to one session: without the client's lock the backend hands out
    # duplicate turn indexes (read-count-then-append is not atomic).
    client = MemoryClient("full_context", data_dir=tmp_path)
    threads_n, per_thread = 8, 40
    errors: list[BaseException] = []
    start = threading.Barrier(threads_n)

    def writer(n: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                client.remember("alice", [("user", f"writer {n} message {i}")], session_id="shared")
                client.recall("alice", "message")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    client.close()
    with MemoryClient("full_context", data_dir=tmp_path) as reopened:
        items = reopened.memories("alice")
        assert sorted(i.source["turn_index"] for i in items) == list(range(threads_n * per_thread))
        assert len({i.text for i in items}) == threads_n * per_thread


def test_ephemeral_backend_warns_or_refuses(tmp_path: Path) -> None:
    with pytest.warns(EphemeralMemoryWarning, match="will not survive a restart"):
        client = MemoryClient("none", data_dir=tmp_path)
    assert not client.persistent
    client.close()
    with pytest.raises(PersistenceError, match="does not declare the 'persist' capability"):
        MemoryClient("none", data_dir=tmp_path, require_persistence=True)
    with pytest.raises(PersistenceError, match="no data_dir"):
        MemoryClient("full_context", require_persistence=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # in-process by choice: no warning
        MemoryClient("full_context").close()


def test_unsupported_capabilities_and_bad_input(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("alice", [("user", PIXEL)])
        assert client.supports(Capability.LIST) and not client.supports("update")
        with pytest.raises(UnsupportedCapabilityError, match="does not support 'update'"):
            client.update("alice", "default#0", "new text")
        with pytest.raises(UnsupportedCapabilityError):
            client.history("alice", "default#0")
        with pytest.raises(ValueError, match="invalid user_id"):
            client.recall("../etc", "x")
        with pytest.raises(TypeError, match="cannot read a message"):
            client.remember("alice", ["just a string"])  # type: ignore[list-item]
    with pytest.raises(UnknownNameError, match="Did you mean 'full_context'"):
        MemoryClient("full_contxt")
    client.close()
    with pytest.raises(Exception, match="closed"):
        client.recall("alice", "x")


class RecordingLLM(LLM):
    name = "recording"

    def __init__(self) -> None:
        self.prompts: list[list[ChatMessage]] = []

    def _chat(self, messages, *, json_mode, temperature, max_tokens):  # type: ignore[no-untyped-def]
        self.prompts.append(messages)
        return LLMResponse(text=f"reply {len(self.prompts)}", prompt_tokens=11, completion_tokens=2)


def test_memory_chat_recalls_and_stores(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("alice", [("user", PIXEL)], session_id="earlier")
        llm = RecordingLLM()
        chat = MemoryChat(client, llm, user_id="alice", window=2)
        reply = chat.send("What should I buy for my cat?")
        assert reply.text == "reply 1" and reply.prompt_tokens == 11
        system = llm.prompts[0][0]
        assert system.role == "system" and "Pixel" in system.content
        assert llm.prompts[0][-1].content == "What should I buy for my cat?"
        chat.send("And a name tag?")
        # The second prompt carries the first turn verbatim (window) and recalls it from memory too.
        assert [m.role for m in llm.prompts[1]] == ["system", "user", "assistant", "user"]
        stored = [m for m in client.memories("alice") if m.source["session_id"] == chat.session_id]
        assert [m.text for m in stored] == ["What should I buy for my cat?", "reply 1", "And a name tag?", "reply 2"]


def test_memory_chat_with_plain_function_and_failure(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        chat = MemoryChat(client, lambda messages: f"{len(messages)} messages", user_id="bob", session_id="s")
        assert chat.send("hello").text == "2 messages"

        def broken(messages):  # type: ignore[no-untyped-def]
            raise RuntimeError("endpoint down")

        failing = MemoryChat(client, broken, user_id="bob", session_id="s")
        with pytest.raises(RuntimeError):
            failing.send("lost?")
        # A failed call stores nothing: no half turn in memory.
        assert [m.text for m in client.memories("bob")] == ["hello", "2 messages"]


# ---------------------------------------------------------------------- examples/chatbot.py, end to end
def test_example_chatbot_against_an_openai_compatible_server(tmp_path: Path) -> None:
    """Two runs of the example against a local OpenAI-compatible server: the second run's prompt
    carries what the user said in the first (memory persisted in the data directory)."""
    import json
    import os
    import subprocess
    import sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    requests: list[dict] = []

    class FakeOpenAI(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            reply = {
                "id": f"c{len(requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"answer {len(requests)}"},
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    example = Path(__file__).resolve().parents[1] / "examples" / "chatbot.py"
    env = {
        **os.environ,
        "OPENAI_BASE_URL": f"http://127.0.0.1:{server.server_port}/v1",
        "OPENAI_API_KEY": "test-key",
        "NO_PROXY": "*",
    }
    command = [sys.executable, str(example), "--user", "alice", "--data-dir", str(tmp_path / "mem"), "--model", "fake"]
    try:
        first = subprocess.run(command, input=f"{PIXEL}\n/quit\n", capture_output=True, text=True, env=env, timeout=120)
        assert first.returncode == 0, first.stderr
        assert "bot> answer 1" in first.stdout
        second = subprocess.run(
            command,
            input="What is my cat called?\n/memories\n/export\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert second.returncode == 0, second.stderr
    finally:
        server.shutdown()
    assert "bot> answer 2" in second.stdout
    assert [r["path"] for r in requests] == ["/v1/chat/completions"] * 2
    assert requests[1]["auth"] == "Bearer test-key" and requests[1]["model"] == "fake"
    system = requests[1]["messages"][0]
    assert system["role"] == "system" and "Pixel" in system["content"], "the new run recalled the old one"
    assert requests[1]["messages"][-1] == {"role": "user", "content": "What is my cat called?"}
    # /memories lists both runs' turns, each run its own session; /export prints the whole document.
    assert PIXEL in second.stdout and "answer 1" in second.stdout
    assert '"backend": "full_context"' in second.stdout and '"user_id": "alice"' in second.stdout


def test_ownership_is_checked_even_if_the_backend_forgets(tmp_path: Path) -> None:
    """A backend whose delete ignores the user must still not let alice delete bob's memory."""

    class CarelessMemory(FullContextMemory):
        name = "careless"
        capabilities = FullContextMemory.capabilities | {Capability.DELETE}

        def _delete(self, item_id: str, *, user_id: str) -> None:
            for turns in self._turns.values():  # bug on purpose: searches every user's turns
                turns[:] = [t for t in turns if t.id != item_id]

    client = MemoryClient(CarelessMemory())
    client.remember("bob", [("user", BEES)], session_id="bob-only")
    client.remember("alice", [("user", PIXEL)], session_id="alice-only")
    with pytest.raises(MemoryNotFoundError, match="'bob-only#0'"):
        client.delete("alice", "bob-only#0")
    assert [m.text for m in client.memories("bob")] == [BEES]
    client.delete("alice", "alice-only#0")
    assert client.memories("alice") == []


# ---------------------------------------------------------------------- export, not-found, bounded k
def test_export_not_found_and_bounded_k(tmp_path: Path) -> None:
    from memlab.errors import NotFoundError

    with MemoryClient("full_context", data_dir=tmp_path, max_k=20) as client:
        client.remember("alice", [("user", PIXEL), ("assistant", "Nice!")], session_id="s1")
        document = client.export("alice")
        assert document["backend"] == "full_context" and document["user_id"] == "alice"
        assert [i["text"] for i in document["items"]] == [PIXEL, "Nice!"]
        assert document["sessions"] == {"s1": 2}
        assert client.export("bob")["items"] == []
        assert MemoryNotFoundError is NotFoundError  # one error for backends, client and REST (404)
        with pytest.raises(NotFoundError, match="'nope'"):
            client.get("alice", "nope")
        with pytest.raises(NotFoundError):
            client.delete("bob", "s1#0")  # alice's id, asked for as bob's
        assert len(client.recall("alice", "cat", k=1).items) == 1  # k honoured: the newest turn
        assert client.recall("alice", "cat", k=1).items[0].text == "Nice!"
        for bad in (0, 21, 10**9):
            with pytest.raises(ValueError, match="between 1 and 20"):
                client.recall("alice", "cat", k=bad)
        with pytest.raises(TypeError):
            client.recall("alice", "cat", k="5")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- users never block each other
class GatedMemory(FullContextMemory):
    """full_context whose ingest and retrieve wait on test-controlled gates."""

    name = "gated"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.ingest_started = threading.Event()
        self.ingest_may_finish = threading.Event()
        self.search_barrier: threading.Barrier | None = None

    def _ingest(self, session, *, user_id, first_turn):  # type: ignore[no-untyped-def]
        if session.id == "slow":
            self.ingest_started.set()
            assert self.ingest_may_finish.wait(30), "the test never let the ingest finish"
        super()._ingest(session, user_id=user_id, first_turn=first_turn)

    def _retrieve(self, query, *, user_id, k):  # type: ignore[no-untyped-def]
        if self.search_barrier is not None and query == "together":
            self.search_barrier.wait(10)  # BrokenBarrierError unless both searches run at once
        return super()._retrieve(query, user_id=user_id, k=k)


def test_one_users_ingest_never_blocks_another_users_search(tmp_path: Path) -> None:
    memory = GatedMemory(data_dir=tmp_path)
    client = MemoryClient(memory)
    client.remember("bob", [("user", BEES)])
    client.remember("alice", [("user", PIXEL)])
    writer = threading.Thread(
        target=client.remember, args=("alice", [("user", "slow turn")]), kwargs={"session_id": "slow"}
    )
    writer.start()
    try:
        assert memory.ingest_started.wait(10)
        # alice's ingest is stuck inside the backend; bob is served meanwhile (reads and writes).
        assert "bees" in client.recall("bob", "bees").context
        client.remember("bob", [("user", "Another fact.")])
        assert len(client.memories("bob")) == 2
        # Two searches of one user run at the same time (each waits for the other at the barrier).
        memory.search_barrier = threading.Barrier(2)
        results: list[Retrieval] = []
        searchers = [
            threading.Thread(target=lambda: results.append(client.recall("bob", "together"))) for _ in range(2)
        ]
        for t in searchers:
            t.start()
        for t in searchers:
            t.join(20)
        assert len(results) == 2, "searches of one user were serialised"
    finally:
        memory.ingest_may_finish.set()
        writer.join(20)
    assert [m.text for m in client.memories("alice")] == [PIXEL, "slow turn"]
    client.close()


def test_users_kept_in_ram_are_bounded(tmp_path: Path) -> None:
    with MemoryClient("full_context", data_dir=tmp_path, user_cache_size=3) as client:
        for n in range(10):
            client.remember(f"user{n}", [("user", f"fact {n}")])
        assert len(client.memory._turns) <= 3 and len(client._users) <= 3
        # Evicted users are reloaded from disk, complete.
        assert [m.text for m in client.memories("user0")] == ["fact 0"]
        assert client.remember("user0", [("user", "more")]).first_turn == 1
    with pytest.raises(ValueError, match=">= 1"):
        MemoryClient("full_context", user_cache_size=0)


def test_a_user_in_use_is_never_released(tmp_path: Path) -> None:
    memory = GatedMemory(data_dir=tmp_path)
    released: list[str] = []
    release = memory.release

    def recording_release(user_id: str) -> None:
        released.append(user_id)
        release(user_id)

    memory.release = recording_release  # type: ignore[method-assign]
    client = MemoryClient(memory, user_cache_size=1)
    writer = threading.Thread(
        target=client.remember, args=("alice", [("user", "slow turn")]), kwargs={"session_id": "slow"}
    )
    writer.start()
    try:
        assert memory.ingest_started.wait(10)
        client.remember("bob", [("user", BEES)])  # over capacity, but alice is busy: bob goes
        assert released == ["bob"]
    finally:
        memory.ingest_may_finish.set()
        writer.join(20)
    client.remember("carol", [("user", PIXEL)])
    assert "alice" in released and [m.text for m in client.memories("alice")] == ["slow turn"]
    client.close()


@pytest.mark.parametrize("backend", ["rag", "profile", "mem0"])
def test_audited_backends_stay_correct_when_users_run_concurrently(backend: str, tmp_path: Path) -> None:
    """The built-ins the client runs without a cross-user lock: users working at the same time end up
    with exactly what the same calls made one user after another give, and never see each other's data."""
    users, per_user = [f"user{n}" for n in range(4)], 8

    def work(client: MemoryClient, user: str) -> None:
        for i in range(per_user):
            client.remember(user, [("user", f"My pet number {i} is a {user}-animal{i}.")], session_id="s")
            client.recall(user, "which pets do I have?", k=3)

    def recalled(client: MemoryClient) -> dict[str, set[str]]:
        seen = {}
        for user in users:
            text = client.recall(user, "My pet number is a animal", k=100).context
            seen[user] = {f"{u}-animal{i}" for u in users for i in range(per_user) if f"{u}-animal{i}." in text}
        return seen

    with MemoryClient(backend, {"embedder": "hashing"}, data_dir=tmp_path / "one-by-one") as sequential:
        for user in users:
            work(sequential, user)
        expected = recalled(sequential)
    client = MemoryClient(backend, {"embedder": "hashing"}, data_dir=tmp_path / "concurrent")
    errors: list[BaseException] = []
    start = threading.Barrier(len(users))

    def run(user: str) -> None:
        try:
            start.wait()
            work(client, user)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    got = recalled(client)
    client.close()
    assert got == expected
    for user in users:
        assert got[user] and all(token.startswith(f"{user}-") for token in got[user]), "a user saw another's data"
