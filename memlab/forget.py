"""Forget requests made in conversation ("please forget that I take weekend trips"), honoured by memory.

PersonaMem-v2's ``ask_to_forget`` questions test what a memory layer does when a user asks it to
forget something: the correct answer is the one that does not use it. A backend with the
``forget_requests`` option (``--<backend>.forget-requests true``; on by default in the chatbot layer,
``MemoryClient``) honours such a request when it ingests it: the request's subject is matched against
what the backend stores for that user and every matching item is deleted, the request turn itself
included (it restates what is to be forgotten), so the forgotten preference no longer reaches
``retrieve``, ``list_memories`` or ``export``.

- :func:`find_forget_requests`: the rule-based detector (no LLM): a user turn that asks to forget,
  not remember, stop remembering, or remove something from memory; "don't forget to ..." (a request
  to remember) and "I forgot ..." are not requests. The subject is the rest of that sentence.
- :func:`mentions`: whether a stored text is about a subject: at least ``MATCH_SHARE`` of the
  subject's content words (lowercased, stop words left out, plural/verb ``-s`` folded) occur in it.
  A sibling preference stated in the very same words ("I keep fit with yoga" / "... with boxing")
  can be taken with it: that is what the LLM matcher is for.
- A backend with an LLM (profile's and mem0's extractors) may pass its own ``matcher`` to
  :func:`honour_forget_requests`: the detector still finds the request, the LLM decides which
  stored items it refers to (implicit paraphrases that share few words with the request).

The hook runs after the backend has stored the session (``Memory.ingest``), through the backend's
own ``list``/``delete`` capabilities, so every backend that can list and delete honours requests
the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from memlab.types import MemoryItem, Session

if TYPE_CHECKING:
    from memlab.memory import Memory

# The backend option, one definition for every backend that can delete.
ForgetRequests = Annotated[
    bool,
    Field(
        description="honour in-conversation forget requests ('please forget that I ...'): delete what they "
        "refer to (on by default in the chatbot layer, MemoryClient; off for benchmark replays unless set)"
    ),
]

MATCH_SHARE = 0.5  # share of the subject's content words a stored text must contain
MIN_SUBJECT_WORDS = 1

_STOP = frozenset(
    """a an the i me my mine myself you your yours we our us it its this that these those he she him her his
    they them their is am are was were be been being do does did have has had to of in on at for with about
    from by as and or but so if then than too very just really also please any anything all some more
    what which who whom when where why how can could would should will shall may might must not no
    up down out over into onto off again there here now still ever""".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"[.!?\n]")
# Requests to forget; "(?<!n't )" etc. are handled by _NOT_A_REQUEST below.
_REQUEST = re.compile(
    r"\b(?:"
    r"forget\s+(?:about\s+|that\s+|the\s+fact\s+that\s+)?"
    r"|(?:do\s+not|don't|dont)\s+(?:remember|keep\s+in\s+mind|store|keep\s+track\s+of)\s+(?:that\s+)?"
    r"|stop\s+remembering\s+(?:that\s+)?"
    r"|(?:remove|delete|erase|wipe)\s+(?=.+?\bfrom\s+(?:your\s+)?memory)"
    r")(?P<subject>[^.!?\n]+)",
    re.IGNORECASE,
)
_NOT_A_REQUEST = re.compile(r"\b(?:don't|do\s+not|dont|never|not|won't|will\s+not)\s+forget\b", re.IGNORECASE)
_MEMORY_TAIL = re.compile(r"\s+from\s+(?:your\s+)?memory\b.*$", re.IGNORECASE)
_LEADING = re.compile(r"^(?:that|about|the\s+fact\s+that)\s+", re.IGNORECASE)
_TRAILING = re.compile(r"\s+(?:in|from)\s+(?:your\s+)?memory\b.*$|[\s,;:'\"]+$", re.IGNORECASE)


@dataclass(frozen=True)
class ForgetRequest:
    """A user turn asking to forget ``subject``."""

    subject: str
    turn_index: int  # index of the turn in its session part
    text: str


def content_words(text: str) -> set[str]:
    """Lowercased content words, stop words left out, a final -s folded (trips ~ trip, takes ~ take)."""
    words = set()
    for word in _WORD.findall(text.lower()):
        word = word.split("'", 1)[0]
        if word in _STOP or len(word) < 2:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return words


def find_forget_requests(session: Session) -> list[ForgetRequest]:
    """User turns of ``session`` that ask to forget something, with what they ask to forget."""
    found: list[ForgetRequest] = []
    for index, message in enumerate(session.messages):
        if message.role != "user":
            continue
        for sentence in _sentences(message.content):
            if _NOT_A_REQUEST.search(sentence):
                continue
            match = _REQUEST.search(sentence)
            if match is None:
                continue
            subject = _TRAILING.sub("", _LEADING.sub("", _MEMORY_TAIL.sub("", match.group("subject").strip())))
            if len(content_words(subject)) >= MIN_SUBJECT_WORDS and subject.lower() not in ("it", "this", "that"):
                found.append(ForgetRequest(subject=subject, turn_index=index, text=message.content))
    return found


def _sentences(text: str) -> list[str]:
    parts, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        parts.append(text[start : match.end()])
        start = match.end()
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def mentions(text: str, subject: str) -> bool:
    """Whether ``text`` is about ``subject`` (enough of the subject's content words occur in it)."""
    wanted = content_words(subject)
    if not wanted:
        return False
    return len(wanted & content_words(text)) / len(wanted) >= MATCH_SHARE


# (request, the user's stored items) -> ids of the items it refers to
Matcher = Callable[[ForgetRequest, Sequence[MemoryItem]], list[str]]


def word_matcher(request: ForgetRequest, items: Sequence[MemoryItem]) -> list[str]:
    """The rule-based matcher: items whose text :func:`mentions` the request's subject, and the
    stored request turn itself."""
    return [item.id for item in items if mentions(item.text, request.subject) or request.text.strip() in item.text]


def honour_forget_requests(
    memory: Memory, session: Session, *, user_id: str, matcher: Matcher | None = None
) -> list[str]:
    """Delete what the forget requests of ``session`` refer to from ``user_id``'s memory (after the
    session was stored). Returns the ids deleted; nothing happens when the session has no request."""
    from memlab.memory import Capability

    requests = find_forget_requests(session)
    if not requests or not (memory.supports(Capability.LIST) and memory.supports(Capability.DELETE)):
        return []
    match = matcher or word_matcher
    deleted: list[str] = []
    for request in requests:
        items = memory.list_memories(user_id=user_id)
        for item_id in dict.fromkeys(match(request, items)):
            if item_id in deleted:
                continue
            memory.delete(item_id, user_id=user_id)
            deleted.append(item_id)
    return deleted


# The LLM path's prompt (memlab's own): which stored items a forget request refers to.
LLM_MATCH_PROMPT = (
    "The user asked their assistant to forget something. Decide which of the assistant's stored memories "
    "the request refers to: memories that state, imply or rely on what the user wants forgotten.\n\n"
    "Request: {request}\n\nStored memories:\n{items}\n\n"
    'Reply with JSON only: {{"forget": [<numbers of the memories to delete>]}}'
)


def llm_matcher(
    llm: object, *, max_items: int = 200, on_usage: Callable[[int, int, float], None] | None = None
) -> Matcher:
    """A matcher that asks ``llm`` (a memlab LLM) which items a request refers to, plus the request
    turn itself and what the word matcher finds (an LLM that misses an explicit restatement must not
    keep it). A reply that is not the JSON asked for falls back to the word matcher alone.
    ``on_usage`` (a backend's ``record_llm_usage``) gets each call's tokens and cost."""
    import json

    def match(request: ForgetRequest, items: Sequence[MemoryItem]) -> list[str]:
        shown = list(items)[-max_items:]
        listing = "\n".join(f"{number}. {item.text[:400]}" for number, item in enumerate(shown, start=1))
        prompt = LLM_MATCH_PROMPT.format(request=request.text.strip(), items=listing or "(none)")
        chosen = word_matcher(request, items)
        try:
            reply = llm.chat([{"role": "user", "content": prompt}], json_mode=True)  # type: ignore[attr-defined]
            if on_usage is not None:
                cost = reply.metadata.get("cost_usd", 0.0)
                on_usage(reply.prompt_tokens, reply.completion_tokens, cost if isinstance(cost, (int, float)) else 0.0)
            numbers = json.loads(reply.text).get("forget", [])
        except (ValueError, AttributeError, TypeError):
            return chosen
        for number in numbers if isinstance(numbers, list) else []:
            if isinstance(number, int) and 1 <= number <= len(shown):
                chosen.append(shown[number - 1].id)
        return list(dict.fromkeys(chosen))

    return match
