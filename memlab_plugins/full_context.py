"""Full long context: the whole history, newest last, cut from the front to a token budget.

This is what a long-context model sees when memory is "just put everything in the prompt". With a
data directory, each user's history is an append-only JSON-lines file, so it survives restarts.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from memlab.memory import BackendConfig, Capability, Memory
from memlab.tokens import count_tokens
from memlab.types import MemoryItem, Retrieval, Session


class FullContextConfig(BackendConfig):
    max_tokens: int = Field(default=128_000, ge=1, description="budget; the oldest turns are dropped first")
    include_system: bool = Field(default=True, description="keep system messages (PersonaMem's persona prompts)")


class FullContextMemory(Memory):
    name = "full_context"
    description = "The whole history, newest last, truncated from the front to a token budget."
    Config = FullContextConfig
    capabilities = frozenset({Capability.LIST, Capability.PERSIST})
    config: FullContextConfig

    def __init__(self, config=None, *, data_dir=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, data_dir=data_dir)
        self._turns: dict[str, list[MemoryItem]] = {}

    def _file(self, user_id: str) -> Path | None:
        return self.data_dir / f"{user_id}.jsonl" if self.data_dir else None

    def _user_turns(self, user_id: str) -> list[MemoryItem]:
        if user_id not in self._turns:
            turns: list[MemoryItem] = []
            path = self._file(user_id)
            if path is not None and path.exists():
                with path.open(encoding="utf-8") as handle:
                    for line in handle:
                        if line.strip():
                            turns.append(MemoryItem.model_validate_json(line))
            self._turns[user_id] = turns
        return self._turns[user_id]

    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        turns = [t for t in self._user_turns(user_id) if t.source["session_id"] == session_id]
        return max((t.source["turn_index"] + 1 for t in turns), default=0)

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        new = []
        for offset, message in enumerate(session.messages):
            if message.role == "system" and not self.config.include_system:
                continue
            turn = first_turn + offset
            new.append(
                MemoryItem(
                    id=f"{session.id}#{turn}",
                    text=message.content,
                    source={"session_id": session.id, "turn_index": turn, "role": message.role},
                )
            )
        path = self._file(user_id)
        if path is not None and new:
            with path.open("a", encoding="utf-8") as handle:
                handle.write("".join(item.model_dump_json() + "\n" for item in new))
        self._user_turns(user_id).extend(new)

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        # k does not apply: the point of this backend is to return everything that fits.
        kept: list[MemoryItem] = []
        lines: list[str] = []
        budget = self.config.max_tokens
        for item in reversed(self._user_turns(user_id)):
            line = f"{item.source['role']}: {item.text}"
            cost = count_tokens(line)
            if cost > budget:
                break
            budget -= cost
            kept.append(item)
            lines.append(line)
        kept.reverse()
        lines.reverse()
        return Retrieval(items=kept, context="\n".join(lines), tokens=self.config.max_tokens - budget)

    def _reset(self, user_id: str) -> None:
        self._turns.pop(user_id, None)
        path = self._file(user_id)
        if path is not None and path.exists():
            path.unlink()

    def _list(self, user_id: str) -> list[MemoryItem]:
        return list(self._user_turns(user_id))
