"""PersonaMem's official answer extractor, as one function: :func:`extract_official`.

Reproduced from reading ``Evaluation.extract_answer`` in bowen-upenn/PersonaMem (``inference.py``
and ``inference_standalone_openai.py``); MemTensor/MemOS uses the same rules
(``evaluation/scripts/personamem/pm_responses.py``, ``extract_choice_answer``). The rules:

1. The *tail* is the stripped reply; when it holds ``<final_answer>`` (exact spelling), only the
   text after its last occurrence, stripped; a trailing ``</final_answer>`` is cut off.
2. The *option set* of a text (lowercased): every letter a-d written in parentheses, ``(c)``; if
   there is none, every bare letter a-d standing alone as a word (``\\b[a-d]\\b``: the article "a"
   counts as a letter).
3. The reply is correct when the tail's option set is exactly ``{correct}``, or, failing that, the
   whole reply's option set is exactly ``{correct}``.

So a reply that names several options anywhere in the text it is judged on ("Options (a) and (b)
ignore ..., so the answer is (c).") is wrong, and "Answer: C. It suggests a ..." is wrong too (the
article "a" is a second letter). memlab's ``lenient`` parser credits both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memlab.types import OPTION_LETTERS

FINAL_ANSWER_TAG = "<final_answer>"
FINAL_ANSWER_CLOSE = "</final_answer>"

_IN_PARENS = re.compile(r"\(([a-d])\)")
_BARE = re.compile(r"\b([a-d])\b")


def option_set(text: str) -> frozenset[str]:
    """Option letters a text names by the official rule: parenthesised ones, else bare ones."""
    lowered = text.lower()
    in_parens = _IN_PARENS.findall(lowered)
    return frozenset(in_parens) if in_parens else frozenset(_BARE.findall(lowered))


def official_tail(reply: str) -> str:
    """What the reference reports as the predicted answer: the text after the last final-answer tag."""
    tail = reply.strip()
    if FINAL_ANSWER_TAG in tail:
        tail = tail.split(FINAL_ANSWER_TAG)[-1].strip()
    if tail.endswith(FINAL_ANSWER_CLOSE):
        tail = tail[: -len(FINAL_ANSWER_CLOSE)].strip()
    return tail


@dataclass(frozen=True)
class OfficialExtraction:
    """The option sets the official extractor judges a reply by."""

    tail: str
    tail_options: frozenset[str]
    reply_options: frozenset[str]

    def credits(self, letter: str) -> bool:
        """Whether the official extractor scores the reply correct when ``letter`` is the answer."""
        wanted = frozenset({letter.lower().strip("() ")})
        return self.tail_options == wanted or self.reply_options == wanted

    def named_letter(self) -> str | None:
        """The one letter the reply names (tail first, then the whole reply), or None."""
        for options in (self.tail_options, self.reply_options):
            if len(options) == 1:
                return next(iter(options))
        return None

    def choice(self, correct: int | None) -> int | None:
        """The option index to record so that ``choice == correct`` exactly when the official
        extractor credits the reply: the correct index when credited, otherwise the one letter
        the reply names (an index != correct), or None when it names none or several."""
        if correct is not None and self.credits(OPTION_LETTERS[correct]):
            return correct
        letter = self.named_letter()
        if letter is None:
            return None
        return OPTION_LETTERS.index(letter)  # never ``correct``: naming it alone is crediting it


def extract_official(reply: str) -> OfficialExtraction:
    """Apply the official PersonaMem extraction rules to one model reply."""
    tail = official_tail(reply)
    return OfficialExtraction(tail=tail, tail_options=option_set(tail), reply_options=option_set(reply))


def official_is_correct(reply: str, correct_answer: str) -> bool:
    """The reference's verdict: ``correct_answer`` as in the CSV, e.g. ``"(c)"`` (or ``"c"``)."""
    return extract_official(reply).credits(correct_answer)
