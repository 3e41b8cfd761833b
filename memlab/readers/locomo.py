"""The ``locomo`` reader: an LLM answers LoCoMo questions with LoCoMo's own QA prompt.

What it reproduces (snap-research/locomo ``task_eval/evaluate_gpts.py``, one question per request):

- the prompt: ``CONV_START_PROMPT`` (the two speakers' names), the memory context, a blank line and
  ``QA_PROMPT`` (short phrase, "exact words from the context"); category 5 uses ``QA_PROMPT_CAT_5``;
- category 2 (temporal) questions get LoCoMo's date hint appended to the question;
- category 5 (adversarial) questions become LoCoMo's two-option choice between "Not mentioned in the
  conversation" and the trap answer, in random order, and a reply that is just a letter ("a",
  "(b)") is mapped back to the option text as ``get_cat_5_answer`` does; LoCoMo's F1 then tests the
  mapped text for "not mentioned";
- decoding: temperature from ``llm.temperature`` (default 0, as LoCoMo) and 32 answer tokens.

Differences, all deliberate: the option order comes from ``random.Random`` seeded by ``seed`` and the
question id (LoCoMo draws from the unseeded global generator), so a rerun asks the same prompt and hits
the response cache; the prompt goes as one ``user`` message (LoCoMo sent it as ``system`` to
gpt-3.5 and as ``user`` to other models; many local chat templates need a user turn); the context is
whatever the backend rendered (``DATE:`` headers from ``memlab.memory.render_turns``) instead of
LoCoMo's own ``DATE: ... CONVERSATION:`` blocks; questions without the speakers' names in
``metadata["speakers"]`` (datasets other than LoCoMo) get no ``CONV_START_PROMPT``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from pydantic import Field

from memlab.llm.base import ChatMessage
from memlab.readers.llm import MaxContextTokens, memory_text
from memlab.readers.llm_backed import LLMBackedReader, LLMReaderSettings, require_open_question, text_answer
from memlab.types import Answer, Question, Retrieval

# ---- Prompt texts, verbatim from snap-research/locomo task_eval/evaluate_gpts.py (data, not code;
# the "wriiten" typo is theirs and kept so the prompt is the published one).
CONV_START_PROMPT = (
    "Below is a conversation between two people: {} and {}. The conversation takes place over multiple "
    "days and the date of each conversation is wriiten at the beginning of the conversation.\n\n"
)
QA_PROMPT = (
    "\nBased on the above context, write an answer in the form of a short phrase for the following "
    "question. Answer with exact words from the context whenever possible.\n\nQuestion: {} Short answer:\n"
)
QA_PROMPT_CAT_5 = "\nBased on the above context, answer the following question.\n\nQuestion: {} Short answer:\n"
DATE_HINT = " Use DATE of CONVERSATION to answer with an approximate date."
CAT_5_CHOICE = " Select the correct answer: (a) {} (b) {}. "
NOT_MENTIONED = "Not mentioned in the conversation"
# ---- end of LoCoMo's texts

TEMPORAL, ADVERSARIAL = 2, 5


def locomo_category(question: Question) -> int | None:
    category = question.metadata.get("category")
    if isinstance(category, int):
        return category
    return {"temporal": TEMPORAL, "adversarial": ADVERSARIAL}.get(question.type)


def adversarial_options(question: Question, seed: int) -> dict[str, str]:
    """``{"a": ..., "b": ...}``: "Not mentioned in the conversation" and the trap answer, in an order
    drawn per question (LoCoMo: ``random.random() < 0.5`` puts "Not mentioned" first)."""
    trap = question.answer_text or ""
    if random.Random(f"{seed}\0{question.id}").random() < 0.5:
        return {"a": NOT_MENTIONED, "b": trap}
    return {"a": trap, "b": NOT_MENTIONED}


def map_adversarial_reply(reply: str, options: Mapping[str, str]) -> str:
    """LoCoMo's ``get_cat_5_answer``: a one-character reply is the option whose letter it contains
    (else b), a three-character one the option named by "(a)" (else b); anything longer is kept as
    written, lower-cased (its F1 is the "not mentioned" phrase test)."""
    text = reply.strip().lower()
    if len(text) == 1:
        return options["a"] if "a" in text else options["b"]
    if len(text) == 3:
        return options["a"] if "(a)" in text else options["b"]
    return text


class LoCoMoReaderConfig(LLMReaderSettings):
    max_tokens: int = Field(default=32, ge=1, description="answer budget (LoCoMo: 32 tokens)")
    seed: int = Field(default=0, description="seeds the order of the two category-5 options")
    max_context_tokens: MaxContextTokens = None


class LoCoMoReader(LLMBackedReader):
    name = "locomo"
    description = "an LLM answers with LoCoMo's QA prompt (date hint, two-option adversarial choice)"
    Config = LoCoMoReaderConfig

    config: LoCoMoReaderConfig

    def prompt(self, question: Question) -> tuple[str, dict[str, str] | None]:
        """The text after the context, and the category-5 options (None for other questions)."""
        category = locomo_category(question)
        if category == ADVERSARIAL:
            options = adversarial_options(question, self.config.seed)
            return QA_PROMPT_CAT_5.format(question.text + CAT_5_CHOICE.format(options["a"], options["b"])), options
        text = question.text + DATE_HINT if category == TEMPORAL else question.text
        return QA_PROMPT.format(text), None

    def messages(self, question: Question, retrieval: Retrieval) -> tuple[list[ChatMessage], dict[str, str] | None]:
        speakers = question.metadata.get("speakers")
        start = CONV_START_PROMPT.format(*speakers) if isinstance(speakers, list) and len(speakers) == 2 else ""
        context = memory_text(retrieval, self.config.max_context_tokens)
        tail, options = self.prompt(question)
        return [ChatMessage(role="user", content=f"{start}{context}\n\n{tail}")], options

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        require_open_question(self.name, question)
        messages, options = self.messages(question, retrieval)
        response = self.ask_llm(messages, temperature=self.config.llm.temperature, max_tokens=self.config.max_tokens)
        if isinstance(response, Answer):
            return response  # the request failed
        text = response.text.strip()
        metadata = self.reply_metadata(response)
        if options is not None:
            metadata["options"] = dict(options)
            text = map_adversarial_reply(text, options)
        return text_answer(text, response, metadata)
