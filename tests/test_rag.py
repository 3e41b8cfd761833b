"""The rag backend: scoring modes, FAISS index choice, chunking, roles and crash-safe persistence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlab.errors import DataFormatError, MemlabError
from memlab.memory import Capability, Memory
from memlab.registry import create_backend
from memlab.testing import MemoryConformance, session
from memlab.testing.tiny_bge_m3 import cached_tiny_bge_m3
from memlab.types import Message, Session
from memlab_plugins.rag import RagConfig, RagMemory, chunk_session
from memlab_plugins.rag import file_store as rag_store

FACTS = [
    "I adopted a grey cat named Pixel last spring.",
    "My sister painted a vegan curry yesterday.",
    "The doctor recommended a marathon in spring.",
    "Our team bought a budget spreadsheet after work.",
    "I keep bees on the roof of my apartment in Lisbon.",
    "My boss learned pottery during the holidays.",
    "We planned a hiking route in the mountains.",
    "My friend cooked dinner for the jazz festival crew.",
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cached_tiny_bge_m3(tmp_path_factory.getbasetemp())


def m3_config(tiny_dir: Path, **extra: Any) -> dict[str, Any]:
    """BGE-M3's own scorings alone (no BM25 fusion), unless a test asks for it."""
    return {"embedder": "bge-m3", "model": str(tiny_dir), "lexical": "none", **extra}


def facts_session(sid: str = "s1") -> Session:
    return session(sid, *[("user", f) for f in FACTS])


# ----------------------------------------------------------------------------- scoring
@pytest.mark.parametrize("scoring", ["dense", "sparse", "colbert", "hybrid"])
def test_each_scoring_ranks_the_exact_match_first(tiny_dir: Path, scoring: str) -> None:
    memory = create_backend("rag", m3_config(tiny_dir, scoring=scoring, candidates=len(FACTS)))
    memory.ingest(facts_session(), user_id="u")
    for turn, fact in enumerate(FACTS):
        result = memory.retrieve(fact, user_id="u", k=1)
        assert [i.source["turn_index"] for i in result.items] == [turn], (scoring, fact, result.items)
    top = memory.retrieve(FACTS[0], user_id="u", k=3).items
    assert len(top) == 3 and [i.source["turn_index"] for i in top] == sorted(i.source["turn_index"] for i in top)
    if scoring != "dense":
        parts = top[0].metadata["scores"]
        assert "dense" in parts and (scoring in parts or scoring == "hybrid")


def test_hybrid_is_the_weighted_sum_of_the_parts(tiny_dir: Path) -> None:
    weights = {"dense": 0.7, "sparse": 0.2, "colbert": 0.5}
    memory = create_backend("rag", m3_config(tiny_dir, scoring="hybrid", weights=weights))
    memory.ingest(facts_session(), user_id="u")
    for item in memory.retrieve("a cat named Pixel on the roof", user_id="u", k=4).items:
        parts = item.metadata["scores"]
        assert item.score == pytest.approx(sum(weights[n] * parts[n] for n in weights), rel=1e-5)
    default = RagConfig(embedder="bge-m3", scoring="hybrid").weights
    assert (default.dense, default.sparse, default.colbert) == (1.0, 0.3, 1.0)  # the BGE-M3 paper's


def test_reranking_only_sees_the_dense_candidates(tiny_dir: Path) -> None:
    memory = create_backend("rag", m3_config(tiny_dir, scoring="sparse", candidates=2))
    memory.ingest(facts_session(), user_id="u")
    dense = create_backend("rag", m3_config(tiny_dir))
    dense.ingest(facts_session(), user_id="u")
    query = "bees and a cat named Pixel"
    pool = {i.id for i in dense.retrieve(query, user_id="u", k=2).items}
    # k above the candidate count widens the pool to k, never below it.
    assert {i.id for i in memory.retrieve(query, user_id="u", k=2).items} == pool
    assert len(memory.retrieve(query, user_id="u", k=5).items) == 5


def test_sparse_needs_bge_m3() -> None:
    with pytest.raises(MemlabError, match="scoring='sparse' needs BGE-M3"):
        RagMemory.parse_config({"scoring": "sparse"})
    with pytest.raises(MemlabError):
        RagMemory.parse_config({"embedder": "bge-m3", "scoring": "bm25"})
    with pytest.raises(MemlabError, match="weights must not all be zero"):
        RagMemory.parse_config(
            {"embedder": "bge-m3", "scoring": "hybrid", "weights": {"dense": 0, "sparse": 0, "colbert": 0}}
        )


def test_hybrid_skips_outputs_with_zero_weight() -> None:
    config = RagConfig(embedder="bge-m3", scoring="hybrid", weights={"dense": 1, "sparse": 0, "colbert": 1})
    assert config.outputs() == (False, True)


