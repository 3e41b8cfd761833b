"""``profile``: a dynamic, versioned user profile changed through ADD / UPDATE / DELETE / NOOP.

Each session's user turns go through an extractor (``rules``: LLM-free cue phrases; ``llm``: one
JSON prompt per session) that proposes operations against the user's profile; the store applies
them atomically, closing old versions instead of overwriting them. Retrieval returns the entries
most similar to the query with, for entries that changed, their earlier versions and the reasons,
plus (optionally) a few supporting raw user turns.

Item ids: a profile entry is ``p_<hex>`` (a version ``p_<hex>.v<n>``); a raw user turn is
``<session id>#<turn index>``. Both kinds are listed by ``list_memories`` (current entries, then
closed ones, then turns; ``metadata.kind`` and ``metadata.current`` say which), and ``delete`` removes either for real: a deleted entry keeps only
the shape of its version chain, no text (``store.ProfileStore.erase_entry``), and is never
rendered again. One process at a time opens a data directory (``memlab.locks.DirectoryLock``).

Storage is ``store.ProfileStore`` (SQLite in the data directory) or, with ``store:
postgresql://...``, ``pg_store.PgProfileStore`` (the same queries on PostgreSQL): chosen in
``_make_store``. Every write of one user runs inside the store's ``user_scope`` and every read
inside its ``snapshot`` (no-ops on SQLite; a per-user advisory lock and a REPEATABLE READ
transaction on PostgreSQL, so N workers can share one database).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sqlite3
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import Field

from memlab.embedders import Embedder, embed_ahead, get_embedder
from memlab.errors import MemlabError, NotFoundError, ReadOnlyItemError
from memlab.forget import ForgetRequests
from memlab.llm.errors import refused_request
from memlab.locks import DirectoryLock
from memlab.memory import BackendConfig, Capability, Memory, MemoryFilter, render_turns, turn_source
from memlab.pg import StoreUrl
from memlab.types import MemoryItem, Retrieval, Session
from memlab_plugins.profile.extract_rules import RuleExtractor, stance_of, strip_label
from memlab_plugins.profile.models import Operation, OperationRecord, OpType, ProfileEntry
from memlab_plugins.profile.render import render_profile, render_state
from memlab_plugins.profile.resolve import ProfileView, Resolver
from memlab_plugins.profile.store import ProfileStore, ProfileStoreError

log = logging.getLogger(__name__)

STORE_FILE = "profile.sqlite"
_VERSION_SUFFIX = re.compile(r"\.v\d+$")  # "<entry id>.v<n>" names one version of an entry
_TURN_ID = re.compile(r"^(?P<session>.+)#(?P<turn>\d+)$")  # "<session id>#<turn index>" names a raw turn


def _entry_of(item_id: str) -> str:
    return _VERSION_SUFFIX.sub("", item_id)


Method = TypeVar("Method", bound=Callable[..., Any])


def _writes(method: Method) -> Method:
    """A write of one user (``user_id`` keyword, or the first argument) inside the store's ``user_scope``."""

    @functools.wraps(method)
    def scoped(self: ProfileMemory, *args: Any, **kwargs: Any) -> Any:
        with self.store.user_scope(kwargs["user_id"] if "user_id" in kwargs else args[0]):
            return method(self, *args, **kwargs)

    return scoped  # type: ignore[return-value]


def _reads(method: Method) -> Method:
    """Reads that must see one consistent state: inside the store's ``snapshot``."""

    @functools.wraps(method)
    def consistent(self: ProfileMemory, *args: Any, **kwargs: Any) -> Any:
        with self.store.snapshot():
            return method(self, *args, **kwargs)

    return consistent  # type: ignore[return-value]


