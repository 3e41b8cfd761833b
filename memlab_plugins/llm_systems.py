"""What the third-party memory systems that exist only with an LLM (Graphiti, LangMem) share in memlab:
the refusal without an LLM, how a session part is shown to them, and the provenance ledger.

The ledger (one SQLite file in the data directory) keeps what the libraries do not: turns per
(user, session), so a session continues across restarts; which session part each library object
(a Graphiti episode, a LangMem memory) came from, so retrieved items trace back to turns; the
identities the store was written with. SQLite commits are atomic and durable (``synchronous=FULL``);
it never holds conversation text, so erasing a user's text never has to look here.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from memlab.errors import ConfigurationError, MemlabError
from memlab.memory import BackendConfig
from memlab.types import Message, Session

ON_ERROR_HELP = (
    "a session part whose extraction request the endpoint refuses (a prompt over the model's window, a 4xx) "
    "or whose reply the library cannot read: skip it and count it in extraction_stats, or raise; a bad setup "
    "or an endpoint still down after retries always raises"
)


class ExtractingConfig(BackendConfig):
    """Settings every LLM-extracting third-party backend has (the same nested ``llm`` as mem0's)."""

    llm: dict[str, Any] | None = Field(
        default=None,
        description="a memlab LLM config (memlab.llm.LLMConfig): --NAME.llm.base-url URL --NAME.llm.model M; required",
    )
    embedder: Literal["minilm", "sentence-transformers", "hashing", "bge-m3"] = Field(
        default="minilm", description="memlab embedder for the system's semantic search (MiniLM, packaged)"
    )
    embedder_model: str | None = Field(default=None, description="model id or local path for the embedder")
    on_extraction_error: Literal["skip", "raise"] = Field(default="skip", description=ON_ERROR_HELP)


def require_llm(backend: str, llm: Mapping[str, Any] | None, chat_model: Any | None = None) -> None:
    """The one-line refusal of a backend that cannot exist without an LLM (never a silent fallback)."""
    if llm is None and chat_model is None:
        raise ConfigurationError(
            f"the {backend} backend extracts memories with an LLM and none is configured: "
            f"pass --{backend}.llm.base-url URL --{backend}.llm.model NAME (any OpenAI-compatible endpoint), "
            f"or set 'llm' in its config (docs/systems.md)"
        )


def transcript(messages: list[Message]) -> str:
    """A session part as ``role: text`` lines (system messages left out: personas, not conversation)."""
    return "\n".join(f"{m.role}: {m.content.strip()}" for m in messages if m.role != "system" and m.content.strip())


def part_source(session: Session, first_turn: int, count: int) -> dict[str, Any]:
    """Provenance of an object extracted from turns ``first_turn..first_turn+count-1`` of ``session``."""
    source: dict[str, Any] = {
        "session_id": session.id,
        "turns": [{"session_id": session.id, "turn_index": first_turn + i} for i in range(count)],
    }
    when = next((m.timestamp for m in session.messages if m.timestamp is not None), None)
    if when is not None:
        source["timestamp"] = when.isoformat()
    return source


class ProvenanceLedger:
    """turns per (user, session), object id -> (user, source), meta identities. See the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS turns (user_id TEXT, session_id TEXT, total INTEGER NOT NULL,"
            " PRIMARY KEY (user_id, session_id));"
            "CREATE TABLE IF NOT EXISTS sources (object_id TEXT PRIMARY KEY, user_id TEXT NOT NULL,"
            " source TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        )
        self._db.commit()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise MemlabError(f"{self.path}: the ledger is closed")
        return self._db

    def turns(self, user_id: str, session_id: str) -> int:
        with self._lock:
            row = (
                self._conn()
                .execute("SELECT total FROM turns WHERE user_id = ? AND session_id = ?", (user_id, session_id))
                .fetchone()
            )
        return int(row[0]) if row else 0

    def set_turns(self, user_id: str, session_id: str, total: int) -> None:
        with self._lock:
            self._conn().execute("INSERT OR REPLACE INTO turns VALUES (?, ?, ?)", (user_id, session_id, total))
            self._conn().commit()

    def sessions(self, user_id: str) -> dict[str, int]:
        with self._lock:
            rows = self._conn().execute("SELECT session_id, total FROM turns WHERE user_id = ?", (user_id,)).fetchall()
        return {session: int(total) for session, total in rows}

    def add_sources(self, user_id: str, sources: Mapping[str, dict[str, Any]]) -> None:
        with self._lock:
            self._conn().executemany(
                "INSERT OR REPLACE INTO sources VALUES (?, ?, ?)",
                [(object_id, user_id, json.dumps(source)) for object_id, source in sources.items()],
            )
            self._conn().commit()

    def sources(self, object_ids: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """object id -> (user id, source) for the ids the ledger knows."""
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        with self._lock:
            for start in range(0, len(object_ids), 500):
                chunk = object_ids[start : start + 500]
                rows = (
                    self._conn()
                    .execute(
                        f"SELECT object_id, user_id, source FROM sources WHERE object_id IN ({','.join('?' * len(chunk))})",
                        chunk,
                    )
                    .fetchall()
                )
                found.update({row[0]: (row[1], json.loads(row[2])) for row in rows})
        return found

    def object_ids(self, user_id: str) -> list[str]:
        with self._lock:
            return [r[0] for r in self._conn().execute("SELECT object_id FROM sources WHERE user_id = ?", (user_id,))]

    def drop_sources(self, object_ids: list[str]) -> None:
        with self._lock:
            self._conn().executemany("DELETE FROM sources WHERE object_id = ?", [(i,) for i in object_ids])
            self._conn().commit()

    def forget_user(self, user_id: str) -> None:
        with self._lock:
            self._conn().execute("DELETE FROM turns WHERE user_id = ?", (user_id,))
            self._conn().execute("DELETE FROM sources WHERE user_id = ?", (user_id,))
            self._conn().commit()

    def check_meta(self, key: str, value: str, what: str) -> None:
        """Remember ``value`` under ``key``; a store reopened with another value is refused."""
        with self._lock:
            row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row is None:
                self._conn().execute("INSERT INTO meta VALUES (?, ?)", (key, value))
                self._conn().commit()
                return
        if row[0] != value:
            raise ConfigurationError(f"{what}: this data directory was written with {row[0]!r}, not {value!r}")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