# ----------------------------------------------------------------------------- index choice
def test_hnsw_index_finds_exact_matches_and_persists(tmp_path: Path) -> None:
    config = {"embedder": "hashing", "index": "hnsw", "hnsw_m": 8, "hnsw_ef_search": 64}
    memory = create_backend("rag", config, data_dir=tmp_path)
    turns = [("user", f"Note {i}: I bought {i} apples and {i * 7 % 13} pears on day {i}.") for i in range(300)]
    memory.ingest(session("s1", *turns), user_id="u")
    store = memory._stores["u"]
    assert type(store.index).__name__ == "IndexHNSWFlat" and store.index.hnsw.efSearch == 64
    for i in (0, 123, 299):
        assert memory.retrieve(turns[i][1], user_id="u", k=1).items[0].source["turn_index"] == i
    memory.close()
    reopened = create_backend("rag", config, data_dir=tmp_path)
    assert reopened.retrieve(turns[123][1], user_id="u", k=1).items[0].source["turn_index"] == 123
    assert type(reopened._stores["u"].index).__name__ == "IndexHNSWFlat"
    reopened.close()
    # Opening with another index type rebuilds it from the stored vectors.
    flat = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    assert flat.retrieve(turns[5][1], user_id="u", k=1).items[0].source["turn_index"] == 5
    assert type(flat._stores["u"].index).__name__ == "IndexFlatIP"
    flat.close()


# ----------------------------------------------------------------------------- chunking
CONVERSATION = Session(
    id="s9",
    messages=[
        Message(role="system", content="You are talking to Kanoa."),
        Message(role="user", content="I started learning the ukulele last month."),
        Message(role="assistant", content="That is great! Which songs are you practising?"),
        Message(role="user", content="Mostly old Hawaiian songs my grandmother sang."),
        Message(role="assistant", content="   "),
    ],
)


def test_turn_chunking_keeps_session_turn_and_role() -> None:
    chunks = chunk_session(CONVERSATION, 4, RagConfig(embedder="hashing"))
    assert [c.source for c in chunks] == [
        {"session_id": "s9", "turn_index": 5, "role": "user"},
        {"session_id": "s9", "turn_index": 6, "role": "assistant"},
        {"session_id": "s9", "turn_index": 7, "role": "user"},
    ]
    assert chunks[0].text == CONVERSATION.messages[1].content
    cut = chunk_session(CONVERSATION, 0, RagConfig(embedder="hashing", max_chunk_chars=50))
    assert all(len(c.text) <= 50 for c in cut)


def test_roles_user_only_or_all() -> None:
    user = chunk_session(CONVERSATION, 0, RagConfig(embedder="hashing", roles="user"))
    assert [c.source["role"] for c in user] == ["user", "user"]
    everything = chunk_session(CONVERSATION, 0, RagConfig(embedder="hashing", roles="all"))
    assert [c.source["role"] for c in everything] == ["system", "user", "assistant", "user"]
    with pytest.raises(ValueError):
        RagConfig(roles="bots")


def test_session_chunking_is_one_transcript_chunk() -> None:
    (chunk,) = chunk_session(CONVERSATION, 0, RagConfig(embedder="hashing", chunking="session"))
    assert chunk.text.splitlines() == [
        "user: I started learning the ukulele last month.",
        "assistant: That is great! Which songs are you practising?",
        "user: Mostly old Hawaiian songs my grandmother sang.",
    ]
    assert chunk.source["session_id"] == "s9"
    assert [t["turn_index"] for t in chunk.source["turns"]] == [1, 2, 3]
    assert all(t["session_id"] == "s9" for t in chunk.source["turns"])


