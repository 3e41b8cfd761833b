"""The ``llm`` reader: an LLM reads the retrieved memory and picks an option (PersonaMem's
discriminative setting), or answers an open question (LoCoMo) in a few words.

The multiple-choice prompt follows PersonaMem's evaluation: the memory, then the user's message,
the instruction to give the final answer (a)-(d) after ``<final_answer>``, and the four options.
The letter is parsed by one of two parsers (``parser``):

- ``lenient`` (default): memlab's robust parser (:func:`parse_choice`): the last stated answer,
  bare letters, JSON, or the option text itself;
- ``official``: PersonaMem's own extractor (:mod:`memlab.eval.personamem_extract`), which credits a
  reply only if the set of letters it names is exactly the correct one.

A reply with no letter the parser accepts is a *parse failure* (``choice=None``,
``metadata["parse_failure"]=True``, raw reply kept), never a guess. Every multiple-choice answer
carries ``metadata["metrics"]["lenient_only"]``: 1.0 when the lenient parser credits the correct
option and the official extractor does not, so a row shows how much leniency added.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from memlab.eval.personamem_extract import extract_official
from memlab.llm.base import ChatMessage
from memlab.readers.base import strip_option_label
from memlab.readers.llm_backed import LLMBackedReader, LLMReaderSettings, choice_answer, text_answer
from memlab.tokens import truncate_front
from memlab.types import OPTION_LETTERS, Answer, Question, Retrieval

MEMORY_SYSTEM_PROMPT = (
    "You are a helpful assistant with long-term memory of your conversations with this user. "
    "Below is what you remember about the user from earlier conversations.\n\n"
    "<memory>\n{memory}\n</memory>"
)
NO_MEMORY = "(nothing remembered)"
PERSONAMEM_INSTRUCTIONS = (
    "Find the most appropriate model response and give your final answer (a), (b), (c), or (d) "
    "after the special token <final_answer>."
)
JSON_INSTRUCTIONS = (
    "Find the most appropriate model response. Reply with a JSON object "
    '{"answer": "<letter>"} where <letter> is one of a, b, c, d.'
)
OPEN_INSTRUCTIONS = "Answer the question in a short phrase (a few words), using what you remember about the user."


def check_system_prompt(template: str) -> str:
    """Refuse at config time a prompt that would fail (or drop the memory) on every question."""
    if "{memory}" not in template:
        raise ValueError("system_prompt must contain {memory}, where the retrieved memory goes")
    try:
        template.format(memory="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"system_prompt is a str.format template: {{memory}} is its only field; write other braces "
            f"as {{{{ and }}}} ({type(exc).__name__}: {exc})"
        ) from exc
    return template


# Config field types of the readers that put the memory in a prompt (llm, logprob, locomo, longmemeval).
SystemPrompt = Annotated[str, AfterValidator(check_system_prompt)]
MaxContextTokens = Annotated[
    int | None, Field(ge=1, description="keep only the newest part of the memory context (approximate tokens)")
]


class LLMReaderConfig(LLMReaderSettings):
    max_tokens: int = Field(default=256, ge=1, description="reply budget for multiple-choice questions")
    open_max_tokens: int = Field(default=64, ge=1, description="reply budget for open questions")
    json_mode: bool = Field(default=False, description="ask for {'answer': letter} in JSON mode")
    max_context_tokens: MaxContextTokens = None
    instructions: str = PERSONAMEM_INSTRUCTIONS
    system_prompt: SystemPrompt = Field(default=MEMORY_SYSTEM_PROMPT, description="must contain {memory}")
    parser: Literal["lenient", "official"] = Field(
        default="lenient", description="lenient: memlab's parser; official: PersonaMem's extractor (exact letter set)"
    )


def memory_text(retrieval: Retrieval, max_context_tokens: int | None) -> str:
    context = retrieval.context.strip()
    if not context:
        return NO_MEMORY
    return truncate_front(context, max_context_tokens) if max_context_tokens else context


def format_options(options: Sequence[str]) -> str:
    return "\n".join(f"({letter}) {strip_option_label(o)}" for letter, o in zip(OPTION_LETTERS, options))


# ----------------------------------------------------------------------------- parsing
_FINAL = re.compile(r"<\s*final[_ ]answer\s*>", re.IGNORECASE)
_FINAL_CLOSE = re.compile(r"<\s*/\s*final[_ ]answer\s*>", re.IGNORECASE)


def _after_final_tag(reply: str) -> str | None:
    """The text after the last opening final-answer tag, closing tags removed (None: no tag)."""
    parts = _FINAL.split(reply)
    return _FINAL_CLOSE.sub(" ", parts[-1]) if len(parts) > 1 else None


_PAREN = re.compile(r"\(\s*([a-d])\s*\)", re.IGNORECASE)
_MARKED = re.compile(
    r"(?:final\s+answer|answer|option|choice)\s*(?:is|would\s+be|:|-)?\s*[:\-]?\s*\**\s*\(?\s*([a-d])\s*\)?(?![a-z])",
    re.IGNORECASE,
)
_BARE = re.compile(r"^\W*([a-d])\W*$", re.IGNORECASE)
_LEADING = re.compile(r"^\W*([a-d])\s*[\).:\]]", re.IGNORECASE)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def parse_choice(reply: str, options: Sequence[str], *, json_mode: bool = False) -> int | None:
    """The option index an LLM reply names, or None when it names none or several."""
    index = OPTION_LETTERS.index
    if json_mode or reply.strip().startswith("{"):
        try:
            value = json.loads(reply.strip())
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("answer"), str):
            letter = re.sub(r"[^a-d]", "", value["answer"].lower())
            if len(letter) == 1:
                return index(letter)
    # PersonaMem's format: whatever follows the last <final_answer> tag.
    tail = _after_final_tag(reply)
    segments = [tail, reply] if tail is not None and tail.strip() else [reply]
    for segment in segments:
        text = segment.strip()
        if not text:
            continue
        bare = _BARE.match(text) or _LEADING.match(text)
        if bare:
            return index(bare.group(1).lower())
        marked = _MARKED.findall(text)
        if marked:
            return index(marked[-1].lower())  # the last statement of the answer is the conclusion
        letters = {m.lower() for m in _PAREN.findall(text)}
        if len(letters) == 1:
            return index(letters.pop())
        if len(letters) > 1:
            continue  # several options discussed, none chosen: ambiguous
        normalized = _norm(text)
        hits = [
            i
            for i, o in enumerate(options)
            if _norm(strip_option_label(o)) and _norm(strip_option_label(o)) in normalized
        ]
        if len(hits) == 1:
            return hits[0]
    return None


def lenient_only(reply: str, question: Question, *, json_mode: bool = False) -> float:
    """1.0 when the lenient parser credits the correct option and the official extractor does not."""
    if question.answer is None:
        return 0.0
    lenient = parse_choice(reply, question.options, json_mode=json_mode) == question.answer
    return float(lenient and not extract_official(reply).credits(OPTION_LETTERS[question.answer]))


def choose(reply: str, question: Question, parser: str, *, json_mode: bool = False) -> int | None:
    """The option a reply names under ``parser`` (``official``: see ``OfficialExtraction.choice``)."""
    if parser == "official":
        return extract_official(reply).choice(question.answer)
    return parse_choice(reply, question.options, json_mode=json_mode)


def final_text(reply: str) -> str:
    """Free-form answer: the text after a final-answer tag if the model used one."""
    tail = (_after_final_tag(reply) or "").strip()
    return tail or reply.strip()


# ----------------------------------------------------------------------------- reader
class LLMReader(LLMBackedReader):
    name = "llm"
    description = "an LLM reads the retrieved memory and picks the option (PersonaMem prompt)"
    Config = LLMReaderConfig

    config: LLMReaderConfig

    def describe(self) -> str:
        # The parser is part of the identity: it decides which replies count as correct.
        return f"{self.name}:{self.model_name()}:{self.config.parser}"

    def messages(self, question: Question, retrieval: Retrieval) -> list[ChatMessage]:
        cfg = self.config
        system = cfg.system_prompt.format(memory=memory_text(retrieval, cfg.max_context_tokens))
        if question.is_multiple_choice:
            instructions = JSON_INSTRUCTIONS if cfg.json_mode else cfg.instructions
            user = f"{question.text}\n\n{instructions}\n\n{format_options(question.options)}"
        else:
            user = f"{question.text}\n\n{OPEN_INSTRUCTIONS}"
        return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        mc = question.is_multiple_choice
        json_mode = self.config.json_mode and mc
        response = self.ask_llm(
            self.messages(question, retrieval),
            json_mode=json_mode,
            temperature=self.config.llm.temperature,
            max_tokens=self.config.max_tokens if mc else self.config.open_max_tokens,
        )
        if isinstance(response, Answer):
            return response  # the request failed
        metadata = self.reply_metadata(response)
        if not mc:
            return text_answer(final_text(response.text), response, metadata)
        choice = choose(response.text, question, self.config.parser, json_mode=json_mode)
        metadata["parse_failure"] = choice is None
        metadata["parser"] = self.config.parser
        metadata["metrics"] = {"lenient_only": lenient_only(response.text, question, json_mode=json_mode)}
        return choice_answer(choice, question, response, metadata)
