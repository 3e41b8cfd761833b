"""The profile backend: conformance, operation semantics, versions, API, persistence and crash safety."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memlab.errors import MemlabError, NotFoundError
from memlab.memory import Capability, Memory
from memlab.registry import create_backend
from memlab.testing import MemoryConformance, session
from memlab_plugins.profile.backend import ProfileMemory
from memlab_plugins.profile.extract_rules import RuleExtractor, aspect_of, stance_of
from memlab_plugins.profile.models import Operation, OpType, Stance
from memlab_plugins.profile.store import SCHEMA_VERSION, ProfileStore, ProfileStoreError

HASHING = {"embedder": "hashing", "aspect_threshold": 0.5}


def make(data_dir: Path | None = None, **extra) -> ProfileMemory:  # type: ignore[no-untyped-def]
    return create_backend("profile", {**HASHING, **extra}, data_dir=data_dir)


class TestProfileConformance(MemoryConformance):
    def make_memory(self, data_dir: Path) -> Memory:
        return make(data_dir, top_k=3)


# ---------------------------------------------------------------------- the rules extractor
def test_rules_find_statements_with_stance_and_change() -> None:
    ex = RuleExtractor(max_per_turn=1)
    tried = ex.turn_statements("Patient: I tried geocaching, but I found it overly distracting.", 3)[0]
    assert (tried.aspect, tried.stance, tried.change, tried.turn_index) == ("geocaching", Stance.DISLIKES, "none", 3)
    assert tried.reason and "distracting" in tried.reason
    stop = ex.turn_statements("User: I decided to step back from drumming circles. They felt repetitive.", 0)[0]
    assert stop.aspect == "drumming circles" and stop.change == "stop" and stop.stance is Stance.DISLIKES
    assert stop.reason == "They felt repetitive."
    start = ex.turn_statements("I've also revisited mindfulness exercises, integrating them with music.", 0)[0]
    assert start.aspect == "mindfulness exercises" and start.change == "start" and start.stance is Stance.LIKES
    fact = ex.turn_statements("I adopted a grey cat named Pixel last spring.", 0)[0]
    assert fact.stance is Stance.FACT and "Pixel" in fact.aspect
    assert ex.turn_statements("What are AI ontologies?", 0) == []


def test_stance_cues_handle_negation_and_curly_apostrophes() -> None:
    assert stance_of("I really enjoyed the pottery class") is Stance.LIKES
    assert stance_of("I didn't enjoy the pottery class at all") is Stance.DISLIKES
    assert stance_of("I didn’t enjoy the pottery class at all") is Stance.DISLIKES
    assert (
        aspect_of("Attending that community music therapy workshop was truly incredible.")
        == "community music therapy workshop"
    )
    assert aspect_of("My aunt keeps bees on the roof.") == "aunt"
    assert (
        aspect_of("I used to collect souvenirs during my travels, but they felt empty.")
        == "collect souvenirs during my travels"
    )


# ---------------------------------------------------------------------- operation semantics
def _ops(mem: ProfileMemory, user: str = "u") -> list[tuple[OpType, str | None]]:
    return [(o.op, o.entry_id) for o in mem.operations(user)]


def test_flip_updates_and_closes_old_version() -> None:
    mem = make()
    mem.ingest(session("s1", ("user", "I love pottery classes, they are so relaxing.")), user_id="u")
    mem.ingest(
        session("s2", ("user", "Honestly, I hate pottery classes now because the clay hurts my hands.")), user_id="u"
    )
    ops = _ops(mem)
    assert [o for o, _ in ops] == [OpType.ADD, OpType.UPDATE]
    entry_id = ops[0][1]
    versions = mem.history(entry_id, user_id="u")
    assert [v["stance"] for v in versions] == ["likes", "dislikes"]
    old, new = versions
    assert old["valid_to"] == 1 and new["valid_to"] is None and new["valid_from"] == 1
    assert "clay hurts my hands" in new["reason"]
    assert [e.stance for e in mem.get_profile("u")] == [Stance.DISLIKES]
    retrieval = mem.retrieve("pottery", user_id="u")
    text = retrieval.context
    assert "dislikes" in text and "earlier: likes" in text and "clay hurts my hands" in text
    entry = next(i for i in retrieval.items if i.id == entry_id)
    assert entry.metadata["timeline"] == ["likes", "dislikes"]  # oldest first, for readers of change


def test_repeat_is_noop() -> None:
    mem = make()
    mem.ingest(session("s1", ("user", "I love pottery classes, they are so relaxing.")), user_id="u")
    mem.ingest(session("s2", ("user", "I love pottery classes, they are wonderful.")), user_id="u")
    assert [o for o, _ in _ops(mem)] == [OpType.ADD, OpType.NOOP]
    assert len(mem.get_profile("u", include_closed=True)) == 1


def test_no_longer_closes_entry_and_revisit_reopens_it() -> None:
    mem = make()
    mem.ingest(session("s1", ("user", "I go running every morning and I love running.")), user_id="u")
    mem.ingest(session("s2", ("user", "I no longer do running because my knee is injured.")), user_id="u")
    ops = _ops(mem)
    assert [o for o, _ in ops] == [OpType.ADD, OpType.DELETE] and ops[0][1] == ops[1][1]
    assert mem.get_profile("u") == []
    closed = mem.get_profile("u", include_closed=True)[0]
    assert closed.valid_to == 1 and "knee is injured" in (closed.closed_reason or "")
    result = mem.retrieve("Do I still run?", user_id="u")
    assert "no longer" in result.context and "knee" in result.context
    # evidence of both statements is traceable to turns
    assert {("s1", 0), ("s2", 0)} <= {(t["session_id"], t["turn_index"]) for t in result.items[0].source["turns"]}
    mem.ingest(session("s3", ("user", "I started running again and I enjoy it.")), user_id="u")
    assert [o for o, _ in _ops(mem)][-1] is OpType.ADD and _ops(mem)[-1][1] == ops[0][1]
    assert [v["version"] for v in mem.history(ops[0][1], user_id="u")] == [1, 2]


def test_retrieval_items_carry_sources_and_respect_k() -> None:
    mem = make()
    mem.ingest(
        session("s1", ("assistant", "Hi!"), ("user", "I love jazz concerts."), ("user", "I adopted a dog named Rex.")),
        user_id="u",
    )
    result = mem.retrieve("jazz concerts", user_id="u", k=1)
    assert len(result.items) == 1
    item = result.items[0]
    assert item.source["session_id"] == "s1" and item.source["turn_index"] == 1
    assert item.metadata["stance"] == "likes" and "jazz" in result.context


def test_supporting_turns_are_added() -> None:
    mem = make(supporting_turns=1)
    mem.ingest(
        session("s1", ("user", "I love jazz concerts."), ("user", "Weather was grey and wet all week long.")),
        user_id="u",
    )
    result = mem.retrieve("grey wet weather all week", user_id="u", k=2)
    kinds = [i.metadata["kind"] for i in result.items]
    assert "turn" in kinds and "Supporting turns" in result.context


def test_session_time_is_recorded_on_versions() -> None:
    from memlab.types import Message, Session

    mem = make()
    first = Session(id="s1", messages=[Message(role="user", content="I love tea.")], metadata={"date": "2024-03-01"})
    mem.ingest(first, user_id="u")
    (entry,) = mem.get_profile("u")
    assert entry.valid_from_time is not None and entry.valid_from_time.date().isoformat() == "2024-03-01"
    assert "1 March 2024" in mem.retrieve("tea", user_id="u").context


# ---------------------------------------------------------------------- API
def test_update_delete_history_export_import(tmp_path: Path) -> None:
    mem = make()
    assert {
        Capability.LIST,
        Capability.UPDATE,
        Capability.DELETE,
        Capability.HISTORY,
        Capability.PERSIST,
    } <= mem.capabilities
    mem.ingest(session("s1", ("user", "I love sushi, it is my favourite food.")), user_id="u")
    item, turn = mem.list_memories(user_id="u")
    assert item.metadata["kind"] == "profile_entry" and (turn.id, turn.metadata["kind"]) == ("s1#0", "turn")
    updated = mem.update(item.id, "I dislike sushi since the food poisoning.", user_id="u")
    assert updated.id == item.id and updated.metadata["stance"] == "dislikes" and updated.metadata["version"] == 2
    assert len(mem.history(item.id + ".v1", user_id="u")) == 2
    with pytest.raises(MemlabError):
        mem.update("p_missing", "x", user_id="u")
    with pytest.raises(MemlabError):
        mem.history(item.id, user_id="someone_else")
    exported = mem.export_profile("u")
    path = tmp_path / "u.json"
    path.write_text(json.dumps(exported))
    mem.delete(item.id, user_id="u")
    assert [i.id for i in mem.list_memories(user_id="u")] == ["s1#0"]
    with pytest.raises(NotFoundError):
        mem.delete(item.id, user_id="u")  # already deleted
    other = make()
    assert other.import_profile("v", path) == 2
    assert [e.stance for e in other.get_profile("v")] == [Stance.DISLIKES]
    assert "sushi" in other.retrieve("sushi", user_id="v").context
    assert [o.op for o in other.operations("v")] == [OpType.ADD, OpType.UPDATE]


def test_import_copies_a_profile_to_another_user_of_the_same_store(tmp_path: Path) -> None:
    with make(tmp_path) as mem:
        mem.ingest(session("s1", ("user", "I love sushi, it is my favourite food.")), user_id="a")
        mem.ingest(session("s2", ("user", "I hate sushi now, I got sick.")), user_id="a")
        exported = mem.export_profile("a")
        assert mem.import_profile("b", exported) == 2
        a_ids = {e.id for e in mem.get_profile("a", include_closed=True)}
        b_ids = {e.id for e in mem.get_profile("b", include_closed=True)}
        assert len(b_ids) == 1 and not a_ids & b_ids, "entry ids stay unique across users"
        assert {o.entry_id for o in mem.operations("b")} == b_ids
        assert [e.stance for e in mem.get_profile("b", include_closed=True)] == [Stance.LIKES, Stance.DISLIKES]
        (b_id,) = b_ids
        mem.delete(b_id, user_id="b")  # changing the copy leaves the original alone
        assert [e.stance for e in mem.get_profile("a")] == [Stance.DISLIKES]
        assert mem.import_profile("a", exported) == 2  # re-importing one's own export keeps the ids
        assert {e.id for e in mem.get_profile("a", include_closed=True)} == a_ids


def test_add_cannot_take_another_users_entry_id() -> None:
    mem = make()
    mem.ingest(session("s1", ("user", "I love sushi.")), user_id="a")
    item = mem.list_memories(user_id="a")[0]
    taken = Operation(op=OpType.ADD, entry_id=item.id, aspect="tea", value="likes tea", stance=Stance.LIKES)
    with pytest.raises(ProfileStoreError, match="already in use"):
        mem.apply([taken], user_id="b")
    assert mem.get_profile("b") == [] and [e.aspect for e in mem.get_profile("a")] == ["sushi"]


def test_entry_ids_with_a_dot_v_are_found() -> None:
    mem = make()
    op = Operation(
        op=OpType.ADD, entry_id="my.vinyl", aspect="vinyl", value="collects vinyl records", stance=Stance.LIKES
    )
    mem.apply([op], user_id="u")
    assert len(mem.history("my.vinyl", user_id="u")) == 1
    assert len(mem.history("my.vinyl.v1", user_id="u")) == 1
    assert [o.op for o in mem.operations("u", "my.vinyl.v1")] == [OpType.ADD]


def test_invalid_batch_is_not_half_applied() -> None:
    mem = make()
    mem.ingest(session("s1", ("user", "I love sushi.")), user_id="u")
    good = Operation(op=OpType.ADD, aspect="tea", value="likes green tea", stance=Stance.LIKES)
    bad = Operation(op=OpType.UPDATE, entry_id="p_nope", value="x")
    with pytest.raises(ProfileStoreError):
        mem.apply([good, bad], user_id="u")
    assert [e.aspect for e in mem.get_profile("u")] == ["sushi"]
    with pytest.raises(ValueError):
        Operation(op=OpType.ADD, aspect="tea")


# ---------------------------------------------------------------------- storage
def test_persists_versions_and_turn_counts(tmp_path: Path) -> None:
    with make(tmp_path) as mem:
        mem.ingest(session("s1", ("user", "I love pottery classes."), ("assistant", "Nice.")), user_id="u")
        mem.ingest(session("s2", ("user", "I hate pottery classes now, it got boring.")), user_id="u")
    assert (tmp_path / "profile.sqlite").exists()
    with make(tmp_path) as again:
        assert [v.stance for v in again.get_profile("u", include_closed=True)] == [Stance.LIKES, Stance.DISLIKES]
        assert again.ingest(session("s1", ("user", "More.")), user_id="u").first_turn == 2
        mode = again.store.db.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_migrates_a_version_1_store(tmp_path: Path) -> None:
    from memlab_plugins.profile.schema import _SCHEMA_V1

    path = tmp_path / "profile.sqlite"
    db = sqlite3.connect(path)
    db.executescript(_SCHEMA_V1)
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    db.execute(
        "INSERT INTO entries (entry_id, version, user_id, aspect, value, stance, evidence, valid_from, op, created_at)"
        " VALUES ('p_old', 1, 'u', 'sushi', 'I love sushi.', 'likes', '[]', 0, 'ADD', '2024-01-01T00:00:00')"
    )
    db.commit()
    db.close()
    mem = make(tmp_path)
    assert mem.store.schema_version == SCHEMA_VERSION == 3
    assert "sushi" in mem.retrieve("sushi", user_id="u").context  # vectors computed for the migrated row
    mem.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(ProfileStoreError, match="newer"):
        ProfileStore(path)


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from memlab.registry import create_backend
    from memlab.testing import session
    from memlab_plugins.profile import store as store_mod

    mem = create_backend("profile", {"embedder": "hashing", "aspect_threshold": 0.5}, data_dir=sys.argv[1])
    mem.ingest(session("s1", ("user", "I love pottery classes."), ("user", "I adopted a cat named Pixel.")), user_id="u")
    real = store_mod.ProfileStore._apply
    calls = []
    def dying_apply(self, *args, **kwargs):
        calls.append(1)
        result = real(self, *args, **kwargs)
        if len(calls) == 2:  # session 2 is half written: die without commit or cleanup
            os._exit(17)
        return result
    store_mod.ProfileStore._apply = dying_apply
    mem.ingest(session("s2", ("user", "I hate pottery classes now."), ("user", "I love jazz."), ("user", "I started yoga.")), user_id="u")
    """
)


