"""Work known before the replay and bulk ingest: Reader.prepare, Memory.prepare, Memory.ingest_many,
the embedding cache's RAM layer, and rag's batch ingest storing exactly what one ingest per session stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from run_helpers import DATASET, run_config

from memlab.datasets import load_dataset
from memlab.embedders import CachedEmbedder, HashingEmbedder, embed_ahead
from memlab.memory import Memory
from memlab.readers.base import Reader
from memlab.readers.embedding import EmbeddingReader
from memlab.registry import backends, create_backend, readers
from memlab.results import read_predictions
from memlab.run.driver import run
from memlab.run.spec import BackendSpec, ReaderSpec
from memlab.testing import session
from memlab.types import Answer, MemoryItem, Message, Question, Retrieval, Session
from memlab_plugins.full_context import FullContextMemory


class BatchMemory(Memory):
    """Records every prepare and every batch; retrieve says how many turns it holds."""

    name = "batch_recording"
    description = "test backend that records prepare and ingest batches"
    log: ClassVar[list[tuple[Any, ...]]] = []

    def __init__(self, config=None, *, data_dir=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir)
        self.turns = 0

    def prepare(self, queries):  # type: ignore[no-untyped-def]
        self.log.append(("prepare", list(queries)))

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        self._ingest_many([(session, first_turn)], user_id=user_id)

    def _ingest_many(self, parts: list[tuple[Session, int]], *, user_id: str) -> None:
        self.log.append(("batch", [(s.id, first, len(s.messages)) for s, first in parts]))
        self.turns += sum(len(s.messages) for s, _ in parts)

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        self.log.append(("retrieve", query, self.turns))
        return Retrieval()

    def _reset(self, user_id: str) -> None:
        pass


class PreparingReader(Reader):
    name = "preparing"
    description = "records prepare and answer calls"
    log: ClassVar[list[tuple[str, list[str]]]] = []

    def prepare(self, questions):  # type: ignore[no-untyped-def]
        self.log.append(("prepare", [q.id for q in questions]))

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        self.log.append(("answer", [question.id]))
        return Answer(choice=0, scores=[1, 0, 0, 0])


@pytest.fixture(autouse=True, scope="module")
def _register():
    backends.register("batch_recording", BatchMemory)
    readers.register("preparing", PreparingReader)
    yield
    backends.unregister("batch_recording")
    readers.unregister("preparing")


def test_runner_prepares_once_then_ingests_all_between_two_questions_in_one_batch(tmp_path: Path) -> None:
    BatchMemory.log.clear()
    PreparingReader.log.clear()
    dataset = load_dataset(DATASET)
    run(run_config(tmp_path / "run", BackendSpec(name="batch_recording"), ReaderSpec(name="preparing"), controls=False))
    contexts = sorted({q.context_id for q in dataset.questions})
    # Each job: one prepare with all its questions, before its first answer.
    prepares = [i for i, (kind, _) in enumerate(PreparingReader.log) if kind == "prepare"]
    assert len(prepares) == len(contexts)
    for context_id, at in zip(contexts, prepares):
        questions = [q.id for q in dataset.questions_for(context_id)]
        assert PreparingReader.log[at][1] == questions
        assert [ids[0] for _, ids in PreparingReader.log[at + 1 : at + 1 + len(questions)]] == questions
    queries = [entry[1] for entry in BatchMemory.log if entry[0] == "prepare"]
    assert queries == [[q.text for q in dataset.questions_for(c)] for c in contexts]
    # Between two questions: at most one batch, holding exactly the turns up to the next question.
    events = [e for e in BatchMemory.log if e[0] != "prepare"]
    for before, after in zip(events, events[1:]):
        assert not (before[0] == "batch" and after[0] == "batch")
    assert any(len(e[1]) > 1 for e in events if e[0] == "batch"), "some batch holds several sessions"
    held = [e[2] for e in events if e[0] == "retrieve"]
    assert held == [q.end_index for c in contexts for q in dataset.questions_for(c)]
    assert len(read_predictions(tmp_path / "run")) == len(dataset.questions)


def test_ingest_many_numbers_parts_of_one_session_in_one_batch() -> None:
    memory = BatchMemory()
    first = session("s1", ("user", "a"), ("assistant", "b"))
    reports = memory.ingest_many([first, session("s2", ("user", "c")), session("s1", ("user", "d"))], user_id="u")
    assert [(r.session_id, r.first_turn, r.messages) for r in reports] == [("s1", 0, 2), ("s2", 0, 1), ("s1", 2, 1)]
    assert memory.ingest(session("s1", ("user", "e")), user_id="u").first_turn == 3
    assert sum(r.seconds for r in reports) >= 0 and reports[0].seconds >= reports[1].seconds


def test_ingest_many_without_a_batch_hook_is_one_ingest_per_part(tmp_path: Path) -> None:
    memory = FullContextMemory(data_dir=tmp_path)
    reports = memory.ingest_many([session("s1", ("user", "a")), session("s1", ("user", "b"))], user_id="u")
    assert [r.first_turn for r in reports] == [0, 1]
    assert [i.id for i in memory.list_memories(user_id="u")] == ["s1#0", "s1#1"]

    class OwnStore(BatchMemory):  # overrides _ingest alone: the parent's batch path is not its own
        def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
            self.log.append(("single", session.id))

    BatchMemory.log.clear()
    OwnStore().ingest_many([session("x", ("user", "a")), session("y", ("user", "b"))], user_id="u")
    assert BatchMemory.log == [("single", "x"), ("single", "y")]


def _sessions() -> list[Session]:
    dated = [Message(role="user", content=f"I went hiking on day {i} with my dog") for i in range(3)]
    return [
        session("s1", ("system", "persona"), ("user", "I adopted a grey cat"), ("assistant", "Lovely!")),
        Session(id="s2", messages=dated),
        session("s1", ("user", "The cat is called Pixel"), ("assistant", "Nice name")),
        session("s3", ("user", "I keep bees on my roof in Lisbon")),
    ]


@pytest.mark.parametrize("chunking", ["turn", "session", "window"])
def test_rag_batch_stores_what_one_ingest_per_session_stores(tmp_path: Path, chunking: str) -> None:
    config = {"embedder": "hashing", "chunking": chunking, "window_tokens": 8, "window_overlap": 2}
    one_by_one = create_backend("rag", config, data_dir=tmp_path / "a")
    for part in _sessions():
        one_by_one.ingest(part, user_id="u")
    batched = create_backend("rag", config, data_dir=tmp_path / "b")
    calls = []
    inner = batched.embedder._embed
    batched.embedder._embed = lambda texts, query: calls.append(len(texts)) or inner(texts, query=query)  # type: ignore[method-assign]
    reports = batched.ingest_many(_sessions(), user_id="u")
    assert len(calls) == 1 and len(reports) == 4, "one model call for the whole batch"
    assert batched.export("u") == one_by_one.export("u")
    for query in ("cat name", "hiking dog", "bees"):
        a, b = one_by_one.retrieve(query, user_id="u"), batched.retrieve(query, user_id="u")
        assert [(i.id, i.score) for i in a.items] == [(i.id, i.score) for i in b.items] and a.context == b.context
    batched.close()
    reopened = create_backend("rag", config, data_dir=tmp_path / "b")  # one durable append, read back
    assert reopened.export("u") == one_by_one.export("u")
    assert reopened.ingest(session("s1", ("user", "more")), user_id="u").first_turn == 5
    reopened.close()
    one_by_one.close()


# --------------------------------------------------------------------------- embeddings ahead
def test_embedding_reader_prepares_questions_and_options_in_two_batches(tmp_path: Path) -> None:
    inner = HashingEmbedder()
    cached = CachedEmbedder(inner, tmp_path)
    reader = EmbeddingReader(embedder=cached)
    questions = load_dataset(DATASET).questions[:6]
    reader.prepare(questions)
    computed = inner.texts_embedded
    assert computed == len({q.text for q in questions}) + len({o[4:] for q in questions for o in q.options})
    get_many = cached._store.get_many
    cached._store.get_many = lambda keys: pytest.fail("answers must be served from RAM")  # type: ignore[method-assign]
    items = Retrieval(items=[MemoryItem(id="m", text="I love hiking", metadata={"timeline": ["likes", "dislikes"]})])
    for q in questions:
        reader.answer(q, Retrieval())
    assert inner.texts_embedded == computed, "answering embedded nothing new"
    cached._store.get_many = get_many  # type: ignore[method-assign]
    reader.answer(questions[0], items)
    assert inner.texts_embedded == computed + 1, "only the retrieved item is new"


def test_cache_keeps_recent_vectors_in_ram_within_its_bound(tmp_path: Path) -> None:
    cached = CachedEmbedder(HashingEmbedder(dim=16), tmp_path, memory_bytes=3 * 16 * 4)
    first = cached.embed(["a", "b", "c", "d"])
    assert list(cached._recent) == [cached._key(t, False) for t in "bcd"]  # "a" went first
    again = CachedEmbedder(HashingEmbedder(dim=16), tmp_path)
    assert np.array_equal(again.embed(["a", "b", "c", "d"]), first) and again.texts_embedded == 0


def test_embed_ahead_only_fills_a_cache(tmp_path: Path) -> None:
    plain = HashingEmbedder()
    embed_ahead(plain, ["x", "y"])
    assert plain.texts_embedded == 0, "nothing to keep the vectors in: nothing computed"
    cached = CachedEmbedder(HashingEmbedder(), tmp_path)
    embed_ahead(cached, ["x", "y", "x"], query=True)
    assert cached.inner.texts_embedded == 2
    cached.embed(["x"], query=True)
    assert cached.inner.texts_embedded == 2 and cached.hits == 1


def test_profile_retrieve_reads_the_store_once_per_change() -> None:
    memory = create_backend("profile", {"embedder": "hashing"})
    memory.ingest(session("s1", ("user", "I love hiking in the mountains"), ("user", "I hate jazz")), user_id="u")
    first = memory.retrieve("hiking", user_id="u")
    reads = []
    entries = memory.store.entries
    memory.store.entries = lambda *a, **k: reads.append(1) or entries(*a, **k)  # type: ignore[method-assign]
    second = memory.retrieve("hiking", user_id="u")
    assert (second.items, second.context) == (first.items, first.context)
    assert not reads, "unchanged store: the index in RAM serves"
    memory.ingest(session("s2", ("user", "I started to love jazz")), user_id="u")
    after = memory.retrieve("jazz", user_id="u")
    assert reads and "jazz" in after.context


def test_a_small_call_runs_between_the_batches_of_a_large_one() -> None:
    # One user's bulk ingest embeds in batches; another user's query waiting for the model goes next.
    import threading
    import time

    from memlab.embedders.sentence_transformer import ModelTurns

    turns = ModelTurns(yield_s=5.0)
    order: list[str] = []
    first_batch_running = threading.Event()
    release_first_batch = threading.Event()

    def large_call() -> None:
        for batch in range(3):
            with turns.turn(small=False):
                order.append(f"batch {batch}")
                if batch == 0:
                    first_batch_running.set()
                    release_first_batch.wait(5)

    def small_call() -> None:
        with turns.turn(small=True):
            order.append("query")

    large = threading.Thread(target=large_call)
    large.start()
    assert first_batch_running.wait(5)
    small = threading.Thread(target=small_call)
    small.start()
    time.sleep(0.2)  # the query is waiting for the model now
    release_first_batch.set()
    large.join(10)
    small.join(10)
    assert order == ["batch 0", "query", "batch 1", "batch 2"]


def test_a_large_call_waits_for_small_ones_at_most_its_yield_time() -> None:
    import time

    from memlab.embedders.sentence_transformer import ModelTurns

    turns = ModelTurns(yield_s=0.2)
    turns._small_waiting = 1  # a query that never takes its turn (as under a constant query load)
    start = time.monotonic()
    with turns.turn(small=False):
        waited = time.monotonic() - start
    assert 0.15 <= waited < 2.0


@pytest.mark.parametrize("pinned", [True, False])
def test_with_pinned_threads_a_query_runs_beside_a_large_calls_batch(
    monkeypatch: pytest.MonkeyPatch, pinned: bool
) -> None:
    """``memlab serve`` pins torch's thread count (pin_compute_threads): no call changes it, so another
    user's query runs on the idle core while a bulk ingest's batch is in the model; otherwise it waits
    for that batch (one forward pass at a time)."""
    import threading

    from memlab.embedders import sentence_transformer
    from memlab.embedders.sentence_transformer import SentenceTransformerEmbedder

    monkeypatch.setattr(sentence_transformer, "_threads_pinned", pinned)
    embedder = SentenceTransformerEmbedder(batch_size=8)
    alone = embedder.embed(["what is my pet called?"], query=True)
    in_batch, release = threading.Event(), threading.Event()
    forward = embedder.model.forward

    def held_forward(features: Any, *args: Any, **kwargs: Any) -> Any:
        if features["input_ids"].shape[0] == 8 and not release.is_set():  # the large call's batches
            in_batch.set()
            release.wait(10)
        return forward(features, *args, **kwargs)

    monkeypatch.setattr(embedder.model, "forward", held_forward)
    large = threading.Thread(target=lambda: embedder.embed([f"message number {i} about tea" for i in range(24)]))
    large.start()
    assert in_batch.wait(10)
    result: list[np.ndarray] = []
    query = threading.Thread(target=lambda: result.append(embedder.embed(["what is my pet called?"], query=True)))
    query.start()
    query.join(3)
    ran_beside = not query.is_alive()
    release.set()
    query.join(10)
    large.join(10)
    assert ran_beside is pinned
    # the same vector either way, up to float rounding: another thread count splits the sums differently
    np.testing.assert_allclose(result[0], alone, rtol=0, atol=1e-5)


def test_the_own_loop_gives_encodes_vectors() -> None:
    """``_forward`` runs encode()'s steps without its per-call device move: the same vectors, up to
    float32 rounding (1.5e-8 here with sentence-transformers 5)."""
    from memlab.embedders.sentence_transformer import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(batch_size=4)
    assert embedder._own_loop
    texts = [f"message {i}: " + "tea " * (i % 7) for i in range(11)]
    expected = embedder.model.encode(texts, batch_size=4, convert_to_numpy=True, show_progress_bar=False)
    assert np.allclose(embedder.embed(texts), np.asarray(expected, dtype=np.float32), rtol=0, atol=1e-6)
