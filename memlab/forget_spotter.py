"""The learned spotter: whether a turn the rules read no request in still asks the assistant to forget.

People ask in more ways than rules can list: "Would you mind not keeping the line of credit balance?",
"Two things to forget: Tobi's JAMB score and Kemi's maths wahala", "tira da memoria a idade da julia".
The spotter reads a whole user turn and says how sure it is that the turn asks the assistant to
forget, delete or stop keeping something. It speaks only where the rules are silent, and three
things keep ordinary talk away from it:

- the turn must name an act on memory (:func:`names_a_memory_act`, a cheap pattern, or the same acts
  in other tongues and as voice dictation writes them: "pakidelete", "vergiss", "for get"): most chat
  never reaches the model;
- no sentence of the turn may take back an act it names, or ask to keep
  (:func:`memlab.forget_shape.taken_back_sentences`: "don't delete the stuff about marg", "I very
  nearly told you to wipe ...", "keep it"); a sentence that names no act takes nothing back ("I
  misread the email" beside "the rejection one, undo that");
- it must score at least ``THRESHOLD``.

A turn it spots is a request whose subject the rules cannot read: the learned reader
(:mod:`memlab.forget_reader`) decides what it refers to, and a turn it is not sure of deletes nothing.

It is the packaged MiniLM with a rank-8 LoRA (as the reader) and a one-logit head on [CLS], trained by
``benchmarks/train_forget_spotter.py`` on the turns of the labelled dev and read parts of
``tests/data/forget_requests/`` (dev .. dev12, heldout .. heldout39: requests against near-misses)
and on the user turns of the dev chat histories (never a request).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from pathlib import Path

from memlab.forget_reader import load_learned_minilm, loaded_once
from memlab.forget_shape import taken_back_sentences

WEIGHTS = Path(__file__).with_name("forget_spotter.safetensors")  # package data
MAX_LENGTH = 256  # a request often ends a long message
# Chosen on heldout40 .. heldout43 (never trained on) and checked on heldout44 .. heldout47: 0.5, 0.9
# and 0.98 let the reader honour the same requests there; 0.9 lets fewer near-misses through.
THRESHOLD = 0.9
RECENT = 1024  # turns whose scores are kept

# A turn that names an act on memory (forgetting, deleting, removing, not keeping or remembering,
# typos too): the only turns the spotter reads, and the chat turns the reader is trained most against.
_MEMORY_ACT = re.compile(
    r"\b(?:f[ro]{1,2}g[eo]?r?e?t\w*|forgo\w*|4get\w*|delet\w*|delte\w*|remvoe\w*|zap\w*|era[sc]\w*|remov\w*|scratch\w*|wip\w*|purg\w*|drop\w*|"
    r"clear\w*|un-?\s?(?:learn|remember|know|save|see)\w*|disregard\w*|discard\w*|ditch\w*|scrap\w*|strik\w*|"
    r"toss\w*|bin|lose|get rid|throw\w* (?:\w+ )?away|let (?:it|that|this) go|take (?:\w+ ){0,3}(?:out|back|off)|"
    r"pretend\w*|act like|me?m[eo]?r(?:y|ies|i[sz]e)|memroy|can (?:that|it|this) go|notes?|records?|scrub\w*|rub\w* \w+ out|yeet\w*|retain\w*|"
    r"expung\w*|cross\w* (?:\w+ )?off|let go|gone)\b"
    r"|\b(?:you|u)(?:'\w+)? (?:\S+ ){0,2}?(?:keep|stor|carr|retain|remember|know|have)"
    r"|(?:\bnot|n'?t|\bnever|\bno need to|\bstop|\bquit|\bno longer|\brather (?:you|u))\s+(?:\w+\s+){0,3}?"
    r"(?:keep|remember|rember|remeber|stor|sav|hold|hang|track|us(?:e|ing)\b|log|mention|bring)",
    re.IGNORECASE,
)
# "Don't forget to ..." asks to remember (what follows may still ask to delete: "don't forget to wipe X");
# "Forget about it, let's talk about my cat" moves on ("please forget it" is the rules' to read).
_REMINDER = re.compile(
    r"\b(?:do\s*n[o']?t|never|won'?t|not)\s+(?:ever\s+)?forget\b|"
    r"(?:^|[.!?,;:–—-]\s*|\b(?:oh|ah|eh|just|so|nah|ok|okay|well|but)\s+)forget\s+(?:about\s+)?(?:it|this|that)"
    r"\s*(?:[,.!;:?–—-]|$|\s(?:and|let'?s|anyway|never\s?mind|lol)\b)",
    re.IGNORECASE,
)
# "Don't delete anything about my diabetes", "Hypothetically, could you erase ...": no request in the turn.
_NO_REQUEST = re.compile(
    r"\b(?:do\s*n[o']?t|never)\s+(?:delete|erase|remove|wipe)\b|\bhypothetical\w*|\bin theory\b|\bjust wondering\b",
    re.IGNORECASE,
)


# Keeping a person is no act on memory: "don't keep me waiting", "keep us posted".
_KEEPING_SOMEONE = re.compile(
    r"\bkeep(?:s|ing)?\s+(?:me|us|you|u|him|her|them)\b(?!\s+(?:on\s+file|in\s+(?:your|ur)\s+(?:memory|notes|records)))",
    re.IGNORECASE,
)


# The same acts in the words of other tongues and of voice dictation, and English ones too rare in chat
# to train the reader against (``names_a_memory_act`` chooses its training pairs, so it stays as it is).
# "Forget it" in another tongue moves on, as in English.
_OTHER_WORDS = re.compile(
    r"\b(?:for\s+get|4\s+get|a\s+race|e\s+race|de\s+lete|re\s+move|deleet\w*)\b|"  # dictation, typos
    r"\b(?:paki|i-|ipa)-?(?:delete|remove|forg\w*|fogert|erase|burahin|alis\w*|tanggal\w*|kalimut\w*)|"  # Tagalog
    r"\b(?:kalimut\w*|kalimtan|burahin|burah\w*|alisin|tanggalin)\b|"
    r"\b(?:wag|huwag|di|hindi)\s+(?:\w+\s+){0,3}?(?:itago|tandaan|alalahanin)\b|"
    r"\bvergiss(?!\s+es\b)\w*|\bvergessen\b|\bl(?:ö|oe)sch\w*|\bentfern\w*|\braus\s+aus\b|"  # German
    r"\bolvid(?!alo\b|ame\b)\w*|\bborr[ae]\w*|\belimin(?:a|ar|alo|ala|e|en)\b|"  # Spanish, not "eliminated"
    r"\besque[cç](?![ae]\s+isso\b)\w*|\bapag[ua]\w*|\btira\s+(?:\w+\s+){0,3}?(?:mem[oó]ria|notas?)\b|"  # Portuguese
    r"\boubli(?!e\s+(?:ça|ca)\b)\w*|\beffac\w*|\bsupprim\w*|"  # French
    r"\bdimentic(?!alo\b)\w*|\bcancella(?:re|lo|la|li|le|te)?\b|\bverwijder\w*|\bvergeet\b|"  # Italian (not "cancelled"), Dutch
    r"\bbh?oo?l\s+ja\w*|\b(?:hata|mita)\s+d[oe]\b|"  # Hindi
    r"\b\w+nae\s+(?:\w+\s+){0,3}?(?:keep|remember|hang|hold|store|save)|"  # Scots: "didnae hang on to"
    r"\bget\s+shot\s+of\b|\bundo\b|\brmv\b|\U0001f5d1",
    re.IGNORECASE,
)
# A taken-back sentence that asks to keep ("keep it", "leave it", "everything stays") takes back the turn.
_ASKS_TO_KEEP = re.compile(r"\b(?:keep|leave|stays?|it'?s\s+fine)\b")


def names_a_memory_act(turn: str) -> bool:
    """Whether ``turn`` names an act on memory that is not a reminder, a refusal or a hypothetical."""
    return not _NO_REQUEST.search(turn) and bool(_MEMORY_ACT.search(_REMINDER.sub(" ", turn)))


class ForgetSpotter:
    """The packaged MiniLM with the spotter's weights merged in; :meth:`score` runs it on a turn."""

    def __init__(self, weights: Path = WEIGHTS) -> None:
        self.tokenizer, self.encoder, self.head = load_learned_minilm(weights, "benchmarks/train_forget_spotter.py")
        self._lock = threading.Lock()
        # An ingest reads each turn twice (is there a request? then honour it): the last scores are kept.
        self._recent: OrderedDict[str, float] = OrderedDict()

    def score(self, turn: str) -> float:
        """The probability that ``turn`` asks the assistant to forget something."""
        import torch

        with self._lock:
            if turn in self._recent:
                self._recent.move_to_end(turn)
                return self._recent[turn]
            with torch.inference_mode():
                batch = self.tokenizer([turn], truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
                value = float(torch.sigmoid(self.head(self.encoder(**batch).last_hidden_state[:, 0])).item())
            self._recent[turn] = value
            if len(self._recent) > RECENT:
                self._recent.popitem(last=False)
            return value


forget_spotter = loaded_once(ForgetSpotter)  # the process's one spotter, loaded on first use


def _names_an_act(turn: str) -> bool:
    turn = _KEEPING_SOMEONE.sub(" ", turn)
    return names_a_memory_act(turn) or (not _NO_REQUEST.search(turn) and bool(_OTHER_WORDS.search(turn)))


def _acts_in(sentence: str) -> bool:
    """Whether ``sentence`` names an act on memory at all, reminders and refusals included."""
    sentence = _KEEPING_SOMEONE.sub(" ", sentence)
    return bool(_MEMORY_ACT.search(sentence) or _OTHER_WORDS.search(sentence))


def spots_request(turn: str) -> bool:
    """Whether the spotter finds a request in ``turn`` (one the rules read none in; see the module)."""
    if not _names_an_act(turn) or any(
        _acts_in(sentence) or _ASKS_TO_KEEP.search(sentence) for sentence in taken_back_sentences(turn)
    ):
        return False
    return forget_spotter().score(turn) >= THRESHOLD
