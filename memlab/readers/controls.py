"""Blind controls: readers that never look at memory, to expose dataset and reader biases."""

from __future__ import annotations

from memlab.readers.base import Reader, argmax, strip_option_label
from memlab.types import Answer, Question, Retrieval


class LongestOptionReader(Reader):
    """Picks the longest option. PersonaMem's correct options are often the most specific, and
    therefore longest, so this shows how much a reader can score without any memory at all."""

    name = "longest_option"
    description = "blind control: choose the longest option"
    uses_memory = False

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        if not question.is_multiple_choice:  # open questions (LoCoMo) have no options to compare
            return Answer(error=f"{self.name} answers only multiple-choice questions; {question.id!r} is open")
        scores = [float(len(strip_option_label(o))) for o in question.options]
        return Answer(choice=argmax(scores), scores=scores)
