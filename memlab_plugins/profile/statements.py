"""Every SQL statement the profile store runs, written out for each dialect it speaks.

``ProfileStore`` (SQLite) and ``pg_store.PgProfileStore`` (PostgreSQL) run the same queries through
``store.sql``, a ``Statements`` of their dialect; nothing rewrites SQL at run time. The two dialects
share the SQL they both speak: upserts are ``INSERT ... ON CONFLICT (key) DO UPDATE`` (SQLite 3.24+),
new operation numbers come back with ``RETURNING seq`` (SQLite 3.35+), and rows are addressed by
their keys, never by ``rowid``/``ctid`` (PostgreSQL's ``ctid`` moves with every UPDATE, so a row
read by it and updated later, after another writer changed it, is silently missed). They differ
in the parameter marker (``?``, ``%s``), in the row locks a whole-store rewrite takes
(``FOR UPDATE`` on PostgreSQL, where other workers write at the same time; SQLite's writer holds the
whole file), in the WAL purge only SQLite has, and in the schema, written per dialect in
``schema`` (SQLite) and ``pg_store`` (PostgreSQL).
"""

from __future__ import annotations

from dataclasses import dataclass

_ENTRY_COLUMNS = (
    "entry_id, version, user_id, aspect, value, stance, evidence, valid_from, valid_from_time, valid_to,"
    " valid_to_time, reason, closed_reason, op, created_at, aspect_vector, text_vector, kind"
)
_OPERATION_COLUMNS = "user_id, session_id, session_order, op, entry_id, version, reason, evidence, source, created_at"
_TURN_COLUMNS = "user_id, session_id, turn_index, role, content, vector, timestamp"


@dataclass(frozen=True)
class Statements:
    """The profile store's statements in one dialect (see the module docstring)."""

    dialect: str
    # meta
    get_meta: str
    set_meta: str
    # reading
    current_entries: str
    all_entries: str
    versions: str
    aspect_vectors: str
    text_vectors: str
    operations: str
    entry_operations: str
    session_turns: str
    session_order: str
    last_session_order: str
    turns: str
    turn: str
    current_version: str
    id_taken: str
    user_sessions: str
    erased_entries: str
    # writing
    upsert_turn: str
    upsert_session: str
    insert_session: str
    close_version: str
    insert_operation: str  # returns the new seq
    insert_entry: str  # a new current version: valid_to, valid_to_time and closed_reason NULL
    import_entry: str  # every column given
    # revectorize (every user's rows; locked against other writers where they exist)
    live_entry_texts: str
    set_entry_vectors: str
    all_turn_texts: str
    set_turn_vector: str
    # deletion
    end_version: str
    erase_entry_texts: str
    redact_operations: str
    insert_delete_operation: str
    set_turn_content: str
    delete_turn: str
    entry_evidence: str
    set_entry_evidence: str
    operation_evidence: str
    set_operation_evidence: str
    delete_user_entries: str
    delete_user_operations: str
    delete_user_sessions: str
    delete_user_turns: str
    purge: str | None  # empties a write-ahead log that still holds deleted pages (SQLite)