def test_crash_between_sessions_loses_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 17, proc.stderr
    with make(tmp_path) as mem:
        profile = mem.get_profile("u", include_closed=True)
        assert sorted(e.aspect for e in profile) == ["cat named Pixel", "pottery classes"]
        assert all(e.current for e in profile), "session 2 must be absent, not half applied"
        assert [o.session_id for o in mem.operations("u")] == ["s1", "s1"]
        report = mem.ingest(session("s2", ("user", "I hate pottery classes now.")), user_id="u")
        assert report.first_turn == 0, "the crashed session was not recorded, so it is replayed from its start"
        assert [v.stance for v in mem.get_profile("u", include_closed=True) if v.aspect == "pottery classes"] == [
            Stance.LIKES,
            Stance.DISLIKES,
        ]


# ---------------------------------------------------------------------- change statements (issue 5 follow-up)
from memlab.client import MemoryClient  # noqa: E402
from memlab_plugins.profile.change_cues import split_reason  # noqa: E402


@pytest.mark.parametrize(
    ("text", "aspect", "stance", "change"),
    [
        ("No more pizza for me.", "pizza", Stance.DISLIKES, "away"),
        ("I'm off sugar these days.", "sugar", Stance.DISLIKES, "away"),
        ("I can't stand jazz anymore.", "jazz", Stance.DISLIKES, "away"),
        ("I'm done with social media.", "social media", Stance.DISLIKES, "away"),
        ("Honestly, reality TV isn't for me anymore.", "reality TV", Stance.DISLIKES, "away"),
        ("I'm no longer a fan of horror movies.", "horror movies", Stance.DISLIKES, "away"),
        ("I'm not a fan of horror movies.", "horror movies", Stance.DISLIKES, "none"),
        ("I don't eat red meat anymore.", "red meat", Stance.DISLIKES, "away"),
        ("I quit poker last year.", "poker", Stance.DISLIKES, "stop"),
        ("I've stopped running.", "running", Stance.DISLIKES, "stop"),
        ("I've grown to love country music.", "country music", Stance.LIKES, "start"),
        ("I'm into bouldering now.", "bouldering", Stance.LIKES, "start"),
        ("I've warmed up to opera.", "opera", Stance.LIKES, "start"),
        ("I've gone gluten-free.", "gluten-free", Stance.FACT, "start"),
        ("I went vegan last year.", "vegan", Stance.FACT, "start"),
        ("I'm vegetarian now.", "vegetarian", Stance.FACT, "start"),
    ],
)
def test_change_cue_families(text: str, aspect: str, stance: Stance, change: str) -> None:
    (found,) = RuleExtractor().turn_statements(text, 0)
    assert (found.aspect, found.stance, found.change) == (aspect, stance, change)


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ("I switched from coffee to tea.", [("coffee", Stance.DISLIKES, "stop"), ("tea", Stance.LIKES, "start")]),
        (
            "I replaced my morning coffee with green tea.",
            [("morning coffee", Stance.DISLIKES, "stop"), ("green tea", Stance.LIKES, "start")],
        ),
        ("These days I prefer tea over coffee.", [("tea", Stance.LIKES, "start"), ("coffee", Stance.DISLIKES, "away")]),
        ("I prefer cats to dogs.", [("cats", Stance.LIKES, "none"), ("dogs", Stance.DISLIKES, "none")]),
        (
            "I've gone gluten-free, so no more pizza for me.",
            [("gluten-free", Stance.FACT, "start"), ("pizza", Stance.DISLIKES, "away")],
        ),
    ],
)
def test_two_sided_change_statements(text: str, pairs: list[tuple[str, Stance, str]]) -> None:
    found = RuleExtractor().turn_statements(text, 0)
    assert [(s.aspect, s.stance, s.change) for s in found] == pairs
    assert len({s.sentence for s in found}) == 1  # one sentence: the resolver keeps them apart


