"""The LLM-driven extractor: one prompt per session, answered with the operations as JSON.

Like Mem0's update step and PersonaTree's ADD/UPDATE/DELETE/NO_OP, the model sees the current
profile (entry ids, aspects, stances) and the session's user turns, and returns operations against
them. The reply is validated with pydantic and checked against the profile (ids exist, turn indexes
belong to the session, UPDATE/DELETE target a current entry); an invalid reply is sent back once
with the error, and a batch is applied only when every operation in it is valid.

Small local models often answer with broken JSON, prose, or ids they made up: every such reply
is counted (``invalid_replies``), a batch still invalid after the retry raises ``ExtractionError``
(the backend skips it and counts it as rejected), and nothing of it reaches the store. Every LLM
call's token usage goes to ``on_usage`` (the backend's ``record_llm_usage``), so ingestion cost
is reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memlab.errors import MemlabError
from memlab.llm.base import LLM
from memlab.types import Session
from memlab_plugins.profile.extract_rules import strip_label
from memlab_plugins.profile.models import Evidence, Operation, OperationFields, OpType
from memlab_plugins.profile.resolve import ProfileView

SYSTEM_PROMPT = """You maintain a long-term profile of a user from their conversations.
Each profile entry is one aspect of the user (an activity, a thing, a habit, a fact) with a stance:
"likes", "dislikes", "neutral" or "fact".
Read the user's turns of one session and return the changes to the profile as JSON:
{"operations": [{"op": "ADD" | "UPDATE" | "DELETE" | "NOOP", "entry_id": "<id of an existing entry, for UPDATE, DELETE, NOOP, or ADD reopening a closed entry>", "aspect": "<short noun phrase>", "value": "<one-sentence statement about the user>", "stance": "likes" | "dislikes" | "neutral" | "fact", "reason": "<why the user changed, in their words, or null>", "turn_index": <index of the turn that states it>}]}
Rules:
- ADD a new aspect the profile does not have.
- UPDATE an existing current entry when the user's view of it changed (give the new stance, value and the reason).
- DELETE an existing current entry when the user no longer does it or it stopped being true.
- NOOP when a turn repeats what the profile already says.
- Use only entry ids from the profile and turn indexes from the session. Reply with the JSON object only."""


class LLMOperation(OperationFields):
    """An operation as the model writes it: the evidence is the index of the turn that states it."""

    turn_index: int = Field(ge=0)

    def operation(self, evidence: Evidence) -> Operation:
        """The store's operation; raises ValidationError when the fields do not fit ``op``."""
        return Operation(**self.model_dump(exclude={"turn_index"}), evidence=[evidence])


class LLMReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    operations: list[LLMOperation]


class ExtractionError(MemlabError):
    """The LLM did not produce a valid batch of operations, even after one retry."""


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def _json_object(text: str | None) -> Any:
    """The reply's JSON; small models often wrap it in prose ("Here you go: {...} Hope this helps")."""
    body = _FENCE.sub("", (text or "").strip())
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        start = body.find("{")
        if start > 0:
            try:
                return json.JSONDecoder().raw_decode(body[start:])[0]
            except (json.JSONDecodeError, RecursionError):
                pass
        raise ValueError(f"the reply is not valid JSON: {exc}") from exc


