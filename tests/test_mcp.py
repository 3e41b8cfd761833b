"""``memlab mcp`` driven by the MCP SDK's own client, over stdio and over streamable HTTP.

The server runs as a child process, as an agent would start it. Most tests serve ``notes``
(tests/test_server.py: every capability), registered by a launcher before ``memlab mcp``'s main;
the capability test serves the built-in ``none``, which can only add, search, export and forget.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from test_server import ADMIN_KEY, ALICE_KEY, TESTS

pytest.importorskip("mcp")

import httpx2  # noqa: E402 - the SDK's HTTP client
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from memlab.mcp_server import TOOL_NAMES  # noqa: E402
from memlab.testing.server_process import ServerProcess, free_port, memlab_serve_env, start_server  # noqa: E402

BOB_KEY = "bob-key-0123456789abcdefgh"

# Registers 'notes' and 'gated' (notes whose opening waits until the file $MEMLAB_TEST_GATE exists, as
# a model that takes long to load), then runs `memlab mcp`.
LAUNCHER = (
    "-c",
    f"import os, sys, time; sys.path.insert(0, {str(TESTS)!r}); from test_server import NotesMemory\n"
    "class GatedNotes(NotesMemory):\n"
    "    name = 'gated'\n"
    "    def __init__(self, config=None, *, data_dir=None):\n"
    "        deadline = time.monotonic() + 120\n"
    "        while not os.path.exists(os.environ['MEMLAB_TEST_GATE']) and time.monotonic() < deadline:\n"
    "            time.sleep(0.05)\n"
    "        super().__init__(config, data_dir=data_dir)\n"
    "from memlab.registry import backends; backends.register('notes', NotesMemory); "
    "backends.register('gated', GatedNotes)\n"
    "from memlab.cli import main; sys.exit(main(['mcp', *sys.argv[1:]]))",
)


def stdio_params(*args: str, **extra_env: str) -> StdioServerParameters:
    env = {**memlab_serve_env(), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **extra_env}
    return StdioServerParameters(command=sys.executable, args=[*LAUNCHER, *args], env=env)


def data(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result: Any) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


def _leaves(exc: BaseException) -> list[BaseException]:
    inner = getattr(exc, "exceptions", None)  # an exception group (anyio task groups raise them)
    return [leaf for e in inner for leaf in _leaves(e)] if inner else [exc]


async def tool_names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


# ---------------------------------------------------------------------- stdio
def test_every_tool_over_stdio(tmp_path: Path) -> None:
    async def scenario() -> None:
        params = stdio_params("--backend", "notes", "--data-dir", str(tmp_path / "data"), "--user", "alice")
        async with Client(params) as client:
            assert await tool_names(client) == set(TOOL_NAMES)
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "user_id" not in tools["search_memory"].input_schema["properties"]  # stdio: one user
            added = data(
                await client.call_tool(
                    "add_memory",
                    {
                        "messages": [
                            {"role": "user", "content": "I adopted a grey cat named Pixel."},
                            {"role": "user", "content": "I keep bees on my roof.", "metadata": {"topic": "bees"}},
                        ],
                        "session_id": "home",
                        "metadata": {"topic": "pets"},
                        "idempotency_key": "first-write",
                    },
                )
            )
            assert added["messages"] == 2 and "turns 0-1 of session 'home'" in added["stored"]
            repeat = data(
                await client.call_tool(
                    "add_memory",
                    {
                        "messages": [
                            {"role": "user", "content": "I adopted a grey cat named Pixel."},
                            {"role": "user", "content": "I keep bees on my roof.", "metadata": {"topic": "bees"}},
                        ],
                        "session_id": "home",
                        "metadata": {"topic": "pets"},
                        "idempotency_key": "first-write",
                    },
                )
            )
            assert repeat["repeated"] and repeat["messages"] == 0
            found = data(await client.call_tool("search_memory", {"query": "cat bees", "k": 5}))
            assert "Pixel" in found["context"] and "bees" in found["context"]
            pets = data(
                await client.call_tool(
                    "search_memory", {"query": "cat bees", "filters": {"metadata": {"topic": "pets"}}}
                )
            )
            assert [i["text"] for i in pets["items"]] == ["I adopted a grey cat named Pixel."]
            page = data(await client.call_tool("list_memories", {"limit": 1}))
            assert len(page["items"]) == 1 and page["next_cursor"]
            rest = data(await client.call_tool("list_memories", {"limit": 1, "cursor": page["next_cursor"]}))
            assert len(rest["items"]) == 1 and rest["next_cursor"] is None
            item_id = page["items"][0]["id"]
            assert data(await client.call_tool("get_memory", {"item_id": item_id}))["id"] == item_id
            assert (
                data(await client.call_tool("update_memory", {"item_id": item_id, "text": "changed"}))["text"]
                == "changed"
            )
            events = data(await client.call_tool("memory_history", {"item_id": item_id}))["events"]
            assert [e["event"] for e in events] == ["ADD", "UPDATE"]
            exported = data(await client.call_tool("export_memories", {}))
            assert exported["user_id"] == "alice" and len(exported["items"]) == 2
            assert "deleted" in data(await client.call_tool("delete_memory", {"item_id": item_id}))["done"]
            assert "not found" in error_text(await client.call_tool("get_memory", {"item_id": item_id}))
            bad_filter = error_text(
                await client.call_tool("search_memory", {"query": "x", "filters": {"since": "yesterday"}})
            )
            assert "since" in bad_filter
            assert "forgot" in data(await client.call_tool("forget_user", {}))["done"]
            assert data(await client.call_tool("list_memories", {}))["items"] == []

    asyncio.run(scenario())


def test_the_server_answers_before_its_backend_is_open_and_calls_wait_for_it(tmp_path: Path) -> None:
    """issue 34: initialize waited for the model (27.8 s). The gated backend does not open until the
    gate file exists: initialize and tools/list must answer without it, a tool call after it opens."""
    gate = tmp_path / "gate"

    async def scenario() -> None:
        params = stdio_params(
            "--backend", "gated", "--data-dir", str(tmp_path / "data"), "--user", "alice", MEMLAB_TEST_GATE=str(gate)
        )
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                assert await tool_names(client) == set(TOOL_NAMES)  # the backend is still closed
                gate.touch()
                added = data(await client.call_tool("add_memory", {"messages": [{"role": "user", "content": "hi"}]}))
                assert added["messages"] == 1
        log = (tmp_path / "stderr.log").read_text()
        assert "opening backend 'gated' in the background" in log and "backend 'gated' ready in" in log, log

    asyncio.run(scenario())


def test_argument_mistakes_are_one_line_naming_the_argument(tmp_path: Path) -> None:
    """issue 34: invalid arguments came back as pydantic dumps; an unknown user_id was ignored."""

    async def scenario() -> None:
        params = stdio_params("--backend", "notes", "--data-dir", str(tmp_path / "data"), "--user", "alice")
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["search_memory"].input_schema["additionalProperties"] is False
            cases = {
                "missing": ({}, "query: required"),
                "wrong type": ({"query": "cat", "k": "many"}, "k: "),
                "out of range": ({"query": "cat", "k": 0}, "k: Input should be greater than or equal to 1"),
                "bad filter": ({"query": "cat", "filters": {"since": "yesterday"}}, "filters."),
            }
            for name, (arguments, expected) in cases.items():
                text = error_text(await client.call_tool("search_memory", arguments))
                assert expected in text, (name, text)
                assert "\n" not in text and "pydantic" not in text and "http" not in text, (name, text)
            for_bob = error_text(await client.call_tool("search_memory", {"query": "cat", "user_id": "bob"}))
            assert "unknown argument 'user_id'" in for_bob and "acts for user 'alice' only" in for_bob, for_bob
            typo = error_text(await client.call_tool("add_memory", {"messages": [], "sesion_id": "x"}))
            assert "unknown argument 'sesion_id'" in typo and "session_id" in typo, typo

    asyncio.run(scenario())


def test_a_backend_without_a_capability_does_not_offer_its_tools(tmp_path: Path) -> None:
    async def scenario() -> None:
        params = stdio_params("--backend", "none", "--allow-ephemeral", "--user", "alice")
        async with Client(params) as client:
            assert await tool_names(client) == {"add_memory", "search_memory", "export_memories", "forget_user"}
            result = await client.call_tool("list_memories", {})
            assert result.is_error  # no such tool
            assert data(await client.call_tool("search_memory", {"query": "cat"}))["items"] == []

    asyncio.run(scenario())


def test_bad_command_lines_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memlab.mcp_server import main

    assert main(["--backend", "full_context", "--data-dir", str(tmp_path)]) == 2
    assert "--user is required" in capsys.readouterr().err
    assert (
        main(["--backend", "full_context", "--transport", "http", "--host", "0.0.0.0", "--data-dir", str(tmp_path)])
        == 2
    )
    assert "error" in capsys.readouterr().err


# ---------------------------------------------------------------------- streamable HTTP
@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("mcp-http")
    keys = tmp / "keys.txt"
    keys.write_text(f"{ADMIN_KEY}\n{ALICE_KEY}:alice\n{BOB_KEY}:bob\n")
    port = free_port()
    command = [
        sys.executable,
        *LAUNCHER,
        "--backend",
        "notes",
        "--data-dir",
        str(tmp / "data"),
        "--transport",
        "http",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--api-keys-file",
        str(keys),
    ]
    server = start_server(command, port=port, log=tmp / "mcp.log", env=memlab_serve_env())
    yield server
    server.stop()


@asynccontextmanager
async def http_client(server: ServerProcess, key: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
            yield client


def test_http_requires_a_valid_key(http_server: ServerProcess) -> None:
    for key in (None, "wrong-key-0123456789abcdef"):
        response = httpx2.post(
            f"{http_server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {key}"} if key else {},
        )
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "unauthorized"

    async def connect(key: str | None) -> None:
        async with http_client(http_server, key) as client:
            await client.list_tools()

    for key in (None, "wrong-key-0123456789abcdef"):
        with pytest.raises(Exception) as caught:  # the SDK's client gives up on the session
            asyncio.run(connect(key))
        assert any(isinstance(e, MCPError) for e in _leaves(caught.value)), repr(caught.value)


def test_http_keys_are_bound_to_their_users(http_server: ServerProcess) -> None:
    async def scenario() -> None:
        async with http_client(http_server, ALICE_KEY) as alice, http_client(http_server, ADMIN_KEY) as admin:
            assert await tool_names(alice) == set(TOOL_NAMES)
            # a key bound to one user may leave user_id out
            data(await alice.call_tool("add_memory", {"messages": [{"role": "user", "content": "alice has a cat"}]}))
            data(
                await admin.call_tool(
                    "add_memory", {"user_id": "bob", "messages": [{"role": "user", "content": "bob has a secret dog"}]}
                )
            )
            refused = error_text(await alice.call_tool("search_memory", {"query": "dog", "user_id": "bob"}))
            assert "forbidden" in refused and "secret" not in refused
            bob_items = data(await admin.call_tool("list_memories", {"user_id": "bob"}))["items"]
            foreign = error_text(await alice.call_tool("get_memory", {"item_id": bob_items[0]["id"]}))
            assert "not found" in foreign and "secret" not in foreign
            assert "not found" in error_text(await alice.call_tool("delete_memory", {"item_id": bob_items[0]["id"]}))
            assert "user_id is required" in error_text(await admin.call_tool("search_memory", {"query": "cat"}))
            assert [i["text"] for i in data(await alice.call_tool("list_memories", {}))["items"]] == ["alice has a cat"]

    asyncio.run(scenario())


def test_concurrent_calls_of_two_users(http_server: ServerProcess) -> None:
    async def user_work(key: str, user: str, n: int) -> list[str]:
        async with http_client(http_server, key) as client:
            await asyncio.gather(
                *(
                    client.call_tool(
                        "add_memory",
                        {"messages": [{"role": "user", "content": f"{user} fact {i}"}], "session_id": f"c{user}"},
                    )
                    for i in range(n)
                )
            )
            results = await asyncio.gather(
                *(client.call_tool("search_memory", {"query": "fact", "k": 50}) for _ in range(n))
            )
            for result in results:
                assert all(item["text"].startswith(user) for item in data(result)["items"])
            return [i["text"] for i in data(await client.call_tool("list_memories", {}))["items"]]

    async def scenario() -> tuple[list[str], list[str]]:
        return await asyncio.gather(user_work(ALICE_KEY, "alice", 8), user_work(BOB_KEY, "bob", 8))

    alice_texts, bob_texts = asyncio.run(scenario())
    assert {f"alice fact {i}" for i in range(8)} <= set(alice_texts)
    assert {f"bob fact {i}" for i in range(8)} <= set(bob_texts)
    assert all(t.startswith("alice") for t in alice_texts) and all(t.startswith("bob") for t in bob_texts)