REASON = "my blood test came back high"


@pytest.mark.parametrize(
    "text",
    [
        f"I'm off sugar because {REASON}.",
        f"Because {REASON}, I'm off sugar.",
        f"I'm off sugar since {REASON}.",
        f"Since {REASON}, I'm off sugar.",
        f"{REASON[0].upper() + REASON[1:]}, so I'm off sugar.",
        f"I'm off sugar as {REASON}.",
        f"As {REASON}, I'm off sugar.",
        f"I'm off sugar after {REASON}.",
        f"After {REASON}, I'm off sugar.",
        f"I'm off sugar ever since {REASON}.",
        f"Ever since {REASON}, I'm off sugar.",
        "I'm off sugar due to my blood test coming back high.",
        "Due to my blood test coming back high, I'm off sugar.",
    ],
)
def test_reason_before_or_after_the_change(text: str) -> None:
    (found,) = RuleExtractor().turn_statements(text, 0)
    assert found.aspect == "sugar" and found.change == "away"
    assert found.reason and found.reason.lower().startswith("my blood test") and "sugar" not in found.reason


def test_change_without_a_reason_clause_takes_the_next_sentence() -> None:
    ex = RuleExtractor()
    (pizza,) = ex.turn_statements("No more pizza for me. It gives me heartburn. Anyway, how are you?", 0)
    assert pizza.reason == "It gives me heartburn."
    (label,) = ex.turn_statements("I went vegan last year. It gives me heartburn.", 0)
    assert label.reason is None  # a label is not a change of view that needs a why


