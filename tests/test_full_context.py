"""full_context on disk: k, torn last lines, kill-safe appends, one process per directory, real deletion."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from memlab.errors import DirectoryInUseError, MemlabError, NotFoundError
from memlab.memory import Capability
from memlab.types import Message, Session
from memlab_plugins.full_context import FullContextMemory

SECRET = "My social security number is SECRET-778899"


def _session(sid: str, *texts: str) -> Session:
    return Session(id=sid, messages=[Message(role="user", content=t) for t in texts])


def test_k_returns_the_newest_turns_within_the_budget(tmp_path: Path) -> None:
    memory = FullContextMemory({"max_tokens": 30}, data_dir=tmp_path)
    memory.ingest(_session("s1", *[f"fact number {i} is here" for i in range(20)]), user_id="alice")
    got = memory.retrieve("x", user_id="alice", k=3)
    assert [i.text for i in got.items] == [f"fact number {i} is here" for i in (17, 18, 19)]
    everything = memory.retrieve("x", user_id="alice")  # default top_k: all that fits in 30 tokens
    assert 3 < len(everything.items) < 20 and everything.items[-1].text == "fact number 19 is here"
    assert everything.tokens <= 30
    assert FullContextMemory.memory_depends_only_on_turns(memory.config)
    memory.close()


def test_dates_are_stored_and_rendered(tmp_path: Path) -> None:
    memory = FullContextMemory(data_dir=tmp_path)
    when = datetime(2023, 5, 8, 13, 56)
    memory.ingest(Session(id="s1", messages=[Message(role="user", content="hi", timestamp=when)]), user_id="a")
    got = memory.retrieve("x", user_id="a")
    assert got.items[0].source == {"session_id": "s1", "turn_index": 0, "role": "user", "timestamp": when.isoformat()}
    assert got.context == "DATE: 8 May 2023, 13:56\nuser: hi"
    memory.close()


def test_a_torn_last_line_is_dropped_and_complete_lines_kept(tmp_path: Path) -> None:
    memory = FullContextMemory(data_dir=tmp_path)
    memory.ingest(_session("s1", "first", "second"), user_id="alice")
    memory.close()
    path = tmp_path / "alice.jsonl"
    with path.open("ab") as handle:  # what a kill -9 in the middle of an append leaves
        handle.write(b'{"id": "s1#2", "text": "My social secur')
    reopened = FullContextMemory(data_dir=tmp_path)
    assert [i.text for i in reopened.list_memories(user_id="alice")] == ["first", "second"]
    assert path.read_bytes().endswith(b"\n") and b"social" not in path.read_bytes()
    assert reopened.ingest(_session("s1", "third"), user_id="alice").first_turn == 2
    reopened.close()
    # A damaged line in the middle is an error naming file and line, never quoting the text.
    lines = path.read_bytes().split(b"\n")
    lines[1] = b'{"id": "s1#1", "text": "' + SECRET.encode() + b'"'
    path.write_bytes(b"\n".join(lines))
    broken = FullContextMemory(data_dir=tmp_path)
    with pytest.raises(MemlabError, match="line 2 is not a stored turn") as caught:
        broken.retrieve("x", user_id="alice")
    assert "SECRET" not in str(caught.value)
    broken.close()


def test_one_process_per_directory(tmp_path: Path) -> None:
    first = FullContextMemory(data_dir=tmp_path)
    with pytest.raises(DirectoryInUseError, match="in use"):
        FullContextMemory(data_dir=tmp_path)
    first.close()
    FullContextMemory(data_dir=tmp_path).close()  # released on close


def test_delete_rewrites_the_file_without_the_text(tmp_path: Path) -> None:
    memory = FullContextMemory(data_dir=tmp_path)
    assert Capability.DELETE in memory.capabilities
    memory.ingest(_session("s1", "I like tea.", SECRET, "bye"), user_id="alice")
    memory.delete("s1#1", user_id="alice")
    assert SECRET.encode() not in (tmp_path / "alice.jsonl").read_bytes()
    assert [i.id for i in memory.list_memories(user_id="alice")] == ["s1#0", "s1#2"]
    with pytest.raises(NotFoundError):
        memory.delete("s1#1", user_id="alice")
    with pytest.raises(NotFoundError):
        memory.delete("s1#0", user_id="bob")
    memory.delete("s1#2", user_id="alice")  # the session's last turn: numbering must go on
    assert memory.ingest(_session("s1", "new"), user_id="alice").first_turn == 3
    memory.close()
    reopened = FullContextMemory(data_dir=tmp_path)
    assert reopened.ingest(_session("s1", "newer"), user_id="alice").first_turn == 4
    assert reopened.export("alice")["sessions"] == {"s1": 5}
    reopened.reset("alice")
    assert not any(tmp_path.glob("alice*"))
    reopened.close()


def test_an_ingest_cut_short_leaves_none_of_its_turns(tmp_path: Path) -> None:
    memory = FullContextMemory(data_dir=tmp_path)
    memory.ingest(_session("s1", "committed"), user_id="alice")
    memory.close()
    path = tmp_path / "alice.jsonl"
    committed = path.read_bytes()
    # A 3-message ingest killed after two complete lines: no commit line, never acknowledged.
    partial = [
        {"id": f"s1#{i}", "text": f"partial {i}", "source": {"session_id": "s1", "turn_index": i, "role": "user"}}
        for i in (1, 2)
    ]
    with path.open("ab") as handle:
        handle.write("".join(json.dumps(p) + "\n" for p in partial).encode() + b'{"id": "s1#3", "te')
    reopened = FullContextMemory(data_dir=tmp_path)
    assert [i.text for i in reopened.list_memories(user_id="alice")] == ["committed"]
    assert path.read_bytes() == committed
    assert reopened.ingest(_session("s1", "retried"), user_id="alice").first_turn == 1  # the retry is stored once
    reopened.close()
    # A file from before commit lines existed (no commit line at all): every complete line counts.
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(p) + "\n" for p in partial))
    old = FullContextMemory(data_dir=tmp_path)
    assert [i.text for i in old.list_memories(user_id="old")] == ["partial 1", "partial 2"]
    old.close()