def _statements(dialect: str, p: str, lock: str, purge: str | None) -> Statements:
    """The statements with parameter marker ``p`` and row lock clause ``lock`` (one per dialect below)."""
    return Statements(
        dialect=dialect,
        get_meta=f"SELECT value FROM meta WHERE key={p}",
        set_meta=f"INSERT INTO meta (key, value) VALUES ({p}, {p}) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
        current_entries=f"SELECT * FROM entries WHERE user_id={p} AND erased_at IS NULL AND valid_to IS NULL"
        " ORDER BY valid_from, entry_id, version",
        all_entries=f"SELECT * FROM entries WHERE user_id={p} AND erased_at IS NULL ORDER BY valid_from, entry_id, version",
        versions=f"SELECT * FROM entries WHERE user_id={p} AND entry_id={p} ORDER BY version",
        aspect_vectors=f"SELECT entry_id, version, aspect_vector FROM entries WHERE user_id={p} AND erased_at IS NULL"
        " ORDER BY valid_from, entry_id, version",
        text_vectors=f"SELECT entry_id, version, text_vector FROM entries WHERE user_id={p} AND erased_at IS NULL"
        " ORDER BY valid_from, entry_id, version",
        operations=f"SELECT * FROM operations WHERE user_id={p} AND seq>={p} ORDER BY seq",
        entry_operations=f"SELECT * FROM operations WHERE user_id={p} AND seq>={p} AND entry_id={p} ORDER BY seq",
        session_turns=f"SELECT turns FROM sessions WHERE user_id={p} AND session_id={p}",
        session_order=f"SELECT session_order FROM sessions WHERE user_id={p} AND session_id={p}",
        last_session_order=f"SELECT MAX(session_order) FROM sessions WHERE user_id={p}",
        turns="SELECT t.session_id, t.turn_index, t.role, t.content, t.timestamp, t.vector FROM turns t JOIN sessions s"
        f" ON s.user_id=t.user_id AND s.session_id=t.session_id WHERE t.user_id={p} ORDER BY s.session_order, t.turn_index",
        turn=f"SELECT session_id, turn_index, role, content, timestamp FROM turns WHERE user_id={p} AND session_id={p}"
        f" AND turn_index={p}",
        current_version=f"SELECT * FROM entries WHERE user_id={p} AND entry_id={p} AND erased_at IS NULL"
        " ORDER BY version DESC LIMIT 1",
        id_taken=f"SELECT 1 FROM entries WHERE entry_id={p} LIMIT 1",
        user_sessions=f"SELECT session_id, session_order, turns FROM sessions WHERE user_id={p} ORDER BY session_order",
        erased_entries=f"SELECT * FROM entries e WHERE user_id={p} AND erased_at IS NOT NULL AND version="
        "(SELECT MAX(version) FROM entries x WHERE x.entry_id=e.entry_id) ORDER BY valid_from, entry_id",
        upsert_turn=f"INSERT INTO turns ({_TURN_COLUMNS}) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})"
        " ON CONFLICT (user_id, session_id, turn_index) DO UPDATE SET role=excluded.role, content=excluded.content,"
        " vector=excluded.vector, timestamp=excluded.timestamp",
        upsert_session=f"INSERT INTO sessions (user_id, session_id, session_order, turns) VALUES ({p}, {p}, {p}, {p})"
        " ON CONFLICT (user_id, session_id) DO UPDATE SET session_order=excluded.session_order, turns=excluded.turns",
        insert_session=f"INSERT INTO sessions (user_id, session_id, session_order, turns) VALUES ({p}, {p}, {p}, {p})",
        close_version=f"UPDATE entries SET valid_to={p}, valid_to_time={p}, closed_reason={p}, evidence={p}"
        f" WHERE entry_id={p} AND version={p}",
        insert_operation=f"INSERT INTO operations ({_OPERATION_COLUMNS}) VALUES ({', '.join([p] * 10)}) RETURNING seq",
        insert_entry=f"INSERT INTO entries ({_ENTRY_COLUMNS}) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p},"
        f" NULL, NULL, {p}, NULL, {p}, {p}, {p}, {p}, {p})",
        import_entry=f"INSERT INTO entries ({_ENTRY_COLUMNS}) VALUES ({', '.join([p] * 18)})",
        live_entry_texts=f"SELECT entry_id, version, aspect, value FROM entries WHERE erased_at IS NULL{lock}",
        set_entry_vectors=f"UPDATE entries SET aspect_vector={p}, text_vector={p} WHERE entry_id={p} AND version={p}",
        all_turn_texts=f"SELECT user_id, session_id, turn_index, content FROM turns{lock}",
        set_turn_vector=f"UPDATE turns SET vector={p} WHERE user_id={p} AND session_id={p} AND turn_index={p}",
        end_version=f"UPDATE entries SET valid_to={p} WHERE entry_id={p} AND version={p}",
        erase_entry_texts="UPDATE entries SET aspect='', value='', evidence='[]', reason=NULL, closed_reason=NULL,"
        f" aspect_vector=NULL, text_vector=NULL, erased_at={p} WHERE user_id={p} AND entry_id={p}",
        redact_operations=f"UPDATE operations SET reason=NULL, evidence='[]' WHERE user_id={p} AND entry_id={p}",
        insert_delete_operation=f"INSERT INTO operations ({_OPERATION_COLUMNS})"
        f" VALUES ({p}, NULL, {p}, 'DELETE', {p}, {p}, {p}, '[]', 'api', {p})",
        set_turn_content=f"UPDATE turns SET content={p}, vector={p} WHERE user_id={p} AND session_id={p}"
        f" AND turn_index={p}",
        delete_turn=f"DELETE FROM turns WHERE user_id={p} AND session_id={p} AND turn_index={p}",
        entry_evidence=f"SELECT entry_id, version, evidence FROM entries WHERE user_id={p}",
        set_entry_evidence=f"UPDATE entries SET evidence={p} WHERE entry_id={p} AND version={p}",
        operation_evidence=f"SELECT seq, evidence FROM operations WHERE user_id={p}",
        set_operation_evidence=f"UPDATE operations SET evidence={p} WHERE seq={p}",
        delete_user_entries=f"DELETE FROM entries WHERE user_id={p}",
        delete_user_operations=f"DELETE FROM operations WHERE user_id={p}",
        delete_user_sessions=f"DELETE FROM sessions WHERE user_id={p}",
        delete_user_turns=f"DELETE FROM turns WHERE user_id={p}",
        purge=purge,
    )


SQLITE = _statements("sqlite", p="?", lock="", purge="PRAGMA wal_checkpoint(TRUNCATE)")
POSTGRES = _statements("postgresql", p="%s", lock=" FOR UPDATE", purge=None)
