"""The mem0 backend's store survives kill -9, refuses a second process, and never opens a damaged
store as an empty memory."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memlab.errors import DirectoryInUseError, MemlabError
from memlab.testing import session
from memlab_plugins.mem0_backend import LEDGER_FILE, Mem0Memory, Mem0StoreError

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"embedder": "hashing"}

# A writer that acknowledges each message on stdout once ingest() has returned, as a service would.
WRITER = textwrap.dedent(
    """
    import sys
    from memlab.testing.network import block_network
    with block_network():
        from memlab_plugins.mem0_backend import Mem0Memory
        from memlab.testing.conformance import session
        memory = Mem0Memory({"embedder": "hashing"}, data_dir=sys.argv[1])
        print("ready", flush=True)
        number = int(sys.argv[2])
        while True:
            memory.ingest(session(f"s{number}", ("user", f"acknowledged fact number {number}")), user_id="u")
            print(f"ack {number}", flush=True)
            number += 1
    """
)


def _child(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEM0_TELEMETRY": "False"}
    return subprocess.Popen(
        [sys.executable, "-c", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _wait_for(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdout is not None
    got = process.stdout.readline().strip()
    if got != line:
        process.kill()
        raise AssertionError(
            f"child said {got!r}, not {line!r}: {process.stderr.read()[-3000:] if process.stderr else ''}"
        )


def test_every_acknowledged_write_survives_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(1515)
    acknowledged: set[int] = set()
    number = 0
    for trial in range(6):
        writer = _child(WRITER, str(data), str(number))
        _wait_for(writer, "ready")
        assert writer.stdout is not None
        wanted = rng.randint(1, 12)
        seen = 0
        while seen < wanted:
            line = writer.stdout.readline().strip()
            assert line.startswith("ack "), (line, writer.stderr.read()[-3000:] if writer.stderr else "")
            acknowledged.add(int(line.split()[1]))
            seen += 1
        time.sleep(rng.uniform(0.0, 0.05))  # land the kill at a random point of the next write
        writer.send_signal(signal.SIGKILL)
        rest, _ = writer.communicate(timeout=60)
        acknowledged |= {int(line.split()[1]) for line in rest.splitlines() if line.startswith("ack ")}
        assert writer.returncode == -signal.SIGKILL

        memory = Mem0Memory(CONFIG, data_dir=data)  # reopening after a kill works and loses nothing acked
        stored = {item.text for item in memory.list_memories(user_id="u")}
        missing = sorted(n for n in acknowledged if f"acknowledged fact number {n}" not in stored)
        assert not missing, f"trial {trial}: acknowledged writes lost after kill -9: {missing}"
        probe = max(acknowledged)
        hits = memory.retrieve(f"acknowledged fact number {probe}", user_id="u", k=3)
        assert any(f"number {probe}" in item.text for item in hits.items)
        memory.close()
        number = max(acknowledged) + 1
    assert len(acknowledged) >= 6


HOLDER = textwrap.dedent(
    """
    import sys
    from memlab.testing.network import block_network
    with block_network():
        from memlab_plugins.mem0_backend import Mem0Memory
        memory = Mem0Memory({"embedder": "hashing"}, data_dir=sys.argv[1])
        print("ready", flush=True)
        sys.stdin.readline()
        memory.close()
        print("closed", flush=True)
    """
)


def test_a_second_process_on_the_data_dir_is_refused_at_once(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        _wait_for(holder, "ready")
        started = time.perf_counter()
        with pytest.raises(DirectoryInUseError, match=rf"in use: another memlab mem0 backend \(pid {holder.pid}\)"):
            Mem0Memory(CONFIG, data_dir=tmp_path)
        assert time.perf_counter() - started < 5, "the refusal must not wait for the holder"
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        _wait_for(holder, "closed")
    finally:
        holder.kill()
        holder.wait(timeout=30)
    Mem0Memory(CONFIG, data_dir=tmp_path).close()  # free again once the holder closed


def test_a_second_instance_in_one_process_is_refused_too(tmp_path: Path) -> None:
    first = Mem0Memory(CONFIG, data_dir=tmp_path)
    with pytest.raises(DirectoryInUseError, match="in use"):
        Mem0Memory(CONFIG, data_dir=tmp_path)
    first.close()
    Mem0Memory(CONFIG, data_dir=tmp_path).close()


def test_a_store_whose_files_are_gone_is_an_error_not_an_empty_memory(tmp_path: Path) -> None:
    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "I keep bees."), ("user", "I ride a bike.")), user_id="u")
    memory.close()
    for path in (tmp_path / "qdrant").rglob("storage.sqlite"):
        path.unlink()
    with pytest.raises(Mem0StoreError, match=rf"opened empty.*{LEDGER_FILE}.*2 stored memories"):
        Mem0Memory(CONFIG, data_dir=tmp_path)


def test_a_damaged_store_file_is_an_error(tmp_path: Path) -> None:
    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "I keep bees.")), user_id="u")
    memory.close()
    (tmp_path / "qdrant" / "meta.json").write_bytes(b"")  # what a torn in-place rewrite leaves
    with pytest.raises(Mem0StoreError, match="cannot open the mem0 store"):
        Mem0Memory(CONFIG, data_dir=tmp_path)


def test_an_old_faiss_data_dir_is_refused_with_a_way_out(tmp_path: Path) -> None:
    (tmp_path / "faiss").mkdir()
    with pytest.raises(MemlabError, match="FAISS store written by an earlier memlab"):
        Mem0Memory(CONFIG, data_dir=tmp_path)


def test_concurrent_users_in_threads_lose_nothing(tmp_path: Path) -> None:
    import threading

    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    errors: list[BaseException] = []

    def work(user: str) -> None:
        try:
            for i in range(8):
                memory.ingest(
                    session(f"s{i}", ("user", f"{user} fact {i}"), ("assistant", f"{user} reply {i}")), user_id=user
                )
                memory.retrieve(f"{user} fact", user_id=user, k=3)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"user{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for n in range(4):
        texts = {i.text for i in memory.list_memories(user_id=f"user{n}")}
        assert texts == {f"user{n} {kind} {i}" for kind in ("fact", "reply") for i in range(8)}
    memory.close()


def test_calls_from_several_threads_run_one_at_a_time(tmp_path: Path) -> None:
    """mem0's embedded store and the per-ingest LLM usage are not thread-safe: the backend serialises."""
    import threading

    from memlab.testing.chat_models import FunctionChatModel, mem0_extraction_reply

    events: list[tuple[str, str]] = []

    def slow_reply(messages):  # type: ignore[no-untyped-def]
        who = "alpha" if "alpha" in messages[1].content else "beta"
        events.append(("start", who))
        time.sleep(0.3)
        events.append(("end", who))
        return mem0_extraction_reply(messages)

    model = FunctionChatModel(respond=slow_reply)
    memory = Mem0Memory(CONFIG, data_dir=tmp_path, chat_model=model)
    reports = {}

    def work(user: str) -> None:
        reports[user] = memory.ingest(session("s", ("user", f"I am {user} and I like tea.")), user_id=user)

    threads = [threading.Thread(target=work, args=(user,)) for user in ("alpha", "beta")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [kind for kind, _ in events] == ["start", "end", "start", "end"], events
    assert reports["alpha"].prompt_tokens > 0 and reports["beta"].prompt_tokens > 0
    memory.close()


# Writes of several messages to one continuing session, each acknowledged once ingest() returned.
MULTI_WRITER = textwrap.dedent(
    """
    import sys
    from memlab.testing.network import block_network
    with block_network():
        from memlab_plugins.mem0_backend import Mem0Memory
        from memlab.testing.conformance import session
        bulk = sys.argv[3] == "bulk"
        memory = Mem0Memory({"embedder": "hashing", "bulk_insert": bulk}, data_dir=sys.argv[1])
        print("ready", flush=True)
        write = int(sys.argv[2])
        while True:
            turns = [("user", f"write {write} part {part}") for part in range(int(sys.argv[4]))]
            memory.ingest(session("s", *turns), user_id="u")
            print(f"ack {write}", flush=True)
            write += 1
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("mode,parts", [("bulk", 40), ("per-message", 3)])
def test_a_multi_message_write_is_all_or_nothing_across_kill_9(tmp_path: Path, mode: str, parts: int) -> None:
    """issue 25: half of a two-message write persisted after SIGKILL, and the next write reused its turn index."""
    data = tmp_path / "data"
    rng = random.Random(2525)
    acknowledged: set[int] = set()
    write = 0
    for trial in range(4):
        writer = _child(MULTI_WRITER, str(data), str(write), mode, str(parts))
        _wait_for(writer, "ready")
        assert writer.stdout is not None
        for _ in range(rng.randint(1, 3)):
            line = writer.stdout.readline().strip()
            assert line.startswith("ack "), (line, writer.stderr.read()[-3000:] if writer.stderr else "")
            acknowledged.add(int(line.split()[1]))
        time.sleep(rng.uniform(0.0, 0.2))  # land the kill inside the next write
        writer.send_signal(signal.SIGKILL)
        rest, _ = writer.communicate(timeout=60)
        acknowledged |= {int(line.split()[1]) for line in rest.splitlines() if line.startswith("ack ")}

        memory = Mem0Memory({"embedder": "hashing", "bulk_insert": mode == "bulk"}, data_dir=data)
        items = memory.list_memories(user_id="u")
        by_write: dict[int, list[int]] = {}
        for item in items:
            by_write.setdefault(int(item.text.split()[1]), []).append(item.source["turn_index"])
        turns = sorted(t for ts in by_write.values() for t in ts)
        assert turns == list(range(len(turns))), f"trial {trial}: turn indexes reused or skipped: {turns}"
        partial = {w: len(ts) for w, ts in by_write.items() if len(ts) != parts}
        assert not partial, f"trial {trial}: writes stored in part after kill -9: {partial}"
        assert acknowledged <= set(by_write), f"trial {trial}: acknowledged writes lost: {acknowledged - set(by_write)}"
        memory.close()
        write = max(by_write, default=-1) + 1


def test_one_users_long_ingest_does_not_hold_up_another_users_search(tmp_path: Path) -> None:
    """issue 25: a search by one user waited 61.3 s for another user's 61.8 s ingest."""
    import threading

    memory = Mem0Memory(CONFIG, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "Bob keeps bees on his roof.")), user_id="bob")
    real_insert, batches = memory._mem.vector_store.insert, []

    def slow_insert(*args, **kwargs):  # type: ignore[no-untyped-def]
        batches.append(1)
        time.sleep(0.02)  # a slow disk: 80 batches, 1.6 s at least
        return real_insert(*args, **kwargs)

    memory._mem.vector_store.insert = slow_insert
    finished = threading.Event()

    def long_ingest() -> None:
        memory.ingest(session("big", *[("user", f"alice fact {i}") for i in range(320)]), user_id="alice")
        finished.set()

    writer = threading.Thread(target=long_ingest)
    writer.start()
    while not batches:
        time.sleep(0.005)
    found = memory.retrieve("who keeps bees?", user_id="bob", k=1)
    searched_during_ingest = not finished.is_set()
    writer.join()
    assert [i.text for i in found.items] == ["Bob keeps bees on his roof."]
    assert searched_during_ingest, "bob's search returned only after alice's ingest had finished"
    assert len(memory.list_memories(user_id="alice")) == 320
    memory.close()
