"""Deleting text for real: mem0 keeps copies of a memory's text beyond its vector store.

mem0's SQLite history (``history.db``) records every ADD/UPDATE/DELETE with the old and new text,
and its ``messages`` table keeps each user's recent raw messages (context for later extractions).
A deleted memory keeps its events there without their text; a forgotten user leaves no row. SQLite
keeps freed pages on disk until they are reused, so after erasing, every SQLite file of the data
directory (history, embedded qdrant collections) is rewritten with ``VACUUM``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SQLITE_MAGIC = b"SQLite format 3\x00"


def _placeholders(values: list[str]) -> str:
    return ",".join("?" * len(values))


def blank_history(db: Any, memory_ids: list[str]) -> None:
    """Keep the events of ``memory_ids`` (ADD, UPDATE, DELETE, dates) but drop every text they carry."""
    if not memory_ids:
        return
    with db._lock:  # mem0's SQLiteManager serialises its connection with this lock
        db.connection.execute(
            f"UPDATE history SET old_memory = NULL, new_memory = NULL WHERE memory_id IN ({_placeholders(memory_ids)})",
            memory_ids,
        )
        db.connection.commit()


def drop_history(db: Any, memory_ids: list[str]) -> None:
    if not memory_ids:
        return
    with db._lock:
        db.connection.execute(f"DELETE FROM history WHERE memory_id IN ({_placeholders(memory_ids)})", memory_ids)
        db.connection.commit()


def drop_messages(db: Any, scopes: list[str], *, content: str | None = None) -> None:
    """Remove the raw messages mem0 keeps for ``scopes`` (only those equal to ``content`` if given)."""
    if not scopes:
        return
    query = f"DELETE FROM messages WHERE session_scope IN ({_placeholders(scopes)})"
    params: list[str] = list(scopes)
    if content is not None:
        query += " AND content = ?"
        params.append(content)
    with db._lock:
        db.connection.execute(query, params)
        db.connection.commit()


def messages_of(db: Any, scopes: list[str]) -> list[dict[str, Any]]:
    if not scopes:
        return []
    with db._lock:
        rows = db.connection.execute(
            f"SELECT session_scope, role, content, name, created_at FROM messages "
            f"WHERE session_scope IN ({_placeholders(scopes)}) ORDER BY created_at",
            scopes,
        ).fetchall()
    return [dict(zip(("scope", "role", "content", "name", "created_at"), row)) for row in rows]


def sqlite_files(root: Path) -> Iterable[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.name.endswith(("-journal", "-wal", "-shm")):
            try:
                with path.open("rb") as handle:
                    if handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
                        yield path
            except OSError:
                continue


def vacuum_all(root: Path) -> None:
    """Rewrite every SQLite file under ``root`` so no freed page still holds deleted text.

    The stores' own connections stay open; ``VACUUM`` from a second connection is safe because
    mem0 and qdrant-client commit after every write (no transaction is left open between calls).
    """
    for path in sqlite_files(root):
        connection = sqlite3.connect(path)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.execute("VACUUM")
        finally:
            connection.close()
