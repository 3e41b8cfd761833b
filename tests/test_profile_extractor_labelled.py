"""The LLM-free extractor's value tracking: issue examples, and precision/recall on a held-out labelled set."""

from __future__ import annotations

from pathlib import Path

from memlab.registry import create_backend
from memlab.testing import session
from memlab_plugins.profile.extract_rules import sentences
from memlab_plugins.profile.labelled import predicted_ops, score

LABELLED = Path(__file__).parent / "data" / "profile_value_ops.jsonl"


def test_labelled_set_precision_and_recall() -> None:
    result = score(LABELLED)
    detail = f"misses: {result.misses}\nextras: {result.extras}"
    assert result.precision >= 0.85, detail
    assert result.recall >= 0.85, detail


def test_labelled_set_has_at_least_150_statements() -> None:
    import json

    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert sum(len(turns) for row in rows for turns in row["sessions"]) >= 150
    assert any(not row["ops"] for row in rows), "distractors (no attribute operation) are part of the set"


def test_issue_examples() -> None:
    assert predicted_ops([["My favourite number is 0."], ["My favourite number is 4."]]) == [
        ("ADD", "favourite number", "0"),
        ("UPDATE", "favourite number", "4"),
    ]
    assert predicted_ops([["I live in Paris."], ["I moved to Berlin."]]) == [
        ("ADD", "lives in", "Paris"),
        ("UPDATE", "lives in", "Berlin"),
    ]
    assert predicted_ops([["Call me Dee."]]) == [("ADD", "name", "Dee")]
    assert predicted_ops([["My doctor is Dr. House."]]) == [("ADD", "doctor", "Dr. House")]
    assert sentences("My doctor is Dr. House. He is great.") == ["My doctor is Dr. House.", "He is great."]


def test_quit_and_now_closes_the_old_job_with_the_reason() -> None:
    mem = create_backend("profile", {"embedder": "hashing"})
    mem.ingest(session("s1", ("user", "I quit my nurse job, I'm a software engineer now.")), user_id="u")
    (job,) = mem.get_profile("u")
    assert (job.aspect, job.value, job.kind) == ("job", "software engineer", "attribute")
    old, new = mem.get_profile("u", include_closed=True)
    assert (old.value, old.closed_reason) == ("nurse", "I quit my nurse job")
    assert new.reason == "I quit my nurse job"
    context = mem.retrieve("what is the user's job", user_id="u").context
    assert "job: software engineer" in context and "earlier: nurse" in context


def test_latest_value_is_current_and_old_one_closed() -> None:
    mem = create_backend("profile", {"embedder": "hashing"})
    mem.ingest(session("s1", ("user", "I live in Paris.")), user_id="u")
    mem.ingest(session("s2", ("user", "I moved to Berlin because of my new job.")), user_id="u")
    assert [(e.aspect, e.value) for e in mem.get_profile("u") if e.kind == "attribute"] == [("lives in", "Berlin")]
    paris = next(e for e in mem.get_profile("u", include_closed=True) if e.value == "Paris")
    assert paris.valid_to == 1 and paris.closed_reason == "my new job"
    item = next(
        i for i in mem.retrieve("where does the user live", user_id="u").items if i.metadata.get("aspect") == "lives in"
    )
    assert item.text.startswith("lives in: Berlin") and "changed from Paris because: my new job" in item.text


def test_hedges_questions_and_other_people_change_nothing() -> None:
    for text in ("I might move to Lisbon.", "Where do you live?", "My sister lives in Rome.", "I'm a big fan of jazz."):
        assert predicted_ops([[text]]) == [], text
