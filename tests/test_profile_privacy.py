"""The profile backend as a store of personal data: real deletion, forget, export, not-found, one writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from memlab.errors import DirectoryInUseError, NotFoundError
from memlab.registry import create_backend
from memlab.testing import session
from memlab.types import Message, Session
from memlab_plugins.profile.backend import ProfileMemory

SECRET = "SECRET-778899"


def make(data_dir: Path | None = None, **config: object) -> ProfileMemory:
    mem = create_backend("profile", {"embedder": "hashing", "aspect_threshold": 0.5, **config}, data_dir=data_dir)
    assert isinstance(mem, ProfileMemory)
    return mem


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _secret_session() -> Session:
    return session(
        "s1",
        ("user", "I love hiking in the Alps."),
        ("user", f"My social security number is {SECRET}."),
        ("assistant", "Noted."),
    )


def _secret_entry(mem: ProfileMemory, user: str) -> str:
    (entry,) = [
        i for i in mem.list_memories(user_id=user) if i.metadata["kind"] == "profile_entry" and SECRET in i.text
    ]
    return entry.id


def test_deleted_entry_and_turn_leave_no_byte_on_disk_or_in_recall(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with make(data) as mem:
        mem.ingest(_secret_session(), user_id="u")
        mem.ingest(session("s2", ("user", "I stopped hiking, my knee hurts.")), user_id="u")
        assert SECRET in mem.retrieve("social security number", user_id="u").context
        entry_id = _secret_entry(mem, "u")
        mem.delete(entry_id, user_id="u")
        for query in ("social security number", SECRET, "hiking"):
            retrieval = mem.retrieve(query, user_id="u")
            assert SECRET not in retrieval.context and all(SECRET not in i.text for i in retrieval.items)
        # The chain records the deletion without the text; history still answers for the id.
        history = mem.history(entry_id, user_id="u")
        assert history and all(v["erased_at"] and v["value"] == "" and v["aspect"] == "" for v in history)
        assert SECRET not in json.dumps(mem.export("u"))
        deleted = [o for o in mem.operations("u", entry_id) if o.op.value == "DELETE"]
        assert deleted and deleted[-1].reason == "deleted through the API"
        with pytest.raises(NotFoundError):
            mem.update(entry_id, "x", user_id="u")
        # The raw turn that stated it keeps its other words; the deleted statement is redacted.
        assert mem.history("s1#1", user_id="u")[0]["content"] == "[deleted]"
        assert not _files_holding(data, SECRET.encode()), "deleted text must not stay in the store files"
        assert "hiking" in mem.retrieve("hiking", user_id="u").context  # the rest is intact
        # A raw turn, listed with the entries, can be deleted itself, with the quotes taken from it.
        mem.ingest(session("s3", ("user", "Oh and my locker code is LOCKER-4455, don't tell anyone.")), user_id="u")
        turn_ids = [i.id for i in mem.list_memories(user_id="u") if i.metadata["kind"] == "turn" and "LOCKER" in i.text]
        assert turn_ids == ["s3#0"]
        assert "LOCKER-4455" in mem.retrieve("locker code", user_id="u").context
        mem.delete("s3#0", user_id="u")
        with pytest.raises(NotFoundError):
            mem.delete("s3#0", user_id="u")
        assert all("s3#0" != i.id for i in mem.list_memories(user_id="u"))
        for item in mem.list_memories(user_id="u"):
            if item.metadata["kind"] == "profile_entry" and "LOCKER" in item.text:
                mem.delete(item.id, user_id="u")  # the entry taken from it is a separate item
        assert "LOCKER-4455" not in mem.retrieve("locker code", user_id="u").context
        assert "LOCKER-4455" not in json.dumps(mem.export("u"))
        assert not _files_holding(data, b"LOCKER-4455")
    with make(data) as again:  # and after a reopen
        assert SECRET not in again.retrieve("social security number", user_id="u").context
        assert not _files_holding(data, SECRET.encode())


def test_forget_leaves_no_trace_of_the_user(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with make(data) as mem:
        mem.ingest(_secret_session(), user_id="u")
        mem.ingest(session("s1", ("user", "I keep bees on my roof.")), user_id="other")
        mem.reset("u")
        assert mem.list_memories(user_id="u") == []
        assert mem.export("u")["entries"] == [] and mem.export("u")["turns"] == []
        for needle in (SECRET, "hiking in the Alps"):
            assert not _files_holding(data, needle.encode()), needle
        assert "bees" in mem.retrieve("bees", user_id="other").context


def test_unknown_and_foreign_ids_are_not_found() -> None:
    mem = make()
    mem.ingest(_secret_session(), user_id="a")
    entry_id = _secret_entry(mem, "a")
    for item_id in ("p_missing", entry_id, entry_id + ".v1", "s1#1", "s1#99", "nosuch#0"):
        for call in (
            lambda i: mem.history(i, user_id="b"),
            lambda i: mem.delete(i, user_id="b"),
            lambda i: mem.update(i, "new text", user_id="b"),
        ):
            with pytest.raises(NotFoundError):
                call(item_id)
    assert len(mem.history("s1#1", user_id="a")) == 1  # a raw turn's history is the turn itself


def test_export_holds_versions_operations_and_turns() -> None:
    mem = make()
    when = datetime(2024, 5, 8, 13, 56)
    mem.ingest(Session(id="s1", messages=[Message(role="user", content="I love sushi.", timestamp=when)]), user_id="u")
    mem.ingest(session("s2", ("user", "I hate sushi now, I got sick.")), user_id="u")
    document = mem.export("u")
    assert document["backend"] == "profile" and document["user_id"] == "u"
    assert [e["version"] for e in document["entries"]] == [1, 2]
    assert [o["op"] for o in document["operations"]] == ["ADD", "UPDATE"]
    assert [(t["session_id"], t["turn_index"]) for t in document["turns"]] == [("s1", 0), ("s2", 0)]
    assert document["turns"][0]["timestamp"] == when.isoformat()
    assert set(document["extraction_stats"]) == {"llm_calls", "retries", "invalid_replies", "rejected_batches"}
    json.dumps(document)  # JSON-serialisable as it is
    copy = make()
    assert copy.import_profile("v", document) == 2
    assert [t["content"] for t in copy.export("v")["turns"]] == ["I love sushi.", "I hate sushi now, I got sick."]


def test_supporting_turns_carry_and_render_their_dates() -> None:
    mem = make()
    when = datetime(2023, 5, 8, 13, 56)
    mem.ingest(
        Session(
            id="s1", messages=[Message(role="user", content="Biscuit chewed the sofa today, haha.", timestamp=when)]
        ),
        user_id="u",
    )
    retrieval = mem.retrieve("Biscuit chewed the sofa", user_id="u")
    (turn,) = [i for i in retrieval.items if i.metadata["kind"] == "turn"]
    assert turn.source["timestamp"] == when.isoformat()
    assert "DATE: 8 May 2023, 13:56\nuser: Biscuit chewed the sofa today, haha." in retrieval.context


SECOND_PROCESS = textwrap.dedent(
    """
    import sys
    from memlab.errors import DirectoryInUseError
    from memlab.registry import create_backend
    try:
        create_backend("profile", {"embedder": "hashing"}, data_dir=sys.argv[1])
    except DirectoryInUseError as exc:
        print(exc)
        sys.exit(3)
    sys.exit(0)
    """
)


def test_second_process_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = lambda: subprocess.run(  # noqa: E731
        [sys.executable, "-c", SECOND_PROCESS, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    with make(tmp_path):
        refused = run()
        assert refused.returncode == 3, refused.stderr
        assert "in use" in refused.stdout and str(os.getpid()) in refused.stdout
        with pytest.raises(DirectoryInUseError, match="in use"):
            make(tmp_path)  # a second instance in this process too
    assert run().returncode == 0, "closing the backend releases the directory"


def _profile_shape(mem: ProfileMemory, user: str) -> list[tuple[object, ...]]:
    """The profile without its random ids: what a split of sessions must not change."""
    ids: dict[str, int] = {}
    for op in mem.operations(user):  # entries numbered in the order the log first names them
        ids.setdefault(op.entry_id or "", len(ids))
    entries = sorted(mem.get_profile(user, include_closed=True), key=lambda e: (ids[e.id], e.version))
    return [
        (
            ids[e.id],
            e.version,
            e.aspect,
            e.value,
            e.stance,
            e.valid_from,
            e.valid_to,
            e.valid_from_time,
            e.valid_to_time,
            e.reason,
            e.closed_reason,
        )
        for e in entries
    ] + [(o.op, ids[o.entry_id or ""], o.version, o.reason, o.evidence) for o in mem.operations(user)]


def test_rules_profile_does_not_depend_on_how_sessions_are_split() -> None:
    turns = [
        ("user", "I love pottery classes, they calm me."),
        ("assistant", "Lovely."),
        ("user", "My favourite number is 0."),
        ("user", "I live in Paris."),
        ("user", "Honestly I hate pottery classes now, the teacher left."),
        ("user", "I moved to Berlin last month."),
        ("user", "My favourite number is 4."),
        ("user", "I stopped running because of my knee."),
    ]
    assert ProfileMemory.memory_depends_only_on_turns(ProfileMemory.Config())
    assert not ProfileMemory.memory_depends_only_on_turns(ProfileMemory.Config(extractor="llm", llm={"provider": "x"}))
    messages = [Message(role=r, content=t, timestamp=datetime(2024, 1, 1 + i, 9)) for i, (r, t) in enumerate(turns)]
    whole = make()
    whole.ingest(Session(id="s1", messages=messages), user_id="u")
    expected = _profile_shape(whole, "u")
    assert len(expected) > 8
    for cut in range(1, len(turns)):
        parts = make()
        parts.ingest(Session(id="s1", messages=messages[:cut]), user_id="u")
        parts.ingest(Session(id="s1", messages=messages[cut:]), user_id="u")
        assert _profile_shape(parts, "u") == expected, f"cut after turn {cut}"


def test_cache_dir_reaches_the_embedder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlab_plugins.profile import backend as backend_module

    seen: list[object] = []
    real = backend_module.get_embedder

    def spy(kind: str, model: str | None = None, *, cache_dir: object = None):  # type: ignore[no-untyped-def]
        seen.append(cache_dir)
        return real(kind, model, cache_dir=cache_dir)

    monkeypatch.setattr(backend_module, "get_embedder", spy)
    with ProfileMemory({"embedder": "hashing"}, cache_dir=tmp_path / "cache") as mem:
        assert mem.cache_dir == tmp_path / "cache"
    assert seen == [tmp_path / "cache"]


def test_everything_recall_returns_can_be_deleted_through_the_client(tmp_path: Path) -> None:
    from memlab.client import MemoryClient

    data = tmp_path / "data"
    client = MemoryClient("profile", {"embedder": "hashing", "aspect_threshold": 0.5}, data_dir=data)
    try:
        client.remember("u", [("user", f"I love my pin code {SECRET}, it is lucky.")], session_id="s1")
        client.remember("u", [("user", f"I stopped using the pin code {SECRET}.")], session_id="s2")
        client.remember("u", [("user", "I keep bees on my roof.")], session_id="s3")
        for _ in range(3):  # each pass deletes what recall still shows with the secret
            for item in client.recall("u", "pin code", k=10).items:
                if SECRET in item.text or SECRET in json.dumps(client.history("u", item.id)):
                    client.delete("u", item.id)
        assert SECRET not in client.recall("u", "pin code", k=10).context
        assert SECRET not in json.dumps([i.model_dump(mode="json") for i in client.memories("u")])
        assert not _files_holding(data, SECRET.encode())
        assert "bees" in client.recall("u", "bees", k=10).context
    finally:
        client.close()