def test_reason_splitting_leaves_non_reasons_alone() -> None:
    # A "so" clause after the change is a consequence, not the reason.
    assert split_reason("I stopped running, so I have more free time now.", has_statement=lambda c: "running" in c) == (
        "I stopped running, so I have more free time now.",
        None,
    )
    assert split_reason("After a while, I quit poker.")[1] is None  # says when, not why
    assert split_reason("I tried it as part of a workshop.")[1] is None  # "as part of" is no reason
    ex = RuleExtractor()
    (poker,) = ex.turn_statements("I kept losing money, so I quit poker.", 0)
    assert (poker.aspect, poker.change, poker.reason) == ("poker", "stop", "I kept losing money")
    (tea,) = ex.turn_statements("I love tea, so I drink it daily.", 0)
    assert tea.reason is None
    # Hedged changes are not changes.
    assert ex.turn_statements("I'm thinking about going vegan.", 0) == []
    assert ex.turn_statements("I might switch from coffee to tea.", 0) == []
    assert [s.change for s in ex.turn_statements("I'm considering quitting my book club.", 0)] != ["stop"]
    # "prefer sticking to X" is not "prefer A to B"; "Italian" is not the pronoun "it".
    assert all(
        s.aspect != "family recipes" or s.stance is not Stance.DISLIKES
        for s in ex.turn_statements("I much prefer sticking to family recipes.", 0)
    )
    assert aspect_of("I love Italian food.") == "Italian food"


