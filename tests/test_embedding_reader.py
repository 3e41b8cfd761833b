"""The LLM-free embedding reader and the longest-option control."""

from __future__ import annotations

from memlab.embedders import HashingEmbedder
from memlab.readers.controls import LongestOptionReader
from memlab.readers.embedding import EmbeddingReader
from memlab.types import MemoryItem, Question, Retrieval

QUESTION = Question(
    id="q1",
    type="recall_user_shared_facts",
    text="What should I cook for my dinner party?",
    options=[
        "(a) Try a gluten free risotto since you stopped eating wheat",
        "(b) Bake a big pizza with a thick wheat crust",
        "(c) Order sushi from the place downtown",
        "(d) Make whatever you like best",
    ],
    answer=0,
    context_id="c",
    end_index=5,
)


def items(*texts: str) -> Retrieval:
    its = [MemoryItem(id=str(i), text=t) for i, t in enumerate(texts)]
    return Retrieval(items=its, context="\n".join(texts))


def test_chooses_option_supported_by_memory() -> None:
    reader = EmbeddingReader(embedder=HashingEmbedder())
    memory = items("The weather was nice today.", "I stopped eating wheat, I am gluten free now.")
    answer = reader.answer(QUESTION, memory)
    assert answer.choice == 0 and len(answer.scores) == 4
    other = items("I love a thick wheat crust pizza, bake one for me.")
    assert reader.answer(QUESTION, other).choice == 1


def test_relevance_to_the_question_breaks_ties() -> None:
    # Both turns support an option equally well on their own; only one is about dinner.
    reader = EmbeddingReader({"relevance_weight": 1.0}, embedder=HashingEmbedder())
    memory = items("sushi downtown", "dinner party cook: thick wheat crust pizza")
    assert reader.answer(QUESTION, memory).choice == 1


def test_blind_fallback_uses_the_question() -> None:
    answer = EmbeddingReader(embedder=HashingEmbedder()).answer(QUESTION, Retrieval())
    assert answer.metadata["blind"] and answer.choice is not None


def test_context_only_retrieval_is_read_line_by_line() -> None:
    retrieval = Retrieval(context="user: hello\nuser: I stopped eating wheat, gluten free now")
    assert EmbeddingReader(embedder=HashingEmbedder()).answer(QUESTION, retrieval).choice == 0


def test_open_questions_get_an_extractive_answer() -> None:
    open_q = Question(
        id="q", type="t", text="Which city do I live in?", answer_text="Lisbon", context_id="c", end_index=0
    )
    reader = EmbeddingReader(embedder=HashingEmbedder())
    answer = reader.answer(open_q, items("I like tea.", "I live in the city of Lisbon."))
    assert answer.text == "I live in the city of Lisbon." and answer.error is None
    assert "No information" in reader.answer(open_q, Retrieval()).text


def test_describe_names_the_embedder_without_loading_it() -> None:
    reader = EmbeddingReader({"embedder": "minilm"})
    assert reader.describe() == "embedding[minilm]" and reader._embedder is None


def test_longest_option() -> None:
    assert LongestOptionReader().answer(QUESTION, Retrieval()).choice == 0


NEW_IDEA = Question(
    id="q2",
    type="anything",
    text="I'm in a rut with pizza. What's something new I could try?",
    options=[
        "(a) You could try grilling pizza on the barbecue next.",
        "(b) You could try making Neapolitan dough from scratch next.",
        "(c) You could try a deep-dish pizza night next.",
        "(d) You could try a white pizza with ricotta and figs next.",
    ],
    answer=3,
    context_id="c",
    end_index=5,
)


def test_a_request_for_something_new_picks_what_memory_does_not_hold() -> None:
    reader = EmbeddingReader(embedder=HashingEmbedder())
    memory = items(
        "I tried grilling pizza on the barbecue last weekend and loved it.",
        "I finally did making Neapolitan dough from scratch, which was great fun.",
        "Last week I went for a deep-dish pizza night; so good.",
    )
    answer = reader.answer(NEW_IDEA, memory)
    assert answer.metadata["novelty"] is True and answer.choice == 3
    # The same options asked without novelty wording go back to "best supported": a tried idea.
    plain = NEW_IDEA.model_copy(update={"text": "Which pizza evening did I enjoy?"})
    assert reader.answer(plain, memory).choice in (0, 1, 2)


