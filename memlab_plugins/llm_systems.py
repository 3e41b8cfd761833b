"""What the third-party memory systems that exist only with an LLM (Graphiti, LangMem) share in memlab:
``ExtractingMemory`` (their base class: the refusal without an LLM, one data directory per process,
calls served one at a time, the ledger, extraction counts, lifetime), ``LLMUsage`` (their calls and
tokens, counted where the library makes them), how a session part is shown to them, and the
provenance ledger.

The ledger (one SQLite file in the data directory) keeps what the libraries do not: turns per
(user, session), so a session continues across restarts; which session part each library object
(a Graphiti episode, a LangMem memory) came from, so retrieved items trace back to turns; the
identities the store was written with. SQLite commits are atomic and durable (``synchronous=FULL``);
it never holds conversation text, so erasing a user's text never has to look here.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import threading
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from memlab.errors import ConfigurationError, MemlabError
from memlab.locks import DirectoryLock
from memlab.memory import BackendConfig, FilterLike, IngestReport, Memory
from memlab.types import MemoryItem, Message, Retrieval, Session
from memlab_plugins.mem0_backend.ingest import ExtractionStats

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


def no_llm_message(backend: str) -> str:
    """The one line saying that ``backend`` extracts with an LLM and its config names none."""
    return (
        f"the {backend} backend extracts memories with an LLM and none is configured: "
        f"pass --{backend}.llm.base-url URL --{backend}.llm.model NAME (any OpenAI-compatible endpoint), "
        f"or set 'llm' in its config (docs/systems.md)"
    )


def require_llm(backend: str, llm: Mapping[str, Any] | None, chat_model: Any | None = None) -> None:
    """The one-line refusal of a backend that cannot exist without an LLM (never a silent fallback)."""
    if llm is None and chat_model is None:
        raise ConfigurationError(no_llm_message(backend))


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


class LLMUsage:
    """Calls, tokens and cost of the LLM requests a library makes, from whichever thread or task it
    makes them (``Memory.record_llm_usage`` only sees the thread that called ``ingest``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = self.prompt_tokens = self.completion_tokens = 0
        self.cost_usd = 0.0

    def add(self, prompt_tokens: int, completion_tokens: int, cost_usd: float) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.cost_usd += cost_usd

    def snapshot(self) -> tuple[int, int, int, float]:
        with self._lock:
            return self.calls, self.prompt_tokens, self.completion_tokens, self.cost_usd


class ExtractingMemory(Memory):
    """Base of the backends over a third-party library that extracts memories with an LLM.

    Subclasses set ``ledger_file``, implement ``_build(model)`` (open the library's store and wire the
    LLM, after the data directory is locked and the ledger open) and ``_close_library()``, and the
    ``Memory`` hooks. Every public call runs under one lock: the libraries' stores and the usage
    attributed to an ingest are not safe for concurrent callers.
    """

    concurrent_users = True  # every call runs under the backend's own lock
    config: ExtractingConfig
    ledger_file: ClassVar[str] = ""

    @classmethod
    def llm_problem(cls, config: BackendConfig) -> str | None:
        """No ``llm`` in the config: a run (which passes no chat model) cannot build this backend."""
        return no_llm_message(cls.name) if getattr(config, "llm", None) is None else None

    def __init__(
        self,
        config: BackendConfig | Mapping[str, Any] | None = None,
        *,
        data_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        model: Any | None = None,
    ) -> None:
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        require_llm(self.name, self.config.llm, model)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if self.data_dir is None:  # no data dir: everything lives in a private temp dir until close()
            self._tmp = tempfile.TemporaryDirectory(prefix=f"memlab-{self.name}-")
            self.root = Path(self._tmp.name)
        else:
            self.root = self.data_dir.resolve()
        self._calls = threading.RLock()
        self._ledger: ProvenanceLedger | None = None
        self._closed = False
        self.usage = LLMUsage()
        self.extraction = ExtractionStats()  # windows: the calls of the library's extraction per session part
        self._lock = DirectoryLock(self.root, purpose=f"memlab {self.name} backend")
        try:
            self._lock.acquire()  # first: a second process is refused before it touches any file
            self._ledger = ProvenanceLedger(self.root / self.ledger_file)
            self._build(model)
        except BaseException:
            self._release()
            raise

    @abstractmethod
    def _build(self, model: Any | None) -> None:
        """Open the library on ``self.root`` with the LLM (``model``, else ``config.llm``)."""

    def _close_library(self) -> None:
        """Close what ``_build`` opened (called once, also after a failed ``_build``)."""

    @property
    def ledger(self) -> ProvenanceLedger:
        if self._ledger is None:
            raise MemlabError(f"the {self.name} backend is closed")
        return self._ledger

    # ------------------------------------------------------------------ one call at a time
    def ingest(self, session: Session | Mapping[str, Any], *, user_id: str) -> IngestReport:
        with self._calls:
            return super().ingest(session, user_id=user_id)

    def retrieve(self, query: str, *, user_id: str, k: int | None = None, filters: FilterLike = None) -> Retrieval:
        with self._calls:
            return super().retrieve(query, user_id=user_id, k=k, filters=filters)

    def reset(self, user_id: str) -> None:
        with self._calls:
            super().reset(user_id)

    def list_memories(self, *, user_id: str, filters: FilterLike = None) -> list[MemoryItem]:
        with self._calls:
            return super().list_memories(user_id=user_id, filters=filters)

    def update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        with self._calls:
            return super().update(item_id, text, user_id=user_id)

    def delete(self, item_id: str, *, user_id: str) -> None:
        with self._calls:
            super().delete(item_id, user_id=user_id)

    def history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        with self._calls:
            return super().history(item_id, user_id=user_id)

    def export(self, user_id: str, *, filters: FilterLike = None) -> dict[str, Any]:
        with self._calls:
            return super().export(user_id, filters=filters)

    # ------------------------------------------------------------------ extraction and its cost
    @property
    def extraction_failures(self) -> list[str]:
        """Why session parts were skipped (the newest 100), named as mem0 and the profile name theirs."""
        return self.extraction.failures

    def extraction_stats(self) -> dict[str, int]:
        """Session parts sent (``windows``), skipped (``failed_windows``: the endpoint refused a request, or
        a reply was not what the library asked for; ``unparsed_replies`` counts the latter), and LLM calls."""
        return {**self.extraction.counts(), "llm_calls": self.usage.snapshot()[0]}

    def skip_or_raise(self, exc: Exception, where: str, *, refused: object | None, unreadable: bool) -> None:
        """Count a failed extraction and go on, or raise when it says nothing about one request alone."""
        if self.config.on_extraction_error == "raise" or (refused is None and not unreadable):
            raise exc
        if unreadable:
            self.extraction.unparsed_replies += 1
        self.extraction.skipped(f"{where}: {refused or exc}")

    def record_usage_since(self, before: tuple[int, int, int, float]) -> None:
        """Attribute the library's LLM usage since ``before`` to the ingest in flight."""
        _, prompt, completion, cost = self.usage.snapshot()
        self.record_llm_usage(prompt - before[1], completion - before[2], cost - before[3])

    # ------------------------------------------------------------------ turns and lifetime
    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        return self.ledger.turns(user_id, session_id)

    def _record_turns(self, user_id: str, session_id: str, total: int) -> None:
        self.ledger.set_turns(user_id, session_id, total)

    def close(self) -> None:
        with self._calls:
            if self._closed:
                return
            self._closed = True
            self._release()

    def _release(self) -> None:
        self._close_library()
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None
        self._lock.release()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