def _chain(mem: ProfileMemory, aspect: str, user: str = "u") -> list:  # type: ignore[type-arg]
    return [v for v in mem.get_profile(user, include_closed=True) if v.aspect == aspect]


@pytest.mark.parametrize(
    ("first", "change", "new_stance", "reason"),
    [
        ("I love pizza.", "I've gone gluten-free, so no more pizza for me.", Stance.DISLIKES, "I've gone gluten-free"),
        ("I love pizza.", "Since my stomach surgery, I'm off pizza.", Stance.DISLIKES, "my stomach surgery"),
        (
            "I love pizza.",
            "I can't stand pizza anymore because it makes me sleepy.",
            Stance.DISLIKES,
            "it makes me sleepy",
        ),
        ("I love pizza.", "I'm done with pizza after that food poisoning.", Stance.DISLIKES, "that food poisoning"),
        (
            "I love pizza.",
            "Pizza isn't for me anymore, as my cholesterol is high.",
            Stance.DISLIKES,
            "my cholesterol is high",
        ),
        (
            "I love pizza.",
            "My doctor was worried, so I'm no longer a fan of pizza.",
            Stance.DISLIKES,
            "My doctor was worried",
        ),
        (
            "I can't stand opera.",
            "Ever since my trip to Vienna, I've grown to love opera.",
            Stance.LIKES,
            "my trip to Vienna",
        ),
        (
            "I really don't enjoy opera.",
            "I'm into opera now due to my new partner's influence.",
            Stance.LIKES,
            "my new partner's influence",
        ),
    ],
)
def test_change_updates_and_closes_the_old_version(first: str, change: str, new_stance: Stance, reason: str) -> None:
    mem = make()
    mem.ingest(session("s1", ("user", first)), user_id="u")
    mem.ingest(session("s2", ("user", change)), user_id="u")
    aspect = mem.get_profile("u", include_closed=True)[0].aspect
    old, new = _chain(mem, aspect)
    assert old.valid_to == 1 and old.closed_reason == reason
    assert new.current and new.stance is new_stance and new.reason == reason and new.op is OpType.UPDATE
    assert reason in mem.retrieve(aspect, user_id="u").context
    # Saying it again changes nothing.
    mem.ingest(session("s3", ("user", change)), user_id="u")
    assert len(_chain(mem, aspect)) == 2
    assert [o.op for o in mem.operations("u") if o.entry_id == old.id][-1] is OpType.NOOP


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("I quit running because my knee is injured.", "my knee is injured"),
        ("My knee is injured, so I've stopped running.", "My knee is injured"),
        ("Due to a knee injury, I gave up running.", "a knee injury"),
    ],
)
def test_ceasing_an_activity_deletes_it_with_the_reason(change: str, reason: str) -> None:
    mem = make()
    mem.ingest(session("s1", ("user", "I love running.")), user_id="u")
    mem.ingest(session("s2", ("user", change)), user_id="u")
    assert mem.get_profile("u") == []
    (closed,) = mem.get_profile("u", include_closed=True)
    assert closed.valid_to == 1 and closed.closed_reason == reason
    assert [o.op for o in mem.operations("u")] == [OpType.ADD, OpType.DELETE]


