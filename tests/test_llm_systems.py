"""Graphiti and LangMem (the real libraries) against memlab's scripted OpenAI-compatible server:
conformance, the refusal without an LLM, a contradiction, ingest cost, erasure and kill -9."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memlab.errors import ConfigurationError
from memlab.memory import Memory
from memlab.registry import create_backend
from memlab.testing import MemoryConformance, session
from memlab.testing.scripted_llm import ScriptedLLMServer
from memlab.types import Message, Session

pytest.importorskip("graphiti_core", reason="memlab[graphiti] is not installed")
pytest.importorskip("langmem", reason="memlab[langmem] is not installed")

REPO = Path(__file__).resolve().parents[1]
SYSTEMS = ("graphiti", "langmem")


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as running:
        yield running


def config(server: ScriptedLLMServer, **extra: Any) -> dict[str, Any]:
    return {"llm": server.llm_settings(), "embedder": "hashing", "top_k": 3, **extra}


class _ScriptedConformance(MemoryConformance):
    exact_recall = False  # facts and memories rephrase the turns ("user said: ...")
    backend = ""

    @pytest.fixture(autouse=True)
    def _server(self, server: ScriptedLLMServer) -> None:
        self.server = server

    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend(self.backend, config(self.server), data_dir=data_dir)


class TestGraphitiConformance(_ScriptedConformance):
    backend = "graphiti"


class TestLangMemConformance(_ScriptedConformance):
    backend = "langmem"


# ----------------------------------------------------------------------------- no LLM: one line
@pytest.mark.parametrize("name", SYSTEMS)
def test_without_an_llm_the_backend_refuses_in_one_line(name: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as refused:
        create_backend(name, {}, data_dir=tmp_path)
    message = str(refused.value)
    assert "\n" not in message
    assert f"--{name}.llm.base-url" in message and f"--{name}.llm.model" in message
    assert not list(tmp_path.iterdir()), "a refused backend must not leave files behind"


@pytest.mark.parametrize("name", SYSTEMS)
def test_the_cli_refuses_without_an_llm_in_one_line(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memlab.cli", "run", "--dataset", "synthetic:personas=1,sessions=3,questions=1",
         "--backends", name, "--out", str(tmp_path / "out"), "--no-controls", "--no-progress"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr  # refused by preflight, not a failed job (issue 35)
    assert f"--{name}.llm.base-url" in done.stderr and "preflight found 1 problem(s)" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- contradiction
LISBON = Session(
    id="s1",
    messages=[
        Message(role="user", content="I live in Lisbon.", timestamp=datetime(2024, 1, 10)),
        Message(role="assistant", content="Lisbon is lovely."),
    ],
)
MONTREAL = Session(
    id="s2", messages=[Message(role="user", content="I moved to Montreal.", timestamp=datetime(2024, 5, 2))]
)


def test_graphiti_invalidates_the_old_residence_and_shows_the_current_one(
    server: ScriptedLLMServer, tmp_path: Path
) -> None:
    memory = create_backend("graphiti", config(server), data_dir=tmp_path)
    memory.ingest(LISBON, user_id="u")
    memory.ingest(MONTREAL, user_id="u")
    facts = {item.text: item for item in memory.list_memories(user_id="u")}
    lisbon, montreal = facts["user said: I live in Lisbon."], facts["user said: I moved to Montreal."]
    assert lisbon.metadata["invalidated"] and lisbon.metadata["invalid_at"].startswith("2024-05-02")
    assert not montreal.metadata["invalidated"] and montreal.metadata["valid_at"].startswith("2024-05-02")
    context = memory.retrieve("Where do I live?", user_id="u").context
    assert "I moved to Montreal. (valid since 2 May 2024; still true)" in context
    assert "I live in Lisbon. (valid 10 January 2024 until 2 May 2024; no longer true)" in context
    assert [event["event"] for event in memory.history(lisbon.id, user_id="u")] == ["ADD", "VALID_FROM", "INVALIDATED"]
    memory.close()

    hidden = create_backend("graphiti", config(server, invalidated="hide"), data_dir=tmp_path)
    context = hidden.retrieve("Where do I live?", user_id="u").context
    assert "Montreal" in context and "Lisbon" not in context
    hidden.close()


def test_langmem_patches_the_old_residence(server: ScriptedLLMServer, tmp_path: Path) -> None:
    memory = create_backend("langmem", config(server), data_dir=tmp_path)
    memory.ingest(LISBON, user_id="u")
    memory.ingest(MONTREAL, user_id="u")
    texts = [item.text for item in memory.list_memories(user_id="u")]
    assert texts == ["User said: I moved to Montreal."], "langmem's manager patched the memory in place"
    item = memory.retrieve("Where do I live?", user_id="u").items[0]
    assert [t["session_id"] for t in item.source["turns"]] == ["s1", "s1", "s2"], "both sessions are its provenance"
    memory.close()


# ----------------------------------------------------------------------------- cost
@pytest.mark.parametrize("name", SYSTEMS)
def test_llm_calls_are_counted_as_ingest_cost(name: str, server: ScriptedLLMServer, tmp_path: Path) -> None:
    memory = create_backend(name, config(server, llm={**server.llm_settings(), "price": {"input_per_million": 1.0, "output_per_million": 2.0}}), data_dir=tmp_path)  # fmt: skip
    server.reset_counts()
    report = memory.ingest(LISBON, user_id="u")
    assert server.requests, "the library really asked the endpoint"
    assert report.prompt_tokens == server.prompt_tokens and report.completion_tokens == server.completion_tokens
    assert report.cost_usd == pytest.approx((server.prompt_tokens * 1.0 + server.completion_tokens * 2.0) / 1e6)
    assert memory.extraction_stats()["llm_calls"] == len(server.requests)  # type: ignore[attr-defined]
    assert memory.retrieve("Lisbon", user_id="u").items, "what was extracted can be found"
    memory.close()


@pytest.mark.parametrize("name", SYSTEMS)
def test_a_refused_request_is_counted_and_skipped(name: str, tmp_path: Path) -> None:
    def refuse(body: dict[str, Any]) -> str:
        raise ValueError("prompt too long for this model")  # the server answers 400

    with ScriptedLLMServer(refuse) as refusing:
        memory = create_backend(name, config(refusing), data_dir=tmp_path)
        memory.ingest(LISBON, user_id="u")
        stats = memory.extraction_stats()  # type: ignore[attr-defined]
        assert stats["windows"] == 1 and stats["failed_windows"] == 1
        assert "400" in memory.extraction_failures[0]  # type: ignore[attr-defined]
        assert memory.list_memories(user_id="u") == []
        memory.close()


# ----------------------------------------------------------------------------- erasure
@pytest.mark.parametrize("name", SYSTEMS)
def test_delete_and_reset_leave_no_text_in_the_data_dir(name: str, server: ScriptedLLMServer, tmp_path: Path) -> None:
    secret = "I keep my spare key under the papayaxylophone statue."
    memory = create_backend(name, config(server, **({"store_raw_episode_content": False} if name == "graphiti" else {})), data_dir=tmp_path)  # fmt: skip
    memory.ingest(session("s1", ("user", secret), ("user", "I ride a red bicycle.")), user_id="u")
    memory.ingest(session("s1", ("user", "I play chess on Sundays.")), user_id="v")

    def files_with(word: bytes) -> list[str]:
        return [str(p) for p in tmp_path.rglob("*") if p.is_file() and word in p.read_bytes()]

    assert files_with(b"papayaxylophone")
    target = next(i for i in memory.list_memories(user_id="u") if "papayaxylophone" in i.text)
    memory.delete(target.id, user_id="u")
    assert files_with(b"papayaxylophone") == []
    assert any("bicycle" in i.text for i in memory.list_memories(user_id="u")), "other facts stay"
    memory.reset("u")
    assert files_with(b"bicycle") == []
    assert any("chess" in i.text for i in memory.list_memories(user_id="v")), "other users stay"
    memory.close()


# ----------------------------------------------------------------------------- kill -9
WRITER = textwrap.dedent(
    """
    import sys
    from memlab.registry import create_backend
    from memlab.testing.conformance import session
    name, data, url, number = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    llm = {"base_url": url, "model": "scripted", "api_key": "x", "max_retries": 0, "cache": False}
    memory = create_backend(name, {"llm": llm, "embedder": "hashing"}, data_dir=data)
    print("ready", flush=True)
    while True:
        memory.ingest(session(f"s{number}", ("user", f"I wrote acknowledged note number {number}.")), user_id="u")
        print(f"ack {number}", flush=True)
        number += 1
    """
)


@pytest.mark.parametrize("name", SYSTEMS)
def test_every_acknowledged_write_survives_kill_9(name: str, server: ScriptedLLMServer, tmp_path: Path) -> None:
    data, rng, acknowledged, number = tmp_path / "data", random.Random(27), set(), 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for trial in range(3):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, name, str(data), server.base_url, str(number)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read()[-3000:] if writer.stderr else ""
        for _ in range(rng.randint(1, 4)):
            line = writer.stdout.readline().strip()
            assert line.startswith("ack "), (line, writer.stderr.read()[-3000:] if writer.stderr else "")
            acknowledged.add(int(line.split()[1]))
        time.sleep(rng.uniform(0.0, 0.2))  # land the kill somewhere in the next write
        writer.send_signal(signal.SIGKILL)
        rest, _ = writer.communicate(timeout=60)
        acknowledged |= {int(line.split()[1]) for line in rest.splitlines() if line.startswith("ack ")}
        memory = create_backend(name, config(server), data_dir=data)  # reopens after the kill
        stored = " ".join(item.text for item in memory.list_memories(user_id="u"))
        missing = sorted(n for n in acknowledged if f"note number {n}." not in stored)
        assert not missing, f"trial {trial}: acknowledged writes lost after kill -9: {missing}"
        memory.close()
        number = max(acknowledged) + 1