class ProfileConfig(BackendConfig):
    extractor: Literal["rules", "llm"] = Field(
        default="rules", description="rules: LLM-free cue phrases; llm: JSON ops"
    )
    llm: dict[str, Any] | None = Field(default=None, description="config for memlab.llm.make_llm (extractor=llm)")
    embedder: str = Field(default="minilm", description="minilm | sentence-transformers | hashing | bge-m3")
    model: str | None = Field(default=None, description="embedder model id or local path")
    aspect_threshold: float = Field(
        default=0.6, ge=-1.0, le=1.0, description="cosine similarity at which a statement is about an existing entry"
    )
    max_statements_per_turn: int = Field(default=2, ge=1, description="rules extractor: statements taken per user turn")
    # Part of top_k (at most half). 5 measured better than 0 on the PersonaMem dev history (docs/profile.md).
    supporting_turns: int = Field(default=5, ge=0, description="raw user turns added to each retrieval")
    max_versions: int = Field(default=4, ge=1, description="versions of one entry shown in the rendered context")
    quote_chars: int = Field(default=300, ge=40, description="longest quote kept as evidence and shown")
    llm_max_profile_entries: int = Field(default=80, ge=1, description="entries shown to the LLM extractor")
    on_extraction_error: Literal["skip", "raise"] = Field(
        default="skip",
        description="an LLM batch still invalid after a retry, or a session the endpoint refuses (over the model's "
        "window): skip the session's ops (its turns are kept), or raise; a bad setup or a down endpoint always raises",
    )
    # PostgreSQL store (memlab_plugins.profile.pg_store.PgProfileStore): several workers and hosts share one database.
    store: StoreUrl = Field(
        default=None,
        description="None/'file' = SQLite in the data directory; postgresql://user@host:5432/db = that database",
    )
    pool_size: int = Field(default=4, ge=1, description="PostgreSQL store: connections per process")
    forget_requests: ForgetRequests = False


_INDEXED_USERS = 16  # users whose retrieval index stays in RAM (the runner has one per job; a service many)


@dataclass
class _RetrievalIndex:
    """One user's entries and raw turns with their vectors, as of the store's change ``stamp``."""

    stamp: tuple[int, int] | None
    keys: list[tuple[str, int]]  # (entry id, version) per row of ``vectors``
    vectors: np.ndarray | None
    chains: dict[str, list[ProfileEntry]]
    turns: list[dict[str, Any]]
    turn_vectors: np.ndarray | None

    def __post_init__(self) -> None:
        self.entries = list(dict.fromkeys(entry_id for entry_id, _ in self.keys))  # first appearance order
        position = {entry_id: i for i, entry_id in enumerate(self.entries)}
        self.rows = np.array([position[entry_id] for entry_id, _ in self.keys], dtype=np.int64)

    def best_per_entry(self, q: np.ndarray) -> dict[str, float]:
        """Each entry's best similarity over its versions (entries in first-appearance order)."""
        if not self.keys or self.vectors is None:
            return {}
        best = np.full(len(self.entries), -1.0)
        np.maximum.at(best, self.rows, (self.vectors @ q).astype(np.float64))
        return dict(zip(self.entries, best.tolist()))