def test_new_aspects_from_change_statements_are_added() -> None:
    mem = make()
    mem.ingest(session("s1", ("user", "I'm into bouldering now."), ("user", "No more soda for me.")), user_id="u")
    assert [o.op for o in mem.operations("u")] == [OpType.ADD, OpType.ADD]
    assert {(e.aspect, e.stance) for e in mem.get_profile("u")} == {
        ("bouldering", Stance.LIKES),
        ("soda", Stance.DISLIKES),
    }


def test_switch_closes_the_old_side_and_keeps_the_sides_apart() -> None:
    # A threshold of -1 makes every entry a candidate for every statement: only the one-sentence
    # rule keeps "tea" from reopening the "coffee" entry the same sentence just closed.
    mem = make(aspect_threshold=-1.0)
    mem.ingest(session("s1", ("user", "I love coffee.")), user_id="u")
    mem.ingest(session("s2", ("user", "I switched from coffee to tea because coffee kept me awake.")), user_id="u")
    ops = [(o.op, o.entry_id) for o in mem.operations("u")]
    assert [o for o, _ in ops] == [OpType.ADD, OpType.DELETE, OpType.ADD] and ops[1][1] == ops[0][1] != ops[2][1]
    (tea,) = mem.get_profile("u")
    assert (tea.aspect, tea.stance, tea.reason) == ("tea", Stance.LIKES, "coffee kept me awake")
    (coffee,) = _chain(mem, "coffee")
    assert not coffee.current and coffee.closed_reason == "coffee kept me awake"