def test_novelty_comes_from_the_wording_not_the_type_label() -> None:
    reader = EmbeddingReader(embedder=HashingEmbedder())
    for text in ("Any ideas I haven't tried yet?", "Got any fresh ideas?", "Suggest something new for the weekend."):
        assert reader.asks_for_novelty(QUESTION.model_copy(update={"text": text})), text
    labelled = QUESTION.model_copy(update={"type": "suggest_new_ideas", "text": "What should I cook tonight?"})
    assert not reader.asks_for_novelty(labelled)


def test_novelty_cues_are_configurable_and_validated() -> None:
    import pytest

    from memlab.errors import MemlabError

    reader = EmbeddingReader({"novelty_cues": []}, embedder=HashingEmbedder())
    assert not reader.asks_for_novelty(NEW_IDEA)
    with pytest.raises(MemlabError, match="novelty_cues"):
        EmbeddingReader({"novelty_cues": ["(unclosed"]}, embedder=HashingEmbedder())


def test_blind_reader_ignores_novelty() -> None:
    answer = EmbeddingReader(embedder=HashingEmbedder()).answer(NEW_IDEA, Retrieval())
    assert answer.metadata == {"blind": True}


# ----------------------------------------------------------------------------- questions about change
WORD_STANCES = {"likes": "likes", "dislikes": "dislikes", "neutral": "neutral"}
CHANGE = Question(
    id="q3",
    type="track_full_preference_evolution",
    text="How has my opinion of karaoke evolved?",
    # The same words in both orders: an embedding cannot tell them apart, only the order can.
    options=[
        "(a) Karaoke went from neutral to dislikes.",
        "(b) Karaoke went from dislikes to neutral.",
        "(c) Karaoke went from likes to neutral.",
        "(d) Karaoke went from dislikes to likes.",
    ],
    answer=1,
    context_id="c",
    end_index=5,
)


def karaoke(timeline: list[str] | None) -> Retrieval:
    metadata = {"timeline": timeline} if timeline is not None else {}
    entry = MemoryItem(id="p1", text="karaoke: neutral about (changed from dislikes)", metadata=metadata)
    return Retrieval(items=[entry, MemoryItem(id="t1", text="I sang at a party.", metadata={"timeline": []})])


def test_an_option_walking_the_remembered_timeline_wins_a_question_about_change() -> None:
    reader = EmbeddingReader({"stance_descriptions": WORD_STANCES}, embedder=HashingEmbedder())
    answer = reader.answer(CHANGE, karaoke(["dislikes", "dislikes", "neutral"]))  # a repeat is one step
    assert answer.choice == 1
    assert answer.metadata["timeline"] == ["dislikes", "neutral"]
    assert answer.metadata["option_stances"][:2] == [["neutral", "dislikes"], ["dislikes", "neutral"]]


def test_without_a_timeline_or_change_wording_the_reading_is_unchanged() -> None:
    reader = EmbeddingReader({"stance_descriptions": WORD_STANCES}, embedder=HashingEmbedder())
    without = reader.answer(CHANGE, karaoke(None))
    assert "timeline" not in without.metadata and without.scores[0] == without.scores[1]
    plain = CHANGE.model_copy(update={"text": "Tell me about karaoke."})
    assert not reader.asks_about_change(plain)
    assert "timeline" not in reader.answer(plain, karaoke(["dislikes", "neutral"])).metadata
    off = EmbeddingReader({"stance_descriptions": WORD_STANCES, "change_weight": 0.0}, embedder=HashingEmbedder())
    scores = off.answer(CHANGE, karaoke(["dislikes", "neutral"])).scores
    assert scores[0] == scores[1]


def test_change_wording_is_read_from_the_question_not_its_type_label() -> None:
    reader = EmbeddingReader(embedder=HashingEmbedder())
    for text in (
        "How would you describe the way my opinion of jazz has evolved?",
        "Remind me how my attitude to sushi has shifted since we started talking.",
        "How have my feelings about yoga changed over time?",
    ):
        assert reader.asks_about_change(CHANGE.model_copy(update={"text": text})), text
    assert not reader.asks_about_change(QUESTION.model_copy(update={"type": CHANGE.type}))


def test_minilm_reads_the_stances_an_option_walks_through() -> None:
    reader = EmbeddingReader()  # the packaged MiniLM, as runs use it
    assert reader.stances_in("Your take on karaoke went from outright dislike to indifference.") == [
        "dislikes",
        "neutral",
    ]
    assert reader.stances_in("Your take on karaoke went.") == []  # no stance, no step
