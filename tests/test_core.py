"""Types, the Memory base class contract, tokens and the embedding cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from question_helpers import choice_question, open_question

from memlab.embedders import CachedEmbedder, HashingEmbedder
from memlab.errors import MemlabError
from memlab.registry import create_backend
from memlab.tokens import count_tokens, truncate_front
from memlab.types import Message, Question, Retrieval, Session


def test_question_validation() -> None:
    base = dict(id="q", type="t", text="?", context_id="c", end_index=3)
    q = Question(options=["(a) x", "(b) y", "(c) z", "(d) w"], answer=2, **base)
    assert q.answer_letter == "c" and q.is_multiple_choice
    with pytest.raises(ValidationError, match="4 options"):
        Question(options=["a", "b", "c"], answer=0, **base)
    with pytest.raises(ValidationError, match="answer_text"):
        Question(**base)
    assert not Question(answer_text="Paris", **base).is_multiple_choice


def test_message_and_session_validation() -> None:
    with pytest.raises(ValidationError):
        Message(role="robot", content="hi")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="empty"):
        Session(id=" ", messages=[])


def test_ingest_accepts_dicts_and_reports_turns() -> None:
    memory = create_backend("full_context")
    report = memory.ingest({"id": "s1", "messages": [{"role": "user", "content": "hello there"}]}, user_id="u")
    assert (report.session_id, report.first_turn, report.messages) == ("s1", 0, 1)
    assert (
        memory.ingest(Session(id="s1", messages=[Message(role="assistant", content="hi")]), user_id="u").first_turn == 1
    )
    result = memory.retrieve("x", user_id="u")
    assert result.tokens == count_tokens(result.context) and result.seconds >= 0


def test_bad_config_and_k_are_rejected() -> None:
    with pytest.raises(MemlabError, match="top_kk"):
        create_backend("rag", {"embedder": "hashing", "top_kk": 3})
    memory = create_backend("rag", {"embedder": "hashing"})
    with pytest.raises(ValueError, match="k must be"):
        memory.retrieve("x", user_id="u", k=0)


def test_failed_ingest_keeps_earlier_data() -> None:
    memory = create_backend("full_context")
    memory.ingest(Session(id="s1", messages=[Message(role="user", content="keep me")]), user_id="u")
    with pytest.raises(ValidationError):
        memory.ingest({"id": "s2", "messages": [{"role": "user"}]}, user_id="u")
    assert "keep me" in memory.retrieve("x", user_id="u").context


def test_tokens() -> None:
    assert count_tokens("Hello, world!") == 4
    assert truncate_front("one two three four", 2) == "three four"
    assert truncate_front("short", 10) == "short"


def test_full_context_budget_keeps_newest() -> None:
    memory = create_backend("full_context", {"max_tokens": 12})
    turns = [Message(role="user", content=f"message number {i}") for i in range(10)]
    memory.ingest(Session(id="s", messages=turns), user_id="u")
    result = memory.retrieve("q", user_id="u")
    assert result.items[-1].text == "message number 9"
    assert "message number 0" not in result.context
    assert result.tokens <= 12


def test_hashing_embedder_is_lexical() -> None:
    emb = HashingEmbedder()
    vectors = emb.embed(["I love pizza", "pizza is what I love", "the stock market fell"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    with pytest.raises(TypeError):
        emb.embed("a single string")  # type: ignore[arg-type]


def test_embedding_cache_hits_disk(tmp_path: Path) -> None:
    first = CachedEmbedder(HashingEmbedder(), tmp_path)
    a = first.embed(["alpha", "beta", "alpha"])
    assert first.texts_embedded == 2 and first.hits == 0  # the repeated text is embedded once
    first.close()
    second = CachedEmbedder(HashingEmbedder(), tmp_path)
    b = second.embed(["beta", "alpha", "gamma"])
    assert second.hits == 2 and second.texts_embedded == 1
    assert np.allclose(a[0], b[1]) and np.allclose(a[1], b[0])
    assert second.inner.texts_embedded == 1


def test_retrieval_empty() -> None:
    assert Retrieval().is_empty


def test_dot_only_user_ids_are_rejected() -> None:
    # User ids become path components (transcripts, per-user stores): "." and ".." would escape them.
    from memlab.memory import validate_user_id

    for bad in (".", "..", "..."):
        with pytest.raises(ValueError, match="dots only"):
            validate_user_id(bad)
    for good in ("a.b", ".hidden", "user..1", "x@y.z"):
        assert validate_user_id(good) == good
    with pytest.raises(ValueError):
        create_backend("full_context").retrieve("x", user_id="..")


def test_longest_option_control_refuses_open_questions_clearly() -> None:
    from memlab.readers.controls import LongestOptionReader

    reader = LongestOptionReader()
    answer = reader.answer(open_question("when?", "May"), Retrieval())
    assert answer.choice is None and answer.error is not None and "multiple-choice" in answer.error
    choice = choice_question(options=["(a) x", "(b) longest", "(c) y", "(d) z"], answer=1)
    assert reader.answer(choice, Retrieval()).choice == 1


def test_sentence_transformer_cache_names_tell_same_named_folders_apart(tmp_path: Path) -> None:
    from memlab.embedders.sentence_transformer import cache_name

    (tmp_path / "a" / "model").mkdir(parents=True)
    (tmp_path / "b" / "model").mkdir(parents=True)
    first = cache_name(str(tmp_path / "a" / "model"), str(tmp_path / "a" / "model"))
    second = cache_name(str(tmp_path / "b" / "model"), str(tmp_path / "b" / "model"))
    assert first != second and first.startswith("st:model-")
    assert cache_name("minilm", "/any/site-packages/path") == "st:all-MiniLM-L6-v2"
    assert cache_name("BAAI/bge-small-en", "BAAI/bge-small-en") == "st:BAAI/bge-small-en"