def parse_reply(text: str, view: ProfileView, session: Session, first_turn: int, quote_chars: int) -> list[Operation]:
    """Validate a reply fully; raise ValueError naming the first problem (nothing is half-used)."""
    data = _json_object(text)
    if not isinstance(data, dict):
        raise ValueError(f"the reply is JSON but not an object with 'operations' (got {type(data).__name__})")
    try:
        reply = LLMReply.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"the reply does not match the schema: {exc}") from exc
    ops: list[Operation] = []
    state = {e.id: e.current for e in view.entries}
    turns = range(first_turn, first_turn + len(session.messages))
    for n, item in enumerate(reply.operations):
        where = f"operations[{n}] ({item.op.value})"
        if item.turn_index not in turns:
            raise ValueError(
                f"{where}: turn_index {item.turn_index} is not in this session ({turns.start}..{turns.stop - 1})"
            )
        if item.entry_id is not None and item.entry_id not in state:
            raise ValueError(f"{where}: unknown entry_id {item.entry_id!r}")
        if item.op in (OpType.UPDATE, OpType.DELETE) and not state.get(item.entry_id or "", False):
            raise ValueError(f"{where}: entry_id must name a current entry")
        if item.op is OpType.ADD and item.entry_id is not None and state[item.entry_id]:
            raise ValueError(f"{where}: entry {item.entry_id!r} is current; use UPDATE")
        quote = strip_label(session.messages[item.turn_index - first_turn].content)[:quote_chars]
        try:
            op = item.operation(Evidence(session_id=session.id, turn_index=item.turn_index, quote=quote))
        except ValidationError as exc:
            raise ValueError(f"{where}: {exc.errors()[0]['msg']}") from exc
        if item.entry_id is not None and item.op is not OpType.NOOP:
            state[item.entry_id] = item.op is not OpType.DELETE
        ops.append(op)
    return ops


@dataclass(eq=False)
class LLMExtractor:
    """Asks ``llm`` for a session's operations; ``max_profile_entries`` bounds the profile shown.

    The counters after the options add up over the extractor's life (the backend reports them).
    """

    source: ClassVar[str] = "llm"

    llm: LLM
    _: KW_ONLY
    max_profile_entries: int = 80
    quote_chars: int = 300
    max_turn_chars: int = 2000
    on_usage: Callable[[int, int, float], None] | None = None
    prompt_tokens: int = field(default=0, init=False)
    completion_tokens: int = field(default=0, init=False)
    calls: int = field(default=0, init=False)
    retries: int = field(default=0, init=False)
    invalid_replies: int = field(default=0, init=False)

    def prompt(self, session: Session, first_turn: int, view: ProfileView) -> str:
        shown = view.entries[-self.max_profile_entries :]
        profile = [
            {"entry_id": e.id, "aspect": e.aspect, "stance": e.stance.value, "current": e.current} for e in shown
        ]
        turns = [
            {"turn_index": first_turn + i, "text": strip_label(m.content)[: self.max_turn_chars]}
            for i, m in enumerate(session.messages)
            if m.role == "user"
        ]
        return (
            "Current profile:\n"
            + json.dumps(profile, ensure_ascii=False)
            + "\n\nUser turns of this session:\n"
            + json.dumps(turns, ensure_ascii=False)
        )

    def extract(self, session: Session, *, first_turn: int, view: ProfileView) -> list[Operation]:
        if not any(m.role == "user" and m.content.strip() for m in session.messages):
            return []
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": self.prompt(session, first_turn, view)},
        ]
        error = ""
        for attempt in range(2):
            response = self.llm.chat(messages, json_mode=True)
            self.calls += 1
            self.prompt_tokens += response.prompt_tokens
            self.completion_tokens += response.completion_tokens
            if self.on_usage is not None:
                cost = response.metadata.get("cost_usd", 0.0)
                self.on_usage(
                    response.prompt_tokens, response.completion_tokens, cost if isinstance(cost, (int, float)) else 0.0
                )
            try:
                return parse_reply(response.text, view, session, first_turn, self.quote_chars)
            except ValueError as exc:
                self.invalid_replies += 1
                error = str(exc)
                if attempt == 0:
                    self.retries += 1
                    messages += [
                        {"role": "assistant", "content": response.text},
                        {
                            "role": "user",
                            "content": f"That reply was invalid: {error}\nReply again with the corrected JSON object only.",
                        },
                    ]
        raise ExtractionError(f"session {session.id!r}: the LLM gave no valid operations after a retry: {error}")
