"""Turns with a forget request's shape that the rules cannot read a subject in (``memlab.forget_shape``):
what counts as the shape and what takes it back, then, in a chatbot's memory, that only the learned
reader decides what such a turn removes, and that the reader drops what the rules' matcher took beside
the fact a request names. Measured on the labelled parts in ``tests/test_forget_labelled.py``; the
wordings here are mine, none from the labelled set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memlab import forget_reader as reader_module
from memlab.client import MemoryClient
from memlab.forget_detector import find_forget_requests, kept
from memlab.forget_reader import TURN_READS
from memlab.forget_shape import has_request_shape
from memlab.types import Message, Session

SHAPES = [
    "nuke the gambling thing pls",
    "the salary thing - delete",
    "Gone, please.",
    "Everything about my landlord, get rid of it.",
    "I'd rather my address wasn't stored.",
    "Leave my sister out of your notes.",
    "I'm exercising my right to erasure regarding my phone number.",
    "Would you mind taking my bank details off your records?",
    "the tattoo stuff can go. not my finest hour",
    "I know you mean well, but please take him out of your memory.",
    "I'd appreciate it if you struck the bit about my arrest from your records.",
    "honestly I'd feel better if your notes didn't mention my court date",
    "dlete the vaping stuff",
    "dont be keeping that dui on me pls",
    "Everything about the bankruptcy, gone please.",
    "the bit about my tax bill, can that go?",
    "Anything about my landlord, I'd like it gone.",
]
NOT_SHAPES = [
    "Drop it. I said no, and I meant it.",
    "dont you go deleting my blood pressure reading, I need it for the doctor",
    "Never delete my pronouns.",
    "I was going to ask you to delete the divorce stuff, but leave it.",
    "I was about to tell you to delete my address, but nah, it's handy.",
    "Honestly I don't want you to forget my sister's birthday ever again.",
    "im not telling u to wipe anything, calm down",
    "I wasn't asking you to delete my weight, I was asking what it means.",
    "take out the last line of my toast, it's too cheesy",
    "delete the second verse of the poem, it drags",
    "My friend said I should make you forget my address, but I don't mind.",
    "Can you remove the paragraph about my divorce from the email to my lawyer?",
    "forget about the exam, let's plan the weekend",
    "Forget the lawsuit for a second, what should I cook tonight?",
    "Can we forget about work for one evening?",
    "I just want to forget this whole year.",
    "You can keep remembering my diet, just don't bring it up tonight.",
    "I deleted her number and blocked her. Done.",
    "How do I delete my Instagram account?",
    "The podcast is not just stories, it's a whole community.",
    "This tool has not only saved me money but time too.",
    "I can go on Friday if that helps.",
    "I want to help people who have gone through the same things as me.",
    "You did great taking part in the race!",
    "The old couch, can it go in the van with the boxes?",
    "I nearly told you to delete everything about my brother yesterday, but leave it.",
    "If my wife ever asked you to forget stuff about my ex, would you do it?",
    "My sister's cold is finally gone.",
]


@pytest.mark.parametrize("turn", SHAPES)
def test_a_request_the_rules_cannot_name_has_the_shape(turn: str) -> None:
    assert has_request_shape(turn)


@pytest.mark.parametrize("turn", NOT_SHAPES)
def test_talk_and_acts_taken_back_have_no_shape(turn: str) -> None:
    assert not has_request_shape(turn)
    assert find_forget_requests(Session(id="s", messages=[Message(role="user", content=turn)])) == []


def test_a_turn_the_rules_read_is_theirs_not_a_shape() -> None:
    (request,) = find_forget_requests(
        Session(id="s", messages=[Message(role="user", content="Please forget my weight.")])
    )
    assert request.subject == "my weight" and not request.shape_only
    (shape,) = find_forget_requests(Session(id="s", messages=[Message(role="user", content="bookies stuff, bin it")]))
    assert shape.shape_only and shape.subject is None


@pytest.mark.parametrize(
    ("turn", "keep"),
    [
        ("Forget my rent. The parking spot can stay.", "the parking spot"),
        ("Wipe the health stuff, the running stuff you can keep", "the running stuff"),
        ("Delete my salary. School stuff is fine to keep.", "school stuff"),
        ("Delete my salary. The rest is fine.", None),
    ],
)
def test_what_a_request_keeps_said_subject_first(turn: str, keep: str | None) -> None:
    assert kept(turn) == keep


class _Reader:
    """A reader with fixed scores per fact text (default 0), recording what it read."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.table = scores
        self.read: list[tuple[str, list[str]]] = []

    def scores(self, turn: str, texts: Sequence[str]) -> np.ndarray:
        self.read.append((turn, list(texts)))
        return np.array([self.table.get(text, 0.0) for text in texts], dtype=np.float32)


