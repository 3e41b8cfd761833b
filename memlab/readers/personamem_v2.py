"""PersonaMem-v2's official evaluation protocol as a reader (``personamem_v2``).

Reproduced from bowen-upenn/PersonaMem-v2 ``inference.py`` (commit 6a36975; ``evaluate_row``,
``create_mcq_options``, ``extract_final_answer``, ``check_mcq_correctness``):

- ``mode="mcq"`` (default): the history as chat messages (the persona system message included),
  then the user query with the reference's recall suffix, then a trailing **system** message with
  the options lettered ``A.``-``D.`` and the reference's instruction, verbatim; no temperature, no
  reply limit (provider defaults) unless set; the letter taken by the reference's ordered patterns
  (:mod:`memlab.eval.personamem_v2_extract`), correct only when it maps to the correct answer's text.
- ``mode="open"``: the same messages without the options message; the reply is the answer, scored
  afterwards by ``--judge personamem_v2`` (the reference's narrow judge, :mod:`memlab.eval.judge`).

Where the history goes:

- with ``full_context`` (every stored turn back, in order, with its role) the messages are the
  history exactly as the reference sends it (needs ``include_system`` true, the default, and a
  ``max_tokens`` budget that holds the whole history: ``--full_context.max-tokens 200000`` at 128k;
  a history cut from the front is refused, never sent silently; turns deleted by
  ``--full_context.forget-requests true`` are simply not there);
- with any other backend (retrieval, profile, mem0) the history is replaced by what the backend
  returned, introduced the way the reference's own RAG baseline (``verl_custom/rag.py``) introduces
  retrieved excerpts: its two system messages verbatim, then each retrieved stored message as a chat
  message with its own role (in the order the backend returned them), or, for items that are not
  stored messages (facts, profile entries), one system message holding the backend's context text;
- with no memory at all (the ``none`` control) only the query and the options message are sent.

The options are in the dataset's deterministic order (``memlab.datasets.personamem_v2``), recorded
with every answer as ``option_order``; the reference's order depends on Python's salted ``hash()``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memlab.datasets.personamem_v2 import RECALL_SUFFIX
from memlab.errors import ConfigurationError
from memlab.eval.personamem_v2_extract import LETTERS, choice_for, extract_letter
from memlab.llm.base import ChatMessage
from memlab.readers.llm_backed import LLMBackedReader, LLMReaderSettings, choice_answer, text_answer
from memlab.types import Answer, MemoryItem, Question, Retrieval

# Verbatim from inference.py@6a36975 (create_mcq_options): the text around the lettered options.
MCQ_HEADER = "Please choose the best answer from the following options:\n\n"
MCQ_FOOTER = (
    "\n\nThink step by step about which answer best fits the user's query and conversation context. "
    "Provide your reasoning first, then give your final answer as 'Final Answer: [Letter]'"
)
# Verbatim from bowen-upenn/PersonaMem-v2 verl_custom/rag.py@0b5ac35: how its RAG baseline introduces
# retrieved history.
RAG_SYSTEM = (
    "You are a helpful assistant that provides personalized responses based on the user's preferences in "
    "conversation history."
)
RAG_EXCERPTS = (
    "The following are relevant excerpts from your conversation history with this user. "
    "Use them to personalize your response."
)

Mode = Literal["mcq", "open"]


def mcq_instruction(options: list[str]) -> str:
    """The trailing system message: ``A. <option>`` lines between the reference's header and footer."""
    return MCQ_HEADER + "\n".join(f"{letter}. {option}" for letter, option in zip(LETTERS, options)) + MCQ_FOOTER


def _is_message(item: MemoryItem) -> bool:
    return item.source.get("role") in ("system", "user", "assistant") and "turns" not in item.source


def _is_full_context(retrieval: Retrieval) -> bool:
    """Stored turns without scores, in order: what full_context returns (possibly cut)."""
    return bool(retrieval.items) and all(item.score is None and _is_message(item) for item in retrieval.items)