def test_window_chunking_overlaps_and_covers_everything() -> None:
    from memlab.tokens import count_tokens

    config = RagConfig(embedder="hashing", chunking="window", window_tokens=10, window_overlap=3)
    chunks = chunk_session(CONVERSATION, 0, config)
    transcript = chunk_session(CONVERSATION, 0, RagConfig(embedder="hashing", chunking="session"))[0].text
    total = count_tokens(transcript)
    assert len(chunks) == -(-(total - 3) // 7)  # windows every 7 tokens until the end is covered
    assert all(count_tokens(c.text) <= 10 for c in chunks)
    assert chunks[0].text.startswith("user: I started") and transcript.endswith(chunks[-1].text)
    for a, b in zip(chunks, chunks[1:]):
        shared = (
            count_tokens(a.text)
            + count_tokens(b.text)
            - count_tokens(transcript[transcript.index(a.text) : transcript.index(b.text) + len(b.text)])
        )
        assert shared == 3 or b is chunks[-1]
    # Each window names the turns it overlaps, in order.
    assert chunks[0].source["turns"][0]["turn_index"] == 1
    assert chunks[-1].source["turns"][-1]["turn_index"] == 3
    spanning = [c for c in chunks if len(c.source["turns"]) > 1]
    assert spanning, "some window must cross a turn boundary"
    with pytest.raises(ValueError, match="window_overlap"):
        RagConfig(chunking="window", window_tokens=8, window_overlap=8)


def test_window_chunks_are_retrieved_with_their_turns(tiny_dir: Path) -> None:
    memory = create_backend(
        "rag", m3_config(tiny_dir, chunking="window", window_tokens=12, window_overlap=4, scoring="hybrid")
    )
    memory.ingest(facts_session(), user_id="u")
    result = memory.retrieve("bees on the roof", user_id="u", k=2)
    assert len(result.items) == 2 and result.context
    assert all(item.source["turns"] and "turn_index" not in item.source for item in result.items)


# ----------------------------------------------------------------------------- persistence
def test_save_load_round_trips_without_re_embedding(tiny_dir: Path, tmp_path: Path) -> None:
    config = m3_config(tiny_dir, scoring="hybrid")
    first = create_backend("rag", config, data_dir=tmp_path)
    first.ingest(facts_session("s1"), user_id="u")
    first.ingest(session("s2", ("user", "My cat Pixel now sleeps on the roof.")), user_id="u")
    queries = ["cat named Pixel", "bees in Lisbon", "marathon"]
    before = [[(i.id, round(i.score, 5)) for i in first.retrieve(q, user_id="u", k=3).items] for q in queries]
    first.close()
    assert sorted(p.name for p in (tmp_path / "user-u").iterdir()) == ["log-000000.mlr", "snapshot-000000.mlr"]
    second = create_backend("rag", config, data_dir=tmp_path)
    embedded = second.embedder.texts_embedded
    after = [[(i.id, round(i.score, 5)) for i in second.retrieve(q, user_id="u", k=3).items] for q in queries]
    assert after == before
    assert second.embedder.texts_embedded == embedded + len(queries), "only the queries were embedded"
    store = second._stores["u"]
    assert len(store) == len(FACTS) + 1 and store.index.ntotal == len(store)
    assert second.ingest(session("s2", ("user", "More.")), user_id="u").first_turn == 1
    second.close()


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_many_small_ingests_keep_a_handful_of_files(tmp_path: Path) -> None:
    """708 single-message ingests once made 1,418 files; the log + compacted snapshot keep a few."""
    memory = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    for i in range(708):
        memory.ingest(session("chat", ("user", f"Message {i}: I watered plant number {i}.")), user_id="u")
    files = _files(tmp_path)
    assert len(files) <= 10, sorted(str(p) for p in files)
    storage = memory._stores["u"].storage
    assert storage.generation > 0, "the log was compacted into a new snapshot at least once"
    memory.close()
    reopened = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    assert len(reopened.list_memories(user_id="u")) == 708
    assert reopened.ingest(session("chat", ("user", "One more.")), user_id="u").first_turn == 708
    assert reopened.retrieve("plant number 345", user_id="u", k=1).items[0].source["turn_index"] == 345
    reopened.close()
    assert len(_files(tmp_path)) <= 10


CRASH_WRITER = """
import sys
from memlab.registry import create_backend
from memlab.types import Message, Session
memory = create_backend("rag", {"embedder": "hashing"}, data_dir=sys.argv[1])
for i in range(100000):
    memory.ingest(Session(id="s", messages=[Message(role="user", content=f"acknowledged fact {i}")]), user_id="u")
    print(i, flush=True)
"""


def test_kill_9_during_writes_loses_no_acknowledged_ingest(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    for trial in range(3):
        data = tmp_path / f"trial{trial}"
        writer = subprocess.Popen([sys.executable, "-c", CRASH_WRITER, str(data)], stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None
        acknowledged = -1
        for line in writer.stdout:
            acknowledged = int(line)
            if acknowledged >= 40 + 17 * trial:  # somewhere past a compaction, at a different point each time
                break
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        memory = create_backend("rag", {"embedder": "hashing"}, data_dir=data)
        texts = {item.text for item in memory.list_memories(user_id="u")}
        assert {f"acknowledged fact {i}" for i in range(acknowledged + 1)} <= texts
        count = len(texts)
        assert memory.ingest(session("s", ("user", "after the crash")), user_id="u").first_turn == count
        memory.close()


def test_a_torn_last_record_is_dropped_and_earlier_data_kept(tmp_path: Path) -> None:
    memory = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    memory.ingest(facts_session("s1"), user_id="u")
    memory.ingest(session("s2", ("user", "This part was committed.")), user_id="u")
    memory.close()
    log = tmp_path / "user-u" / "log-000000.mlr"
    size = log.stat().st_size
    with log.open("ab") as handle:  # a crash mid-append: half a record at the end
        handle.write(rag_store.MAGIC + b"\x00\x01\x02 half a record")
    reopened = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    texts = [i.text for i in reopened.list_memories(user_id="u")]
    assert texts == [*FACTS, "This part was committed."]
    assert log.stat().st_size == size, "the torn tail was truncated"
    assert reopened.ingest(session("s3", ("user", "Stored after the repair.")), user_id="u").first_turn == 0
    reopened.close()
    again = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    assert [i.text for i in again.list_memories(user_id="u")][-1] == "Stored after the repair."
    again.close()


def test_an_interrupted_compaction_keeps_the_complete_generation(tmp_path: Path) -> None:
    memory = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    memory.ingest(facts_session("s1"), user_id="u")
    memory.close()
    folder = tmp_path / "user-u"
    # Leftovers of a compaction that died before its rename: a temporary snapshot of generation 1.
    (folder / ".snapshot-000001.mlr.tmp").write_bytes(b"MLR1 partial")
    reopened = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    assert len(reopened.list_memories(user_id="u")) == len(FACTS)
    assert sorted(p.name for p in folder.iterdir()) == ["log-000000.mlr", "snapshot-000000.mlr"]
    reopened.close()


def ingest_while_failing(
    memory: Memory, part: Session, monkeypatch: pytest.MonkeyPatch, target: object, name: str, error: Exception
) -> None:
    """Ingest ``part`` for user ``u`` while ``target.name`` raises ``error``; the error must reach the caller."""

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(target, name, failing)
    with pytest.raises(type(error), match=str(error)):
        memory.ingest(part, user_id="u")
    monkeypatch.undo()


def test_a_failed_embedding_does_not_count_the_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = create_backend("rag", {"embedder": "hashing"})
    memory.ingest(session("s1", ("user", "I adopted a cat.")), user_id="u")
    part = session("s1", ("user", "I named it Pixel."))
    ingest_while_failing(memory, part, monkeypatch, memory.embedder, "embed", RuntimeError("model down"))
    assert memory.ingest(part, user_id="u").first_turn == 1
    assert [i.id for i in memory.retrieve("cat named Pixel", user_id="u", k=5).items] == ["s1#0", "s1#1"]


def test_a_failed_save_in_process_then_a_retry_stores_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    memory.ingest(facts_session("s1"), user_id="u")
    part = session("s2", ("user", "Saved on the second try."))
    ingest_while_failing(memory, part, monkeypatch, rag_store.os, "fsync", OSError("disk full"))
    # Same process, same backend: the unacknowledged part is neither kept nor counted.
    assert memory.ingest(part, user_id="u").first_turn == 0
    texts = [i.text for i in memory.retrieve("Saved on the second try.", user_id="u", k=20).items]
    assert texts.count("Saved on the second try.") == 1 and len(texts) == len(FACTS) + 1
    memory.close()
    reopened = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    assert len(reopened.retrieve("Saved", user_id="u", k=20).items) == len(FACTS) + 1
    reopened.close()


def test_other_settings_refuse_a_store(tmp_path: Path) -> None:
    first = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    first.ingest(facts_session(), user_id="u")
    first.close()
    other = create_backend("rag", {"embedder": "hashing", "chunking": "session"}, data_dir=tmp_path)
    with pytest.raises(DataFormatError, match="chunking"):
        other.retrieve("cat", user_id="u")
    other.close()


def test_scoring_can_change_on_a_saved_store(tiny_dir: Path, tmp_path: Path) -> None:
    dense = create_backend("rag", m3_config(tiny_dir), data_dir=tmp_path)
    dense.ingest(facts_session(), user_id="u")
    dense.close()
    hybrid = create_backend("rag", m3_config(tiny_dir, scoring="hybrid"), data_dir=tmp_path)
    top = hybrid.retrieve(FACTS[4], user_id="u", k=1).items[0]
    assert top.source["turn_index"] == 4 and set(top.metadata["scores"]) == {"dense", "sparse", "colbert"}
    hybrid.close()


def test_reset_deletes_the_store(tmp_path: Path) -> None:
    memory = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    memory.ingest(facts_session(), user_id="u")
    memory.ingest(facts_session(), user_id="v")
    memory.reset("u")
    assert not (tmp_path / "user-u").exists() and (tmp_path / "user-v").exists()
    memory.close()
    reopened = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    assert reopened.retrieve("cat", user_id="u").is_empty
    reopened.close()


def test_rag_declares_persist() -> None:
    assert Capability.PERSIST in RagMemory.capabilities


# ----------------------------------------------------------------------------- conformance
class TestRagBGEM3Hybrid(MemoryConformance):
    @pytest.fixture(autouse=True)
    def _model(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.model_dir = cached_tiny_bge_m3(tmp_path_factory.getbasetemp())

    def make_memory(self, data_dir: Path) -> Memory:
        return create_backend("rag", m3_config(self.model_dir, scoring="hybrid", top_k=3), data_dir=data_dir)


class TestRagWindowHNSW(MemoryConformance):
    def make_memory(self, data_dir: Path) -> Memory:
        config = {
            "embedder": "hashing",
            "chunking": "window",
            "window_tokens": 16,
            "window_overlap": 4,
            "index": "hnsw",
            "top_k": 3,
        }
        return create_backend("rag", config, data_dir=data_dir)


def test_vectors_are_unit_length_in_the_index(tiny_dir: Path) -> None:
    memory = create_backend("rag", m3_config(tiny_dir))
    memory.ingest(facts_session(), user_id="u")
    index = memory._stores["u"].index
    vectors = index.reconstruct_n(0, index.ntotal)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# ----------------------------------------------------------------------------- end to end
def test_memlab_run_with_bge_m3_end_to_end(tiny_dir: Path, tmp_path: Path) -> None:
    """`memlab run --backends rag --rag.embedder bge-m3 --rag.model <dir>` with the tiny model."""
    from memlab.cli import main
    from memlab.readers.base import Reader
    from memlab.registry import readers
    from memlab.results import RunSummary, read_predictions
    from memlab.types import Answer, Question, Retrieval

    seen: list[Retrieval] = []

    class RecordingReader(Reader):  # answers (a) and keeps what the memory handed over
        name = "test_recording"
        description = "records retrievals"

        def answer(self, question: Question, retrieval: Retrieval) -> Answer:
            seen.append(retrieval)
            return Answer(choice=0, scores=[1.0, 0.0, 0.0, 0.0])

    readers.register("test_recording", RecordingReader)
    try:
        code = main(
            [
                "run",
                "--dataset",
                "synthetic",
                "--backends",
                "rag",
                "--reader",
                "test_recording",
                "--rag.embedder",
                "bge-m3",
                "--rag.model",
                str(tiny_dir),
                "--rag.scoring",
                "hybrid",
                "--rag.top-k",
                "4",
                "--out",
                str(tmp_path / "run"),
                "--max-questions",
                "3",
                "--no-controls",
                "--no-plots",
                "--no-progress",
            ]
        )
    finally:
        from memlab.embedders import set_default_cache_dir

        readers.unregister("test_recording")
        set_default_cache_dir(None)  # the runner set it for its jobs
    assert code == 0
    summary = RunSummary.load(tmp_path / "run")
    row = summary.row("rag")
    assert row.questions > 0 and row.errors == 0
    assert summary.config["backends"][0]["config"]["embedder"] == "bge-m3"
    predictions = read_predictions(tmp_path / "run")
    assert predictions and all(p.retrieved_messages for p in predictions)
    assert seen and all(1 <= len(r.items) <= 4 and r.context for r in seen)
    assert all("scores" in item.metadata for r in seen for item in r.items)


def test_a_store_built_with_another_dimension_is_refused(tmp_path: Path) -> None:
    first = create_backend("rag", {"embedder": "hashing", "model": "128"}, data_dir=tmp_path)
    first.ingest(Session(id="s", messages=[Message(role="user", content="hello there")]), user_id="u")
    signature = first._signature()
    first.close()
    # Same signature, other width: the stored dimension must be checked on its own.
    storage = rag_store.FileChunkStorage(tmp_path / "user-u", signature, 64)
    with pytest.raises(DataFormatError, match="dimensions"):
        storage.load()


# ----------------------------------------------------------------------------- one writer per directory
HOLDER = """
import sys, time
from memlab.registry import create_backend
memory = create_backend("rag", {"embedder": "hashing"}, data_dir=sys.argv[1])
print("open", flush=True)
time.sleep(60)
"""

OPENER = """
import sys
from memlab.errors import DirectoryInUseError
from memlab.registry import create_backend
try:
    create_backend("rag", {"embedder": "hashing"}, data_dir=sys.argv[1])
except DirectoryInUseError as exc:
    print("refused:", exc)
    sys.exit(3)
print("opened")
"""


def test_a_second_process_on_the_data_dir_is_refused(tmp_path: Path) -> None:
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        second = subprocess.run(
            [sys.executable, "-c", OPENER, str(tmp_path)], capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 3, second.stdout + second.stderr
        assert (
            "in use" in second.stdout and "memlab rag backend" in second.stdout and f"pid {holder.pid}" in second.stdout
        )
    finally:
        holder.kill()
        holder.wait()
    # The holder died without closing (SIGKILL): its lock does not block the next process.
    after = subprocess.run([sys.executable, "-c", OPENER, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert after.returncode == 0 and "opened" in after.stdout, after.stderr


def test_the_lock_is_held_until_close_in_one_process_too(tmp_path: Path) -> None:
    from memlab.errors import DirectoryInUseError

    first = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    with pytest.raises(DirectoryInUseError, match="in use"):
        create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    first.close()
    create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path).close()


# ----------------------------------------------------------------------------- listing, deletion, export
SECRET = "My social security number is SECRET-778899."


def _bytes_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_delete_removes_every_byte_of_the_text(tmp_path: Path) -> None:
    memory = create_backend("rag", {"embedder": "hashing", "lexical": "bm25"}, data_dir=tmp_path)
    memory.ingest(facts_session("s1"), user_id="u")
    memory.ingest(session("s2", ("user", SECRET), ("assistant", "Noted.")), user_id="u")
    for i in range(20):  # enough later ingests that the secret sits in a compacted snapshot too
        memory.ingest(session("s3", ("user", f"Small talk {i}.")), user_id="u")
    assert b"SECRET-778899" in _bytes_under(tmp_path)
    (secret,) = [i for i in memory.list_memories(user_id="u") if "SECRET" in i.text]
    assert secret.id == "s2#0" and secret.source == {"session_id": "s2", "turn_index": 0, "role": "user"}
    assert "SECRET" in memory.retrieve("social security number", user_id="u").context
    memory.delete(secret.id, user_id="u")
    assert b"SECRET-778899" not in _bytes_under(tmp_path)
    assert "SECRET" not in memory.retrieve("social security number SECRET-778899", user_id="u", k=50).context
    assert all("SECRET" not in i.text for i in memory.list_memories(user_id="u"))
    assert "SECRET" not in str(memory.export("u"))
    # Later ingests continue the session's numbering; a restart still has everything else.
    assert memory.ingest(session("s2", ("user", "Next.")), user_id="u").first_turn == 2
    memory.close()
    reopened = create_backend("rag", {"embedder": "hashing", "lexical": "bm25"}, data_dir=tmp_path)
    texts = [i.text for i in reopened.list_memories(user_id="u")]
    assert len(texts) == len(FACTS) + 1 + 20 + 1 and "Noted." in texts and all("SECRET" not in t for t in texts)
    reopened.close()


def test_unknown_and_foreign_ids_are_not_found(tmp_path: Path) -> None:
    from memlab.errors import NotFoundError

    memory = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    memory.ingest(session("s1", ("user", "Alice's cat is called Pixel.")), user_id="alice")
    memory.ingest(session("s9", ("user", "Bob keeps bees.")), user_id="bob")
    with pytest.raises(NotFoundError):
        memory.delete("s1#7", user_id="alice")
    with pytest.raises(NotFoundError):
        memory.delete("s9#0", user_id="alice")  # bob's item
    with pytest.raises(NotFoundError):
        memory.delete("s1#0", user_id="carol")  # a user with no store
    assert [i.text for i in memory.list_memories(user_id="bob")] == ["Bob keeps bees."]
    memory.close()


def test_reset_leaves_no_trace_of_the_user(tmp_path: Path) -> None:
    memory = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)
    memory.ingest(session("s1", ("user", SECRET)), user_id="u")
    memory.ingest(session("s1", ("user", "Bob keeps bees.")), user_id="v")
    memory.reset("u")
    data = _bytes_under(tmp_path)
    assert b"SECRET-778899" not in data and b"Bob keeps bees." in data
    assert memory.list_memories(user_id="u") == [] and memory.retrieve("security", user_id="u").is_empty
    memory.close()


def test_export_returns_every_chunk_with_its_source() -> None:
    memory = create_backend("rag", {"embedder": "hashing"})
    memory.ingest(CONVERSATION, user_id="u")
    document = memory.export("u")
    assert document["backend"] == "rag" and document["user_id"] == "u"
    assert [i["text"] for i in document["items"]] == [m.content for m in CONVERSATION.messages[1:4]]
    assert [i["source"]["turn_index"] for i in document["items"]] == [1, 2, 3]
    assert document["sessions"] == {"s9": 5}
    import json

    json.dumps(document)  # one JSON-serialisable document


def test_rag_declares_list_and_delete() -> None:
    assert {Capability.LIST, Capability.DELETE, Capability.PERSIST} <= RagMemory.capabilities


# ----------------------------------------------------------------------------- dates
def _dated_session() -> Session:
    from datetime import datetime

    may, june = datetime(2023, 5, 8, 13, 56), datetime(2023, 6, 1)
    return Session(
        id="d1",
        messages=[
            Message(role="user", content="I went hiking yesterday.", timestamp=may),
            Message(role="assistant", content="Where did you go?", timestamp=may),
            Message(role="user", content="To the Alps, and I am going again next week.", timestamp=june),
        ],
    )


def test_turn_chunks_keep_timestamps_and_render_date_headers() -> None:
    memory = create_backend("rag", {"embedder": "hashing"})
    memory.ingest(_dated_session(), user_id="u")
    result = memory.retrieve("hiking in the Alps", user_id="u", k=3)
    assert result.items[0].source["timestamp"] == "2023-05-08T13:56:00"
    assert result.context.splitlines() == [
        "DATE: 8 May 2023, 13:56",
        "user: I went hiking yesterday.",
        "assistant: Where did you go?",
        "DATE: 1 June 2023",
        "user: To the Alps, and I am going again next week.",
    ]


@pytest.mark.parametrize("chunking", ["session", "window"])
def test_transcript_chunks_carry_their_date(chunking: str) -> None:
    config = RagConfig(embedder="hashing", chunking=chunking, window_tokens=12, window_overlap=2)
    chunks = chunk_session(_dated_session(), 0, config)
    assert all(c.text.startswith("DATE: ") for c in chunks)
    assert chunks[0].text.startswith("DATE: 8 May 2023, 13:56\nuser: I went")
    assert "DATE: 1 June 2023" in "\n".join(c.text for c in chunks)
    assert chunks[0].source["turns"][0]["timestamp"] == "2023-05-08T13:56:00"
    memory = create_backend(
        "rag", {"embedder": "hashing", "chunking": chunking, "window_tokens": 12, "window_overlap": 2}
    )
    memory.ingest(_dated_session(), user_id="u")
    assert memory.retrieve("hiking", user_id="u").context.startswith("DATE: ")


# ----------------------------------------------------------------------------- the one embedder factory
def test_the_embedder_comes_from_get_embedder_with_the_run_cache(tmp_path: Path) -> None:
    from memlab.embedders import CachedEmbedder, get_embedder

    memory = RagMemory({"embedder": "minilm"}, cache_dir=tmp_path / "cache")
    assert memory.cache_dir == tmp_path / "cache"
    assert isinstance(memory.embedder, CachedEmbedder)
    assert memory.embedder is get_embedder("minilm", None, cache_dir=tmp_path / "cache")
    memory.ingest(session("s1", ("user", "A sentence to cache.")), user_id="u")
    assert (tmp_path / "cache" / "embeddings.sqlite").exists()


def test_non_default_model_settings_never_bypass_the_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    import memlab_plugins.rag.backend as rag_module

    calls: list[tuple[Any, ...]] = []

    def fake_get_embedder(kind: str, model: str | None = None, *, cache_dir: Any = None, **options: Any) -> Any:
        calls.append((kind, model, cache_dir, options))
        from memlab.embedders import HashingEmbedder

        return HashingEmbedder()

    monkeypatch.setattr(rag_module, "get_embedder", fake_get_embedder)
    RagMemory({"embedder": "minilm", "batch_size": 8, "device": "cuda:0"})
    RagMemory({"embedder": "minilm"}, cache_dir="/tmp/c")
    assert calls == [
        ("minilm", None, None, {"batch_size": 8, "device": "cuda:0"}),
        ("minilm", None, Path("/tmp/c"), {}),
    ]


# ----------------------------------------------------------------------------- hybrid retrieval
LEXICAL_FACTS = [
    "We talked about the weather for a while.",
    "My favourite band is Zorblatt Quartet, I saw them live.",
    "Work was busy this week.",
    "I bought new running shoes.",
    "The Zorblatt concert tickets cost a lot.",
    "Dinner was pasta again.",
]


def test_bm25_finds_rare_words_and_fuses_with_dense() -> None:
    memory = create_backend("rag", {"embedder": "hashing", "lexical": "bm25", "fusion": "rrf", "lexical_weight": 1})
    memory.ingest(session("s1", *[("user", f) for f in LEXICAL_FACTS]), user_id="u")
    result = memory.retrieve("Which band is Zorblatt?", user_id="u", k=2)
    assert {i.source["turn_index"] for i in result.items} == {1, 4}
    best = max(result.items, key=lambda i: i.score)
    assert best.source["turn_index"] == 1 and set(best.metadata["scores"]) == {"dense", "bm25"}
    # RRF: each ranking contributes weight / (60 + rank).
    assert best.score == pytest.approx(2 / 61)


def test_bm25_follows_deletions_and_ingests() -> None:
    memory = create_backend("rag", {"embedder": "hashing", "lexical": "bm25", "top_k": 1})
    memory.ingest(session("s1", *[("user", f) for f in LEXICAL_FACTS]), user_id="u")
    assert memory.retrieve("Zorblatt band", user_id="u").items[0].id == "s1#1"
    memory.delete("s1#1", user_id="u")
    assert memory.retrieve("Zorblatt band", user_id="u").items[0].id == "s1#4"
    memory.ingest(session("s2", ("user", "Another Zorblatt band album came out.")), user_id="u")
    assert memory.retrieve("Zorblatt band album", user_id="u").items[0].id == "s2#0"


def test_neighbour_expansion_adds_the_turns_around_a_hit() -> None:
    memory = create_backend("rag", {"embedder": "hashing", "lexical": "bm25", "neighbours": 1, "candidates": 1})
    memory.ingest(session("s1", *[("user", f) for f in LEXICAL_FACTS]), user_id="u")
    memory.ingest(session("s2", ("user", "Unrelated second session.")), user_id="u")
    turns = [i.source.get("turn_index") for i in memory.retrieve("running shoes", user_id="u", k=3).items]
    assert turns == [2, 3, 4]


def test_the_weighted_fusion_and_its_settings_validate() -> None:
    memory = create_backend(
        "rag", {"embedder": "hashing", "lexical": "bm25", "fusion": "weighted", "lexical_weight": 0.5}
    )
    memory.ingest(session("s1", *[("user", f) for f in LEXICAL_FACTS]), user_id="u")
    top = memory.retrieve("Zorblatt Quartet band", user_id="u", k=1).items[0]
    assert top.source["turn_index"] == 1 and top.score == pytest.approx(1.5)  # best on both: 1 + 0.5
    with pytest.raises(MemlabError):
        RagMemory.parse_config({"lexical": "tfidf"})


def test_bm25_fuses_with_bge_m3_dense_and_reranked_rankings(tiny_dir: Path) -> None:
    for scoring in ("dense", "hybrid"):
        memory = create_backend("rag", m3_config(tiny_dir, scoring=scoring, lexical="bm25"))
        memory.ingest(session("s1", *[("user", f) for f in LEXICAL_FACTS]), user_id="u")
        best = max(memory.retrieve("Zorblatt Quartet band", user_id="u", k=3).items, key=lambda i: i.score)
        assert best.source["turn_index"] == 1 and {"dense", "bm25"} <= set(best.metadata["scores"])


def test_the_default_is_the_tuned_hybrid() -> None:
    config = RagConfig()
    assert (config.lexical, config.fusion, config.lexical_weight, config.neighbours) == ("bm25", "weighted", 1.25, 0)


def test_memory_depends_only_on_turns_exactly_for_turn_chunking() -> None:
    assert RagMemory.memory_depends_only_on_turns(RagConfig())
    assert RagMemory.memory_depends_only_on_turns(RagConfig(lexical="bm25", neighbours=2))
    assert not RagMemory.memory_depends_only_on_turns(RagConfig(chunking="session"))
    assert not RagMemory.memory_depends_only_on_turns(RagConfig(chunking="window"))
    # And it is true: the same turns ingested in parts or at once give the same retrieval.
    config = {"embedder": "hashing", "lexical": "bm25", "neighbours": 1}
    whole, parts = create_backend("rag", config), create_backend("rag", config)
    whole.ingest(session("s1", *[("user", f) for f in LEXICAL_FACTS]), user_id="u")
    for f in LEXICAL_FACTS:
        parts.ingest(session("s1", ("user", f)), user_id="u")
    for query in ("Zorblatt", "running shoes", "pasta dinner", "weather"):
        a, b = whole.retrieve(query, user_id="u", k=3), parts.retrieve(query, user_id="u", k=3)
        assert [(i.id, i.score) for i in a.items] == [(i.id, i.score) for i in b.items]


def test_concurrent_ingests_of_one_session_get_unique_turns(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    memory = create_backend("rag", {"embedder": "hashing"}, data_dir=tmp_path)

    def add(i: int) -> int:
        return memory.ingest(session("chat", ("user", f"Parallel message {i}.")), user_id="u").first_turn

    with ThreadPoolExecutor(8) as pool:
        firsts = list(pool.map(add, range(40)))
    assert sorted(firsts) == list(range(40))
    items = memory.list_memories(user_id="u")
    assert sorted(i.source["turn_index"] for i in items) == list(range(40))
    memory.close()
