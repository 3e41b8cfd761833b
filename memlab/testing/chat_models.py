"""Deterministic LangChain chat models for tests: real ``BaseChatModel`` code that runs locally.

``FunctionChatModel`` answers every request with ``respond(messages)`` and records the messages it
was sent, so a test can check both what a library asks and what it does with the reply::

    model = FunctionChatModel(respond=lambda messages: '{"memory": []}')
    model.invoke([("system", "..."), ("human", "...")]).content   # '{"memory": []}'
    model.calls[-1]                                                 # the messages of that call

``mem0_extraction_reply`` is a rule-based stand-in for the LLM behind mem0's fact extraction
(mem0ai 2.x, ``Memory.add(infer=True)``): it reads the "## New Messages" section of mem0's
additive-extraction prompt and returns the JSON mem0 parses, one memory per first-person sentence
of the user. Use it as ``FunctionChatModel(respond=mem0_extraction_reply)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import Field

from memlab.llm.base import LLMResponse
from memlab.llm.langchain_adapter import TextChatModel
from memlab.tokens import count_tokens


class FunctionChatModel(TextChatModel):
    """A chat model whose reply is ``respond(messages)``; every call's messages land in ``calls``."""

    respond: Callable[[list[BaseMessage]], str]
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "memlab-function"

    def _reply(self, messages: list[BaseMessage], **kwargs: Any) -> LLMResponse:
        self.calls.append(list(messages))
        text = self.respond(list(messages))
        if not isinstance(text, str):
            raise TypeError(f"respond() must return a string, got {type(text).__name__}")
        prompt_tokens = sum(count_tokens(_content(m)) for m in messages)
        return LLMResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=count_tokens(text))


def _content(message: BaseMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else json.dumps(content)


# --------------------------------------------------------------------------- mem0 rules
MEM0_EXTRACTION_MARKER = "You are a Memory Extractor"
_SECTION = re.compile(r"^## New Messages\n(?P<body>.*?)\n\n## ", re.S | re.M)
_LINE = re.compile(r"^(?P<role>system|user|assistant): (?P<content>.*)$")
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|my|me|mine)\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def mem0_new_messages(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    """(role, content) of the "## New Messages" section of mem0's extraction prompt.

    Raises ValueError for any other prompt, so a test notices when mem0 changes what it sends.
    """
    if len(messages) != 2 or MEM0_EXTRACTION_MARKER not in _content(messages[0]):
        raise ValueError("not mem0's additive extraction prompt (system: Memory Extractor, then the user prompt)")
    match = _SECTION.search(_content(messages[1]))
    if match is None:
        raise ValueError("mem0's extraction prompt has no '## New Messages' section")
    out: list[tuple[str, str]] = []
    for line in match.group("body").splitlines():
        parsed = _LINE.match(line)
        if parsed:
            out.append((parsed.group("role"), parsed.group("content")))
        elif out:  # a message spanning several lines
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
    return out


def mem0_extraction_reply(messages: list[BaseMessage]) -> str:
    """mem0's expected JSON: ``{"memory": [{"id": "0", "text": ..., "attributed_to": "user"}, ...]}``
    with one memory per user sentence that speaks in the first person ("User said: <sentence>")."""
    memories: list[dict[str, str]] = []
    for role, content in mem0_new_messages(messages):
        if role != "user":
            continue
        for sentence in _SENTENCE_END.split(content.strip()):
            if _FIRST_PERSON.search(sentence):
                memories.append({"id": str(len(memories)), "text": f"User said: {sentence}", "attributed_to": "user"})
    return json.dumps({"memory": memories})


class Mem0ExtractionChatModel(FunctionChatModel):
    """``FunctionChatModel`` answering mem0's extraction prompt by the rules above; importable by name,
    e.g. ``{"provider": "langchain", "langchain_class": "memlab.testing.chat_models:Mem0ExtractionChatModel"}``
    as a memlab LLM config, to run mem0 with ``infer=True`` offline."""

    respond: Callable[[list[BaseMessage]], str] = mem0_extraction_reply
