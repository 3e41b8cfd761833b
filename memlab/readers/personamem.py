"""PersonaMem's own evaluation protocols as readers, for numbers that sit beside the paper's.

- ``personamem``: the official long-context protocol (bowen-upenn/PersonaMem ``inference.py`` /
  ``inference_standalone_openai.py``, ``Evaluation.query_llm`` and ``run_evaluation``): the
  history up to ``end_index_in_shared_context`` (exclusive) as native chat messages, then one user
  message ``question + "\\n\\n" + instruction + "\\n\\n" + all_options`` with the options as the
  raw CSV cell; system turns treated as the reference treats them; provider-default decoding (no
  temperature, no reply limit sent) unless the user sets them; scored by the official extractor
  (:mod:`memlab.eval.personamem_extract`). It needs the raw history, not a retrieval: run it with
  the ``full_context`` backend (every turn comes back as an item), which this reader checks.
- ``personamem_baseline``: the official retrieval baselines (``baselines/run.py`` with
  ``baselines/chat_lib.py``): a system line asking for A-D only, the retrieved contexts (each
  stored message as its JSON) or the user facts under a heading, ``# Question:``, ``# Choices:``
  with the options joined by newlines, temperature 0, and a JSON-schema enum answer.

See docs/llm.md for what differs from the uniform ``llm`` reader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from memlab.errors import ConfigurationError
from memlab.eval.personamem_extract import extract_official
from memlab.llm.base import ChatMessage
from memlab.llm.config import LLMConfig
from memlab.memory import message_json
from memlab.readers.llm import lenient_only
from memlab.readers.llm_backed import LLMBackedReader, LLMReaderSettings, choice_answer
from memlab.types import OPTION_LETTERS, Answer, MemoryItem, Question, Retrieval

# Verbatim from bowen-upenn/PersonaMem inference_standalone_openai.py (Evaluation.query_llm); the
# same text is in inference.py.
OFFICIAL_INSTRUCTIONS = (
    "Find the most appropriate model response and give your final answer (a), (b), (c), or (d) "
    "after the special token <final_answer>."
)
# Verbatim from bowen-upenn/PersonaMem baselines/chat_lib.py (chatSession.system_msg).
BASELINE_SYSTEM = "You are an AI that answers only with A, B, C, or D."
# Verbatim from bowen-upenn/PersonaMem baselines/chat_lib.py (chatSession.json_schema).
BASELINE_JSON_SCHEMA: dict[str, Any] = {
    "name": "answer_choice",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["A", "B", "C", "D"]}},
        "required": ["answer"],
        "additionalProperties": False,
    },
}
# Headings of the user prompt, verbatim from bowen-upenn/PersonaMem baselines/run.py (evaluator).
CONTEXTS_HEADING = "# {top_k} most similar contexts to the question: \n"
FACTS_HEADING = "# User facts: \n"
QUESTION_HEADING = "# Question: {question}\n\n"
CHOICES_HEADING = "# Choices: \n{choices}"

SystemTurns = Literal["auto", "merge", "keep", "drop"]


def _require_choice_question(reader: str, question: Question) -> None:
    if not question.is_multiple_choice:
        raise ConfigurationError(
            f"reader {reader!r} is PersonaMem's multiple-choice protocol; question {question.id!r} has no options"
        )


def raw_options(question: Question) -> str:
    """The options as the CSV cell holds them (the loader keeps it in ``metadata['raw_options']``);
    for questions from elsewhere, the list as Python writes it (what the reference's CSV writer wrote)."""
    raw = question.metadata.get("raw_options")
    return raw if isinstance(raw, str) else str(list(question.options))


# ----------------------------------------------------------------------------- long context
class PersonaMemReaderConfig(LLMReaderSettings):
    max_tokens: int | None = Field(
        default=None, ge=1, description="reply budget; default: none sent (the provider's default, as the reference)"
    )
    system_turns: SystemTurns = Field(
        default="auto",
        description="auto: as the reference routes the model name (see reference_system_mode); merge: "
        "'[System]: ...' prefix of the next message, same-role neighbours joined; keep: as they are; drop: left out",
    )
    instructions: str = OFFICIAL_INSTRUCTIONS


def merge_system_turns(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The reference's ``convert_role_system_to_user``: each system message becomes a
    ``[System]: <content>\\n`` prefix of the next message, and consecutive messages of one role
    are joined with a newline (so the question may join the last user turn)."""
    merged: list[dict[str, str]] = []
    pending = ""
    for message in messages:
        role, content = message["role"], message["content"]
        if role == "system":
            pending += f"[System]: {content}\n"
            continue
        if pending:
            content, pending = pending + content, ""
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"] += "\n" + content
        else:
            merged.append({"role": role, "content": content})
    return merged  # a trailing system message is dropped, as in the reference


def reference_system_mode(model: str) -> str:
    """What the reference does with system turns for a model name (inference.py, query_llm): its
    OpenAI branch (names with 'gpt', 'o1' or 'o3') merges them whenever the name contains the letter
    'o' (gpt-4o, o1, gpt-4-turbo alike; not gpt-4.1); its Gemini branch drops them; its Claude branch
    merges them; every other model (its OpenAI-compatible Lambda branch) gets them as they are."""
    if re.search(r"gpt|o1|o3", model):
        return "merge" if "o" in model else "keep"
    if "gemini" in model:
        return "drop"
    if "claude" in model:
        return "merge"
    return "keep"


def history_messages(question: Question, retrieval: Retrieval, reader: str) -> list[dict[str, str]]:
    """The raw history ``[0, end_index)`` from a ``full_context`` retrieval, refusing anything else.

    No items at all is the reference's no-context branch (the blind ``none`` control)."""
    items = retrieval.items
    if not items:
        return []
    roles = [item.source.get("role") for item in items]
    whole = len(items) == question.end_index and all(role in ("system", "user", "assistant") for role in roles)
    if not whole:
        raise ConfigurationError(
            f"reader {reader!r} sends the raw history up to the question's end index as chat messages: it needs "
            f"the full_context backend with every turn stored (include_system true) and a max_tokens budget that "
            f"holds the whole history; question {question.id!r} got {len(items)} item(s) for end index "
            f"{question.end_index}" + ("" if all(roles) else ", some without a source role (not stored turns)")
        )
    return [{"role": str(role), "content": item.text} for role, item in zip(roles, items)]


class PersonaMemReader(LLMBackedReader):
    name = "personamem"
    description = (
        "PersonaMem's official long-context protocol (native chat history, official extractor); needs full_context"
    )
    Config = PersonaMemReaderConfig
    config: PersonaMemReaderConfig

    @classmethod
    def backend_problem(cls, config: Mapping[str, Any], backend: str, backend_config: Any) -> str | None:
        if backend in ("full_context", "none"):  # none: the reference's no-context branch (blind control)
            if backend == "full_context" and not getattr(backend_config, "include_system", True):
                return "reader 'personamem' needs every turn: run full_context with include_system true"
            return None
        return (
            f"reader 'personamem' sends the raw history as chat messages and needs the full_context backend, "
            f"not {backend!r}; read {backend!r} with personamem_baseline (give the row its own reader in a run config)"
        )

    def describe(self) -> str:
        suffix = "" if self.config.system_turns == "auto" else f":system={self.config.system_turns}"
        return f"{self.name}:{self.model_name()}{suffix}"

    def _served_model(self) -> str:
        inner = getattr(self.llm, "inner", self.llm)
        return str(getattr(inner, "model", None) or self.config.llm.model or self.llm.name)

    def system_mode(self) -> str:
        if self.config.system_turns != "auto":
            return self.config.system_turns
        return reference_system_mode(self._served_model())

    def messages(self, question: Question, retrieval: Retrieval) -> list[ChatMessage]:
        _require_choice_question(self.name, question)
        context = history_messages(question, retrieval, self.name)
        user = f"{question.text}\n\n{self.config.instructions}\n\n{raw_options(question)}"
        messages = [*context, {"role": "user", "content": user}]
        mode = self.system_mode()
        if mode == "merge":
            messages = merge_system_turns(messages)
        elif mode == "drop":
            messages = [m for m in messages if m["role"] != "system"]
        # model_validate: the roles are plain strings here, checked against ChatMessage.role by pydantic.
        return [ChatMessage.model_validate({"role": m["role"], "content": m["content"]}) for m in messages]

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        messages = self.messages(question, retrieval)
        # Provider defaults unless the user set them: the reference sends neither field.
        temperature = self.config.llm.temperature if "temperature" in self.config.llm.model_fields_set else None
        response = self.ask_llm(messages, temperature=temperature, max_tokens=self.config.max_tokens)
        if isinstance(response, Answer):
            return response  # the request failed
        extraction = extract_official(response.text)
        choice = extraction.choice(question.answer)
        metadata = self.reply_metadata(response)
        metadata.update(
            parse_failure=choice is None,
            parser="official",
            predicted_answer=extraction.tail,
            system_turns=self.system_mode(),
            metrics={"lenient_only": lenient_only(response.text, question)},
        )
        return choice_answer(choice, question, response, metadata)


# ----------------------------------------------------------------------------- retrieval baseline
class PersonaMemBaselineConfig(LLMReaderSettings):
    heading: Literal["auto", "contexts", "facts"] = Field(
        default="auto",
        description="auto: 'contexts' when every item is one stored message (rag turn chunks, the reference's RAG "
        "baseline), 'facts' otherwise (mem0 facts, profile entries: the reference's Mem0 baseline)",
    )
    top_k: int | None = Field(
        default=None, ge=1, description="the k written in the contexts heading; default: the number of items retrieved"
    )
    json_schema: bool = Field(
        default=True, description="send the reference's JSON-schema response_format (OpenAI-compatible providers)"
    )
    order: Literal["score", "retrieved"] = Field(
        default="score",
        description="score: most similar first, as the reference lists its top-k (items without scores keep "
        "their order); retrieved: as the backend returned them (rag returns conversation order)",
    )


def _is_message(item: MemoryItem) -> bool:
    return item.source.get("role") in ("system", "user", "assistant") and "turns" not in item.source


def render_context(item: MemoryItem) -> str:
    """A retrieved message as the reference's data loader gives it to the prompt: the message's
    JSON (``json.dumps``, ASCII-escaped); any other item as its text."""
    if _is_message(item):
        return message_json(item.source["role"], item.text)
    return item.text


def by_score(items: Sequence[MemoryItem]) -> list[MemoryItem]:
    """Most similar first, like ``np.argsort(similarity)[::-1]`` in the reference (ties: later first)."""
    if any(item.score is None for item in items):
        return list(items)
    order = sorted(range(len(items)), key=lambda i: (items[i].score, i), reverse=True)
    return [items[i] for i in order]


def parse_baseline_answer(reply: str) -> int | None:
    """The option of a ``{"answer": "A"}`` reply (compared lowercased, as ``baselines/run.py`` does),
    or None for anything else (the reference would ask again; a rerun here hits the cache)."""
    try:
        value = json.loads(reply.strip())
    except json.JSONDecodeError:
        return None
    answer = value.get("answer") if isinstance(value, dict) else None
    if not isinstance(answer, str) or answer.lower() not in OPTION_LETTERS:
        return None
    return OPTION_LETTERS.index(answer.lower())


class PersonaMemBaselineReader(LLMBackedReader):
    name = "personamem_baseline"
    description = "PersonaMem's official RAG/Mem0 baseline prompt (A-D only, JSON answer) over retrieved items"
    Config = PersonaMemBaselineConfig
    config: PersonaMemBaselineConfig

    def llm_config(self) -> LLMConfig:
        config = super().llm_config()
        if (
            not self.config.json_schema
            or config.resolved_provider() != "openai"
            or "response_format" in config.extra_params
        ):
            return config
        response_format = {"type": "json_schema", "json_schema": BASELINE_JSON_SCHEMA}
        return config.model_copy(update={"extra_params": {**config.extra_params, "response_format": response_format}})

    def heading_kind(self, retrieval: Retrieval) -> str:
        if self.config.heading != "auto":
            return self.config.heading
        return "contexts" if retrieval.items and all(_is_message(i) for i in retrieval.items) else "facts"

    def messages(self, question: Question, retrieval: Retrieval) -> list[ChatMessage]:
        _require_choice_question(self.name, question)
        prompt = ""
        items = by_score(retrieval.items) if self.config.order == "score" else list(retrieval.items)
        if items:
            if self.heading_kind(retrieval) == "contexts":
                top_k = self.config.top_k or len(items)
                prompt = CONTEXTS_HEADING.format(top_k=top_k) + "\n".join(render_context(i) for i in items) + "\n\n"
            else:
                prompt = FACTS_HEADING + "\n".join(i.text for i in items) + "\n\n"
        # No items: the reference's context_mode "none" (no heading at all).
        prompt += QUESTION_HEADING.format(question=question.text)
        prompt += CHOICES_HEADING.format(choices="\n".join(question.options))
        return [ChatMessage(role="system", content=BASELINE_SYSTEM), ChatMessage(role="user", content=prompt)]

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        messages = self.messages(question, retrieval)
        response = self.ask_llm(messages, temperature=self.config.llm.temperature, max_tokens=None)
        if isinstance(response, Answer):
            return response  # the request failed
        choice = parse_baseline_answer(response.text)
        metadata = self.reply_metadata(response)
        metadata.update(
            parse_failure=choice is None,
            parser="json_enum",
            heading=self.heading_kind(retrieval),
            metrics={"lenient_only": lenient_only(response.text, question)},
        )
        return choice_answer(choice, question, response, metadata)