def _starts_at_the_beginning(question: Question, retrieval: Retrieval) -> bool:
    """Whether a full_context retrieval still holds the history's first message: it cuts from the
    front, so then nothing was cut (turns a forget request deleted may be missing in between)."""
    first = retrieval.items[0].source
    return len(retrieval.items) == question.end_index or (
        first.get("turn_index") == 0 and str(first.get("session_id", "")).endswith(":s0")
    )


def history_part(question: Question, retrieval: Retrieval, reader: str) -> list[dict[str, str]]:
    """The messages that stand where the reference puts the whole history (see the module docstring)."""
    items = retrieval.items
    if not items:
        return []
    if _is_full_context(retrieval):
        if _starts_at_the_beginning(question, retrieval):
            return [{"role": str(item.source["role"]), "content": item.text} for item in items]
        raise ConfigurationError(
            f"reader {reader!r}: question {question.id!r} got {len(items)} of the history's {question.end_index} "
            "messages from full_context: raise its budget (--full_context.max-tokens, e.g. 200000 for 128k) and keep "
            "include_system true, so the whole history is sent as the reference sends it"
        )
    messages = [{"role": "system", "content": RAG_SYSTEM}, {"role": "system", "content": RAG_EXCERPTS}]
    if all(_is_message(item) for item in items):
        messages += [{"role": str(item.source["role"]), "content": item.text} for item in items]
    else:
        messages.append({"role": "system", "content": retrieval.context})
    return messages


class PersonaMemV2ReaderConfig(LLMReaderSettings):
    mode: Mode = Field(
        default="mcq",
        description="mcq: the official multiple-choice protocol; open: free answer for --judge personamem_v2",
    )
    max_tokens: int | None = Field(
        default=None, ge=1, description="reply budget; default: none sent (the provider's default, as the reference)"
    )
    system_as_user: bool = Field(
        default=False,
        description="send system messages as user messages (what the reference does for Claude and Gemini)",
    )


class PersonaMemV2Reader(LLMBackedReader):
    name = "personamem_v2"
    description = (
        "PersonaMem-v2's official protocol (history as chat, trailing A-D system message, official extraction)"
    )
    Config = PersonaMemV2ReaderConfig
    config: PersonaMemV2ReaderConfig

    def describe(self) -> str:
        suffix = ":open" if self.config.mode == "open" else ""
        suffix += ":system-as-user" if self.config.system_as_user else ""
        return f"{self.name}:{self.model_name()}{suffix}"

    def messages(self, question: Question, retrieval: Retrieval) -> list[ChatMessage]:
        if not question.is_multiple_choice:
            raise ConfigurationError(
                f"reader {self.name!r} is PersonaMem-v2's protocol; question {question.id!r} has no options"
            )
        messages = history_part(question, retrieval, self.name)
        messages.append({"role": "user", "content": question.text + RECALL_SUFFIX})
        if self.config.mode == "mcq":
            messages.append({"role": "system", "content": mcq_instruction(list(question.options))})
        if self.config.system_as_user:
            messages = [
                {"role": "user" if m["role"] == "system" else m["role"], "content": m["content"]} for m in messages
            ]
        return [ChatMessage.model_validate(m) for m in messages]

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        messages = self.messages(question, retrieval)
        # Provider defaults unless the user set them: the reference sends neither field.
        temperature = self.config.llm.temperature if "temperature" in self.config.llm.model_fields_set else None
        response = self.ask_llm(messages, temperature=temperature, max_tokens=self.config.max_tokens)
        if isinstance(response, Answer):
            return response  # the request failed
        metadata = self.reply_metadata(response)
        metadata["option_order"] = list(question.options)
        if self.config.mode == "open":
            metadata["mode"] = "open"  # judged afterwards; no choice to score
            return text_answer(response.text, response, metadata)
        letter = extract_letter(response.text)
        choice = choice_for(letter, list(question.options), question.answer)
        metadata.update(parse_failure=letter not in LETTERS, parser="personamem_v2", predicted_answer=letter)
        return choice_answer(choice, question, response, metadata)
