"""The PersonaMem-v2-style synthetic data (``synthetic:style=v2``): the release's structure, forget
requests memlab.forget detects, and calibration (blind readers at 25 % +- 8 on every type)."""

from __future__ import annotations

from collections import Counter

import pytest
from test_synthetic_calibration import CHANCE, MIN_PER_TYPE, TOLERANCE, assert_near_chance, blind_accuracy

from memlab.datasets import load_dataset
from memlab.datasets.personamem_v2 import BREAKDOWN_FIELDS, PREF_TYPES
from memlab.datasets.synthetic.v2 import generate_v2
from memlab.forget import find_forget_requests
from memlab.readers.controls import LongestOptionReader
from memlab.readers.embedding import EmbeddingReader
from memlab.tokens import count_tokens
from memlab.types import Question, Session

V2_TYPES = set(PREF_TYPES)
SEEDS = (11, 22, 33, 44)  # 4 x 40 personas x 8 questions = 1,280 questions, >= 160 per type


@pytest.fixture(scope="module")
def sweep() -> list[Question]:
    return [q for seed in SEEDS for q in generate_v2(personas=40, seed=seed, tokens=600).questions]


def test_structure_is_the_releases():
    dataset = load_dataset("synthetic:style=v2,personas=3,seed=5,tokens=4000")
    assert dataset.summary()["questions"] == 24 and len(dataset.histories) == 3
    assert load_dataset("synthetic:style=v2,personas=3,seed=5,tokens=4000").questions == dataset.questions
    for history in dataset.histories.values():
        assert history.session_starts == [0] and history.messages[0].role == "system"
        assert [m.role for m in history.messages[1:]].count("system") == 0
        assert abs(sum(count_tokens(m.content) for m in history.messages) - 4000) < 400
    for question in dataset.questions:
        history = dataset.histories[question.context_id]
        assert question.end_index == len(history.messages)
        assert set(BREAKDOWN_FIELDS) <= set(question.metadata["fields"])
        (evidence,) = question.evidence
        value = question.metadata["value"]
        assert value in history.messages[int(evidence[1:])].content and value in question.options[question.answer]
        assert history.messages[int(evidence[1:])].role == "user"
        requests = find_forget_requests(Session(id="s", messages=history.messages))
        forgets = [q for q in dataset.questions if q.context_id == question.context_id and q.type == "ask_to_forget"]
        assert len(requests) == len(forgets), "every forget request is found, and no near-miss turn is one"
        if question.type == "ask_to_forget":
            forgotten = question.metadata["forgotten"]
            assert any(forgotten in (r.subject or "") for r in requests)
            assert question.metadata["fields"]["updated"] == "True"
            assert question.metadata["preference"].startswith("Do not remember")
    assert {q.type for q in dataset.questions} == V2_TYPES


def test_forget_requests_and_near_misses_are_varied():
    from memlab.datasets.synthetic.v2 import FORGET_REQUESTS, NEAR_MISSES
    from memlab.forget import detect

    dataset = load_dataset("synthetic:style=v2,personas=40,seed=3,tokens=600")
    turns = [m.content for h in dataset.histories.values() for m in h.messages if m.role == "user"]
    requests = [t for t in turns if detect(t) is not None]
    assert len({r.split()[0] for r in requests}) >= 4, "requests are phrased in several ways"
    assert len(requests) == sum(q.type == "ask_to_forget" for q in dataset.questions)
    for template in FORGET_REQUESTS:  # every phrasing of the bank is a request, none of the near-misses is
        assert detect(template.format(s="I read crime novels before bed", x="crime novels")) is not None, template
    for template in NEAR_MISSES:
        assert detect(template.format(s="I read crime novels before bed", x="crime novels")) is None, template


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="unknown synthetic style"):
        load_dataset("synthetic:style=v3")
    with pytest.raises(ValueError, match="tokens=10 is out of range"):
        load_dataset("synthetic:style=v2,tokens=10")


def test_sweep_covers_every_type(sweep: list[Question]):
    per_type = Counter(q.type for q in sweep)
    assert set(per_type) == V2_TYPES and min(per_type.values()) >= 5 * MIN_PER_TYPE
    assert Counter(q.metadata["who"] for q in sweep)["others"] >= 2 * MIN_PER_TYPE


def test_longest_option_stays_at_chance(sweep: list[Question]):
    assert_near_chance("longest_option", blind_accuracy(LongestOptionReader(), sweep))


@pytest.mark.slow
def test_blind_embedding_reader_stays_at_chance(sweep: list[Question]):
    # MiniLM embeds every question's options: half the sweep (640 questions, >= 80 per type) keeps it short
    half = [q for q in sweep if q.context_id.startswith(("synthetic-v2-11-", "synthetic-v2-22-"))]
    assert len(half) == 640
    assert_near_chance("none + embedding", blind_accuracy(EmbeddingReader(), half))


def test_blind_hashing_embedding_reader_stays_at_chance(sweep: list[Question]):
    scores = blind_accuracy(EmbeddingReader({"embedder": "hashing"}), sweep)
    assert_near_chance("none + embedding(hashing)", scores)
    assert abs(scores["overall"][0] - CHANCE) <= TOLERANCE


def _ask_to_forget_accuracy(backend: str, forget: bool, dataset, tmp_path) -> float:  # type: ignore[no-untyped-def]
    from memlab.registry import create_backend

    reader = EmbeddingReader({"embedder": "hashing"})
    hits = []
    for context_id, history in dataset.histories.items():
        config = {"forget_requests": forget, **({"embedder": "hashing"} if backend == "rag" else {})}
        memory = create_backend(backend, config, data_dir=tmp_path / f"{backend}-{forget}-{context_id}")
        try:
            memory.ingest(next(history.slices(0, len(history.messages)))[0], user_id="u")
            for question in dataset.questions_for(context_id):
                if question.type == "ask_to_forget":
                    retrieval = memory.retrieve(question.text, user_id="u")
                    hits.append(reader.answer(question, retrieval).choice == question.answer)
        finally:
            memory.close()
    assert len(hits) >= 30
    return sum(hits) / len(hits)


@pytest.mark.parametrize("backend", ["full_context", "rag"])
def test_honouring_forget_requests_changes_ask_to_forget_accuracy(backend: str, tmp_path):
    """A memory that keeps the forgotten preference is drawn to it; one that honours the request is not."""
    dataset = generate_v2(personas=30, seed=7, tokens=800)
    kept = _ask_to_forget_accuracy(backend, False, dataset, tmp_path)
    forgotten = _ask_to_forget_accuracy(backend, True, dataset, tmp_path)
    assert kept < CHANCE - TOLERANCE  # below chance: the kept preference is chosen
    assert forgotten >= kept + 0.2
