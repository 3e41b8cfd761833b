"""The blind control: a memory that remembers nothing."""

from __future__ import annotations

from typing import Any

from memlab.memory import BackendConfig, Capability, Memory, MemoryFilter
from memlab.types import Retrieval, Session


class NoMemory(Memory):
    name = "none"
    description = "Remembers nothing: the blind control every comparison needs."
    concurrent_users = True  # no state at all
    capabilities = frozenset({Capability.FILTER})  # nothing matches any filter either

    @classmethod
    def memory_depends_only_on_turns(cls, config: BackendConfig) -> bool:
        return True  # always empty, whatever arrived

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        return None

    def _retrieve(self, query: str, *, user_id: str, k: int, filters: MemoryFilter | None = None) -> Retrieval:
        return Retrieval()

    def _reset(self, user_id: str) -> None:
        return None

    def _export(self, user_id: str) -> dict[str, Any]:
        return {"items": []}  # nothing is ever stored