class ProfileMemory(Memory):
    name = "profile"
    description = (
        "Versioned user profile (SQLite) updated by ADD/UPDATE/DELETE/NOOP operations; retrieval shows the "
        "current entries and, for changed ones, the earlier versions with reasons."
    )
    concurrent_users = True  # the SQLite store serialises its own writes
    Config = ProfileConfig
    capabilities = frozenset(
        {
            Capability.LIST,
            Capability.UPDATE,
            Capability.DELETE,
            Capability.HISTORY,
            Capability.PERSIST,
            Capability.FILTER,
        }
    )
    config: ProfileConfig

    @classmethod
    def memory_depends_only_on_turns(cls, config: BackendConfig) -> bool:
        """The rules extractor reads one user turn at a time and resolves each statement against the
        profile as it stands after the turns before it, so a session ingested in parts gives the same
        profile as the whole session (tests/test_profile_privacy.py checks every cut point). The LLM extractor sees a
        whole ingest call in one prompt, so how a session is split changes what it extracts."""
        parsed = cls.parse_config(config)  # a forget request acts when its ingest call ends: split-dependent
        return parsed.extractor == "rules" and not parsed.forget_requests  # type: ignore[attr-defined]

    def __init__(
        self, config=None, *, data_dir=None, cache_dir=None, embedder: Embedder | None = None, llm=None
    ) -> None:
        super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
        # One writer per data directory: a second process fails here with "... is in use". With a
        # database the database is the state: the data directory is not locked, N workers share it.
        self._dir_lock = (
            DirectoryLock(self.data_dir, purpose="memlab profile backend").acquire()
            if self.data_dir and self.config.store is None
            else None
        )
        try:
            self._open(embedder, llm)
        except BaseException:
            self.close()
            raise

    def _open(self, embedder: Embedder | None, llm: Any) -> None:
        self.embedder = embedder or get_embedder(self.config.embedder, self.config.model, cache_dir=self.cache_dir)
        self.store = self._make_store()
        if self.store.get_meta("embedder") not in (None, self.embedder.name):
            self.store.revectorize(self._vectorize)
        self.store.set_meta("embedder", self.embedder.name)
        self.resolver = Resolver(self.embedder, threshold=self.config.aspect_threshold)
        self.rules = RuleExtractor(
            max_per_turn=self.config.max_statements_per_turn, quote_chars=self.config.quote_chars
        )
        self.llm_extractor = None
        if self.config.extractor == "llm":
            from memlab_plugins.profile.extract_llm import LLMExtractor

            if llm is None:
                if self.config.llm is None:
                    raise MemlabError("backend 'profile': extractor 'llm' needs an 'llm' config (or an llm= object)")
                from memlab.llm.config import make_llm  # lazy: providers are optional

                llm = make_llm(self.config.llm)
            self.llm_extractor = LLMExtractor(
                llm,
                max_profile_entries=self.config.llm_max_profile_entries,
                quote_chars=self.config.quote_chars,
                on_usage=self.record_llm_usage,
            )
        self._indexes: OrderedDict[str, _RetrievalIndex] = OrderedDict()  # per user, most recent last
        self.extraction_failures: list[str] = []
        # Counts of what a (small) LLM got wrong while ingesting; shown in ``extraction_stats``/export.
        self.rejected_batches = 0

    def _make_store(self) -> ProfileStore:
        """The store the ``store`` setting names: SQLite in the data directory, or a PostgreSQL database."""
        if self.config.store is not None:
            from memlab_plugins.profile.pg_store import PgProfileStore  # lazy: psycopg is an optional extra

            return PgProfileStore(str(self.config.store), pool_size=self.config.pool_size)
        return ProfileStore(self.data_dir / STORE_FILE if self.data_dir else None)

    # ------------------------------------------------------------------ helpers
    def _vectorize(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed(texts)

    def _view(self, user_id: str) -> ProfileView:
        versions = self.store.entries(user_id, current_only=False)
        keys, vectors = self.store.vectors(user_id, "aspect_vector")
        if vectors is None:
            vectors = self._vectorize([v.aspect for v in versions]) if versions else np.zeros((0, self.embedder.dim))
        by_key = {k: vectors[i] for i, k in enumerate(keys)}
        return ProfileView.from_versions(versions, by_key, self.embedder.dim)

    @staticmethod
    def _session_time(session: Session) -> datetime | None:
        """The session's date from its metadata (a statement's own message timestamp comes first)."""
        for key in ("timestamp", "date", "date_time"):
            value = session.metadata.get(key)
            if isinstance(value, datetime):
                return value
            if isinstance(value, str):
                try:
                    return datetime.fromisoformat(value)
                except ValueError:
                    continue
        return None

    # ------------------------------------------------------------------ Memory
    def ingest(self, session: Session | Any, *, user_id: str) -> Any:
        if self.config.store:  # PostgreSQL text cannot hold U+0000: a clear error before any write
            from memlab.pg import reject_nul

            reject_nul(session)
        return self._ingest_in_scope(session, user_id=user_id)

    @_writes  # the whole read-resolve-write of one user (turn numbering included) under its scope
    def _ingest_in_scope(self, session: Session | Any, *, user_id: str) -> Any:
        return super().ingest(session, user_id=user_id)

    def check_ready(self) -> None:
        """A real read of the store (SQLite file or PostgreSQL): its schema version."""
        super().check_ready()
        self.store.get_meta("schema_version")

    def _next_turn_index(self, user_id: str, session_id: str) -> int:
        return self.store.session_turns(user_id, session_id)

    def _ingest(self, session: Session, *, user_id: str, first_turn: int) -> None:
        view = self._view(user_id)
        source = "rules"
        vectorize = self._vectorize
        if self.llm_extractor is not None:
            source = "llm"
            from memlab_plugins.profile.extract_llm import ExtractionError

            try:
                ops = self.llm_extractor.extract(session, first_turn=first_turn, view=view)
            except Exception as exc:
                # Invalid replies after a retry, or a request the endpoint refused (a session over the
                # model's window): skip the operations, keep the turns. A broken setup still raises.
                refused = refused_request(exc)
                if not (isinstance(exc, ExtractionError) or refused) or self.config.on_extraction_error == "raise":
                    raise
                self._reject(str(exc) if refused is None else f"session {session.id!r}: the LLM refused it: {refused}")
                ops = []
        else:
            statements = self.rules.statements(session.messages, first_turn)
            ops = self.resolver.resolve(statements, view, session.id)
            known = self.resolver.vectors

            def vectorize(texts: list[str]) -> np.ndarray:
                missing = [t for t in texts if t not in known]
                if missing:
                    known.update(zip(missing, self._vectorize(missing)))
                return np.stack([known[t] for t in texts])

        ops = [_with_turn_facts(op, session, first_turn) for op in ops]
        user_turns = [
            (first_turn + i, m.role, strip_label(m.content), turn_source(session, first_turn + i, m).get("timestamp"))
            for i, m in enumerate(session.messages)
            if m.role == "user" and m.content.strip()
        ]
        vectors: list[np.ndarray | None] = [None] * len(user_turns)
        if self.config.supporting_turns and user_turns:
            vectors = list(self._vectorize([t[2] for t in user_turns]))
        store_session = lambda batch: self.store.apply_session(  # noqa: E731
            user_id,
            session.id,
            batch,
            vectorize=vectorize,
            source=source,
            session_time=self._session_time(session),
            turn_times={first_turn + i: m.timestamp for i, m in enumerate(session.messages) if m.timestamp is not None},
            turns_total=first_turn + len(session.messages),
            new_turns=[(*t, v) for t, v in zip(user_turns, vectors)],
        )
        try:
            store_session(ops)
        except ProfileStoreError as exc:
            # A batch the store refuses (an LLM's ops that contradict each other) is dropped whole;
            # the session's turns and progress are still stored, in one transaction as always.
            if source != "llm" or self.config.on_extraction_error == "raise":
                raise
            self._reject(f"session {session.id!r}: the store refused the batch: {exc}")
            store_session([])

    def _reject(self, reason: str) -> None:
        log.warning("profile: %s; the session's turns are stored, its operations skipped", reason)
        self.rejected_batches += 1
        self.extraction_failures.append(reason)

    def extraction_stats(self) -> dict[str, int]:
        """What the LLM extractor did in this process: calls, retries, invalid replies, rejected batches."""
        llm = self.llm_extractor
        return {
            "llm_calls": llm.calls if llm else 0,
            "retries": llm.retries if llm else 0,
            "invalid_replies": llm.invalid_replies if llm else 0,
            "rejected_batches": self.rejected_batches,
        }

    def _chains(self, user_id: str) -> dict[str, list[ProfileEntry]]:
        chains: dict[str, list[ProfileEntry]] = {}
        for version in self.store.entries(user_id, current_only=False):
            chains.setdefault(version.id, []).append(version)
        return chains

    def prepare(self, queries):
        """Embed the known queries in one batch, ahead of the replay."""
        embed_ahead(self.embedder, [q for q in queries if q.strip()], query=True)

    def _change_stamp(self) -> tuple[int, int] | None:
        """Changes to the store since it opened, or None when they cannot be seen from here.

        A SQLite store counts its own connection's changes (``total_changes``) and others' commits
        (``PRAGMA data_version``); a shared database (PostgreSQL) has no such cheap counter.
        """
        db = getattr(self.store, "db", None)
        if not isinstance(db, sqlite3.Connection):
            return None
        with self.store._lock:
            return db.total_changes, int(db.execute("PRAGMA data_version").fetchone()[0])

    def _retrieval_index(self, user_id: str) -> _RetrievalIndex:
        """What every retrieve of ``user_id`` reads (entries, their vectors, raw turns, theirs), loaded once
        per change of the store instead of once per query."""
        stamp = self._change_stamp()  # read before the data: a change in between only costs a reload
        cached = self._indexes.get(user_id)
        if cached is not None and stamp is not None and cached.stamp == stamp:
            self._indexes.move_to_end(user_id)
            return cached
        keys, vectors = self.store.vectors(user_id, "text_vector")
        chains = self._chains(user_id)
        if keys and vectors is None:
            flat = [v for c in chains.values() for v in c]
            vectors = self._vectorize([v.text for v in flat])
            keys = [(v.id, v.version) for v in flat]
        turns, turn_vectors = self.store.turns(user_id) if self.config.supporting_turns else ([], None)
        if turns and turn_vectors is None:
            turn_vectors = self._vectorize([t["content"] for t in turns])
        index = _RetrievalIndex(stamp, keys, vectors, chains, turns, turn_vectors)
        if stamp is not None:
            self._indexes[user_id] = index
            while len(self._indexes) > _INDEXED_USERS:
                self._indexes.popitem(last=False)
        return index

    @_reads
    def _retrieve(self, query: str, *, user_id: str, k: int, filters: MemoryFilter | None = None) -> Retrieval:
        if not query.strip():
            return Retrieval()
        index = self._retrieval_index(user_id)
        chains = index.chains
        q = self.embedder.embed([query], query=True)[0]
        best = index.best_per_entry(q)
        if filters is not None:  # entries whose evidence turns the filter selects
            best = {e: s for e, s in best.items() if filters.matches(self._chain_item(chains[e]))}
        # k bounds all items: supporting turns take at most half of it (all of it without entries).
        n_turns = min(self.config.supporting_turns, k // 2 if best else k)
        chosen = sorted(best, key=lambda e: -best[e])[: k - n_turns]
        # Oldest change first, most recently changed last: the order a transcript would have.
        chosen.sort(key=lambda e: (chains[e][-1].valid_to or chains[e][-1].valid_from, e))
        items = [self._chain_item(chains[e], best[e]) for e in chosen]
        context = render_profile(
            [chains[e] for e in chosen], quote_chars=self.config.quote_chars, max_versions=self.config.max_versions
        )
        support = self._supporting(
            index,
            q,
            n_turns,
            chosen_turns={(t["session_id"], t["turn_index"]) for i in items for t in i.source["turns"]},
            filters=filters,
        )
        if support:
            items += support
            context += "\nSupporting turns:\n" + render_turns(support)
        return Retrieval(items=items, context=context)

    def _supporting(
        self,
        index: _RetrievalIndex,
        q: np.ndarray,
        n: int,
        chosen_turns: set[tuple[str, int]],
        filters: MemoryFilter | None = None,
    ) -> list[MemoryItem]:
        turns, vectors = index.turns, index.turn_vectors
        if not n or not turns or vectors is None:
            return []
        sims = vectors @ q
        # Raw turns keep no caller metadata: a metadata filter selects entries only.
        order = []
        for i in np.argsort(-sims):  # best first, until n turns not already shown with an entry
            if (turns[i]["session_id"], turns[i]["turn_index"]) in chosen_turns:
                continue
            if filters is not None and not filters.matches(self._turn_item(turns[i])):
                continue
            order.append(i)
            if len(order) == n:
                break
        order.sort()
        return [self._turn_item(turns[i], float(sims[i]), chars=self.config.quote_chars * 3) for i in order]

    @staticmethod
    def _turn_item(turn: dict[str, Any], score: float | None = None, *, chars: int | None = None) -> MemoryItem:
        source = {"session_id": turn["session_id"], "turn_index": turn["turn_index"], "role": turn["role"]}
        if turn.get("timestamp"):
            source["timestamp"] = turn["timestamp"]
        return MemoryItem(
            id=f"{turn['session_id']}#{turn['turn_index']}",
            text=turn["content"][:chars] if chars else turn["content"],
            score=score,
            source=source,
            metadata={"kind": "turn"},
        )

    def _chain_item(self, versions: list[ProfileEntry], score: float | None = None) -> MemoryItem:
        latest = versions[-1]
        turns = [e.source() for v in versions for e in v.evidence]
        source: dict[str, Any] = {"turns": turns}
        if latest.evidence:
            source.update(latest.evidence[-1].source())
        return MemoryItem(
            id=latest.id,
            text=render_state(versions, quote_chars=self.config.quote_chars),
            score=score,
            source=source,
            metadata={
                "kind": "profile_entry",
                "aspect": latest.aspect,
                "stance": latest.stance.value,
                "current": latest.current,
                "version": latest.version,
                "versions": len(versions),
                # How the user's stance moved, oldest first: what a reader needs for "how has my view changed?"
                "timeline": [v.stance.value for v in versions] if latest.kind == "statement" else [],
            },
        )

    @_writes
    def _reset(self, user_id: str) -> None:
        self._indexes.pop(user_id, None)
        self.store.reset(user_id)

    def release(self, user_id: str) -> None:
        """Drop ``user_id``'s retrieval index from RAM (the store keeps everything)."""
        self._indexes.pop(user_id, None)

    def close(self) -> None:
        store = getattr(self, "store", None)
        if store is not None:
            store.close()
        if self._dir_lock is not None:
            self._dir_lock.release()

    def forget_matcher(self) -> Any:
        """With the LLM extractor, its LLM decides what a forget request refers to (memlab.forget)."""
        if self.llm_extractor is None:
            return None
        from memlab.forget import embedder_for, llm_matcher, semantic_matcher

        fallback = semantic_matcher(embedder_for(self))  # an unreadable reply: resolve by meaning and words
        return llm_matcher(self.llm_extractor.llm, on_usage=self.record_llm_usage, fallback=fallback)

    # ------------------------------------------------------------------ capabilities
    def _entry_id(self, item_id: str, user_id: str, *, erased_ok: bool = False) -> str:
        entry_id = _entry_of(item_id)
        versions = self.store.versions(user_id, entry_id)
        if not versions or (versions[-1].erased_at is not None and not erased_ok):
            raise NotFoundError(f"user {user_id!r} has no profile entry {item_id!r}")
        return entry_id

    def _turn_key(self, item_id: str, user_id: str) -> tuple[str, int] | None:
        """(session id, turn index) when ``item_id`` names one of the user's raw turns."""
        match = _TURN_ID.match(item_id)
        if match is None:
            return None
        key = (match["session"], int(match["turn"]))
        if self.store.turn(user_id, *key) is None:
            raise NotFoundError(f"user {user_id!r} has no turn {item_id!r}")
        return key

    @_reads
    def _list(self, user_id: str) -> list[MemoryItem]:
        # Every entry retrieval can return (closed ones too, ``metadata.current`` False), then the raw turns.
        chains = self._chains(user_id)
        entries = [self._chain_item(c) for c in chains.values()]
        entries.sort(key=lambda i: not i.metadata["current"])
        return entries + [self._turn_item(t) for t in self.store.turns(user_id)[0]]

    @_writes
    def _update(self, item_id: str, text: str, *, user_id: str) -> MemoryItem:
        if self._turn_key(item_id, user_id) is not None:
            raise ReadOnlyItemError(
                f"{item_id!r} is a raw turn of the conversation: turns can be deleted, not changed; "
                "profile entries (the items whose id has no '#') can be changed"
            )
        entry_id = self._entry_id(item_id, user_id)
        old = self.store.versions(user_id, entry_id)[-1]
        op = Operation(
            op=OpType.UPDATE,
            entry_id=entry_id,
            value=text.strip(),
            stance=stance_of(text) or old.stance,
            reason="changed through the API",
        )
        try:
            self.store.apply_session(user_id, None, [op], vectorize=self._vectorize, source="api")
        except ProfileStoreError as exc:  # a closed entry: the user stopped it; ADD reopens it
            raise ReadOnlyItemError(f"cannot update {item_id!r}: {exc}") from exc
        return self._chain_item(self.store.versions(user_id, entry_id))

    @_writes
    def _delete(self, item_id: str, *, user_id: str) -> None:
        turn = self._turn_key(item_id, user_id)
        if turn is not None:
            self.store.delete_turn(user_id, *turn)
            return
        self.store.erase_entry(
            user_id, self._entry_id(item_id, user_id), reason="deleted through the API", vectorize=self._vectorize
        )

    @_reads
    def _history(self, item_id: str, *, user_id: str) -> list[dict[str, Any]]:
        turn = self._turn_key(item_id, user_id)
        if turn is not None:
            return [self.store.turn(user_id, *turn) or {}]
        entry_id = self._entry_id(item_id, user_id, erased_ok=True)
        return [
            {**v.model_dump(mode="json"), "version_id": v.version_id} for v in self.store.versions(user_id, entry_id)
        ]

    @_reads
    def _export(self, user_id: str) -> dict[str, Any]:
        """Entries with all their versions, the operation log (deleted texts erased), sessions, raw turns."""
        document = self.store.export_user(user_id)
        document["extraction_stats"] = self.extraction_stats()
        return document

    # ------------------------------------------------------------------ chatbot API
    def get_profile(self, user_id: str, *, include_closed: bool = False) -> list[ProfileEntry]:
        """The user's current entries (with ``include_closed``, every version)."""
        return self.store.entries(user_id, current_only=not include_closed)

    def operations(self, user_id: str, entry_id: str | None = None) -> list[OperationRecord]:
        """The operation log, oldest first; for one entry when ``entry_id`` is given."""
        return self.store.operations(user_id, _entry_of(entry_id) if entry_id else None)

    @_writes
    def apply(self, operations: list[Operation], *, user_id: str) -> list[OperationRecord]:
        """Apply operations directly (all or nothing), e.g. from a chatbot's own extraction."""
        return self.store.apply_session(user_id, None, operations, vectorize=self._vectorize, source="api")

    def export_profile(self, user_id: str) -> dict[str, Any]:
        """Everything about ``user_id`` as plain JSON data (entries with all versions, the op log, raw turns);
        ``import_profile`` reads it back."""
        return self.store.export_user(user_id)

    @_writes
    def import_profile(self, user_id: str, data: dict[str, Any] | str | Path) -> int:
        """Replace ``user_id``'s profile with an export (a dict, a JSON string or a file path)."""
        export: dict[str, Any]
        if isinstance(data, Path) or (isinstance(data, str) and not data.lstrip().startswith("{")):
            export = json.loads(Path(data).read_text(encoding="utf-8"))
        elif isinstance(data, str):
            export = json.loads(data)
        else:
            export = data
        return self.store.import_user(user_id, export, vectorize=self._vectorize)


def _with_turn_facts(op: Operation, session: Session, first_turn: int) -> Operation:
    """``op`` with the date and caller metadata of each evidence turn from this session part."""
    messages = session.messages
    evidence = []
    for e in op.evidence:
        offset = e.turn_index - first_turn
        if e.session_id == session.id and 0 <= offset < len(messages):
            message = messages[offset]
            stamp = message.timestamp.isoformat() if message.timestamp is not None else None
            e = e.model_copy(update={"timestamp": stamp, "metadata": dict(message.metadata)})
        evidence.append(e)
    return op.model_copy(update={"evidence": evidence})