def test_closest_statement_of_a_sentence_resolves_first() -> None:
    mem = make(aspect_threshold=-1.0)
    mem.ingest(session("s1", ("user", "I can't stand tea.")), user_id="u")
    mem.ingest(session("s2", ("user", "I switched from coffee to tea.")), user_id="u")
    (tea_v1, tea_v2) = _chain(mem, "tea")
    assert tea_v1.stance is Stance.DISLIKES and tea_v2.stance is Stance.LIKES
    (coffee,) = _chain(mem, "coffee")
    assert coffee.stance is Stance.DISLIKES and coffee.op is OpType.ADD


def test_mission_example_through_memory_client(tmp_path: Path) -> None:
    """The README example, with the default config (the packaged MiniLM)."""
    client = MemoryClient("profile", data_dir=tmp_path / "x")
    client.remember("alice", [("user", "I love pizza.")], session_id="s1")
    client.remember("alice", [("user", "I've gone gluten-free, so no more pizza for me.")], session_id="s2")
    texts = [i.text for i in client.memories("alice")]
    assert any(
        t.startswith("pizza: dislikes") and "changed from likes because: I've gone gluten-free" in t for t in texts
    )
    assert any(t.startswith("gluten-free: fact") for t in texts)
    mem = client.memory
    assert isinstance(mem, ProfileMemory)
    ops = mem.operations("alice")
    update = next(o for o in ops if o.op is OpType.UPDATE)
    assert update.reason == "I've gone gluten-free" and update.session_id == "s2"
    old, new = mem.history(update.entry_id, user_id="alice")
    assert (old["stance"], old["valid_to"], old["closed_reason"]) == ("likes", 1, "I've gone gluten-free")
    assert (new["stance"], new["valid_to"]) == ("dislikes", None)
    # MiniLM puts "tea" and "coffee" above the aspect threshold: the two sides must still stay apart.
    client.remember("bob", [("user", "I love coffee.")], session_id="s1")
    client.remember("bob", [("user", "I switched from coffee to tea.")], session_id="s2")
    assert [(e.aspect, e.stance) for e in mem.get_profile("bob")] == [("tea", Stance.LIKES)]
    client.close()
