"""The blind control: a memory that remembers nothing."""

from __future__ import annotations

from memlab.memory import Memory
from memlab.types import Retrieval, Session


class NoMemory(Memory):
    name = "none"
    description = "Remembers nothing: the blind control every comparison needs."

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        return None

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        return Retrieval()

    def _reset(self, user_id: str) -> None:
        return None