def _remember(tmp_path: Path, facts: list[str], turn: str) -> tuple[set[str], list[str]]:
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("u", [("user", fact) for fact in facts], session_id="a")
        report = client.remember("u", [("user", turn)], session_id="b")
        return {item.text for item in report.forgotten}, [item.text for item in client.memories("u")]


FACTS = [
    "I lost 3,000 pounds at the bookies last spring",
    "My sister Dana lives in Perth",
    "I work as a dental hygienist",
    "I'm training for a half marathon",
    "My cat is called Pixel",
]
MORE_FACTS = [
    "I drive a 2014 Corolla to work",
    "My partner Sam is a nurse",
    "I grow tomatoes on the balcony",
    "I'm allergic to penicillin",
    "I play five-a-side on Thursdays",
    "My dad lives in Swansea",
    "I'm learning Portuguese",
    "I do my shopping at Aldi",
]


def test_a_shape_deletes_what_the_reader_is_sure_of_among_the_items_nearest_the_turn(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reader = _Reader({FACTS[0]: 0.97, FACTS[1]: 0.3})
    monkeypatch.setattr(reader_module, "forget_reader", lambda: reader)
    turn = "bookies stuff, bin it"
    facts = FACTS + MORE_FACTS
    gone, left = _remember(tmp_path, facts, turn)
    assert gone == {FACTS[0], turn}
    assert sorted(left) == sorted(facts[1:])
    ((read_turn, read),) = reader.read
    assert read_turn == turn and len(read) == TURN_READS < len(facts) and FACTS[0] in read


def test_a_shape_the_reader_is_not_sure_of_deletes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    reader = _Reader({FACTS[0]: 0.85})
    monkeypatch.setattr(reader_module, "forget_reader", lambda: reader)
    gone, left = _remember(tmp_path, FACTS, "bookies stuff, bin it")
    assert gone == set() and len(left) == len(FACTS) + 1  # the turn itself is kept too


def test_the_real_reader_resolves_a_shape(tmp_path: Path) -> None:
    turn = "gambling losses - gone, please"
    assert has_request_shape(turn)
    gone, left = _remember(tmp_path, FACTS, turn)
    assert gone == {FACTS[0], turn}
    assert sorted(left) == sorted(FACTS[1:])


def test_the_reader_drops_a_second_item_the_matcher_took_that_it_rules_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ "Forget my medication": the matcher takes both medicines; a reader that all but rules one out
    (as for "forget the rhea kiss part" beside "Rhea is a friend from college") keeps it."""
    facts = ["I take sertraline every morning", "I take omeprazole for reflux", "My cat is called Pixel"]
    turn = "Please forget my medication."
    (request,) = find_forget_requests(Session(id="s", messages=[Message(role="user", content=turn)]))
    monkeypatch.setattr(reader_module, "forget_reader", lambda: _Reader({facts[0]: 1.0, facts[1]: 1.0}))
    both, _ = _remember(tmp_path / "both", facts, turn)
    assert both == {facts[0], facts[1], turn}  # the matcher took both, the reader ruled out neither
    monkeypatch.setattr(reader_module, "forget_reader", lambda: _Reader({facts[0]: 0.6, facts[1]: 0.02}))
    one, left = _remember(tmp_path / "one", facts, turn)
    assert one == {facts[0], turn}
    assert facts[1] in left


def test_the_reader_never_drops_an_item_that_says_all_the_request_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A chat turn that states the fact inside a question ("Keep in mind that my workouts are tennis
    matches") reads to the reader as no fact of the kind it was trained on; it still says every word
    the request names, so it goes with the rest."""
    facts = [
        "How can I keep fit during a busy week? Keep in mind that my workouts are tennis matches.",
        "My workouts are tennis matches",
        "My cat is called Pixel",
    ]
    turn = "Please forget that my workouts are tennis matches."
    monkeypatch.setattr(reader_module, "forget_reader", lambda: _Reader({facts[1]: 0.95}))
    gone, left = _remember(tmp_path, facts, turn)
    assert gone == {facts[0], facts[1], turn}
    assert left == [facts[2]]
