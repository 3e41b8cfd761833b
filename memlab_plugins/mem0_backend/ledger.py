"""What mem0 does not keep, in one SQLite file of the data directory (``memlab_mem0.sqlite``).

* turns per (user, session), so a session continues across restarts (system messages and facts
  extracted from nothing leave no memory to count);
* which memlab user owns each mem0 memory id, under which mem0 user id (the preset stores a user's
  conversation under one mem0 id per speaker), and whether it is still live: ``history`` refuses
  other users' ids also after a delete, ``k`` is clamped to what a user holds, and a store that
  opens empty although the ledger lists live memories is reported as damaged;
* the speakers of a user's conversation (preset ``locomo-eval``);
* identities the store was written with (embedder, vector store);
* writes in flight (``pending``): an ingest records its session and first turn before it writes
  anything to mem0 and commits its memories' owners together with the new turn count, in one
  transaction, when every message is stored. A write that was killed half-way is still pending at
  the next open, and the backend removes what it had stored (all or nothing; the turn count never
  advanced, so no turn index is used twice).

SQLite commits are atomic and durable (rollback journal, ``synchronous=FULL``), so a kill leaves
the ledger at its last commit. It never holds memory text.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from memlab.errors import MemlabError

LEDGER_FILE = "memlab_mem0.sqlite"


class Ledger:
    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS turns (user_id TEXT, session_id TEXT, total INTEGER NOT NULL,"
            " PRIMARY KEY (user_id, session_id));"
            "CREATE TABLE IF NOT EXISTS owners (memory_id TEXT PRIMARY KEY, user_id TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS speakers (user_id TEXT, role TEXT, name TEXT NOT NULL,"
            " mem0_user_id TEXT NOT NULL, PRIMARY KEY (user_id, role));"
            "CREATE TABLE IF NOT EXISTS pending (user_id TEXT, session_id TEXT, first_turn INTEGER NOT NULL,"
            " mem0_user_ids TEXT NOT NULL, PRIMARY KEY (user_id, session_id));"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(owners)")}
        if "mem0_user_id" not in columns:  # ledgers written before the preset and live flags
            self._db.execute("ALTER TABLE owners ADD COLUMN mem0_user_id TEXT")
        if "live" not in columns:
            self._db.execute("ALTER TABLE owners ADD COLUMN live INTEGER NOT NULL DEFAULT 1")
        self._db.commit()

    # ------------------------------------------------------------------ turns
    def turns(self, user_id: str, session_id: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT total FROM turns WHERE user_id = ? AND session_id = ?", (user_id, session_id)
            ).fetchone()
        return int(row[0]) if row else 0

    def set_turns(self, user_id: str, session_id: str, total: int) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO turns VALUES (?, ?, ?)", (user_id, session_id, total))
            self._db.commit()

    def sessions(self, user_id: str) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT session_id, total FROM turns WHERE user_id = ?", (user_id,)).fetchall()
        return {session: int(total) for session, total in rows}

    # ------------------------------------------------------------------ writes in flight
    def begin_write(self, user_id: str, session_id: str, first_turn: int, mem0_user_ids: list[str]) -> None:
        """Record, durably and before mem0 is touched, that turns from ``first_turn`` on are being written."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?)",
                (user_id, session_id, first_turn, "\n".join(mem0_user_ids)),
            )
            self._db.commit()

    def commit_write(self, user_id: str, session_id: str, total: int, owners: list[tuple[str, str]]) -> None:
        """The write is complete: its memories' owners, the new turn count and the end of ``pending``, atomically."""
        with self._lock:
            with self._db:  # one transaction
                self._db.executemany(
                    "INSERT OR REPLACE INTO owners (memory_id, user_id, mem0_user_id, live) VALUES (?, ?, ?, 1)",
                    [(memory_id, user_id, mem0_id) for memory_id, mem0_id in owners],
                )
                self._db.execute("INSERT OR REPLACE INTO turns VALUES (?, ?, ?)", (user_id, session_id, total))
                self._db.execute("DELETE FROM pending WHERE user_id = ? AND session_id = ?", (user_id, session_id))

    def abandon_write(self, user_id: str, session_id: str) -> None:
        """What a failed write stored has been removed again."""
        with self._lock:
            self._db.execute("DELETE FROM pending WHERE user_id = ? AND session_id = ?", (user_id, session_id))
            self._db.commit()

    def pending_writes(self) -> list[tuple[str, str, int, list[str]]]:
        """(user, session, first turn, mem0 user ids) of every write that never completed."""
        with self._lock:
            rows = self._db.execute("SELECT user_id, session_id, first_turn, mem0_user_ids FROM pending").fetchall()
        return [(user, session, int(first), ids.split("\n")) for user, session, first, ids in rows]

    # ------------------------------------------------------------------ owners
    def add_owner(self, memory_ids: list[str], user_id: str, mem0_user_id: str | None = None) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO owners (memory_id, user_id, mem0_user_id, live) VALUES (?, ?, ?, 1)",
                [(m, user_id, mem0_user_id or user_id) for m in memory_ids],
            )
            self._db.commit()

    def owner(self, memory_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT user_id FROM owners WHERE memory_id = ?", (memory_id,)).fetchone()
        return row[0] if row else None

    def mark_deleted(self, memory_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE owners SET live = 0 WHERE memory_id = ?", (memory_id,))
            self._db.commit()

    def memory_ids(self, user_id: str, *, live_only: bool = False) -> list[str]:
        query = "SELECT memory_id FROM owners WHERE user_id = ?" + (" AND live = 1" if live_only else "")
        with self._lock:
            return [row[0] for row in self._db.execute(query, (user_id,))]

    def live_count(self, mem0_user_id: str) -> int:
        """Live memories stored under one mem0 user id (what a search can return at most)."""
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*) FROM owners WHERE COALESCE(mem0_user_id, user_id) = ? AND live = 1",
                (mem0_user_id,),
            ).fetchone()
        return int(row[0])

    def live_total(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM owners WHERE live = 1").fetchone()[0])

    # ------------------------------------------------------------------ speakers (preset locomo-eval)
    def speakers(self, user_id: str) -> dict[str, tuple[str, str]]:
        """role -> (speaker name, mem0 user id) for a user's conversation."""
        with self._lock:
            rows = self._db.execute(
                "SELECT role, name, mem0_user_id FROM speakers WHERE user_id = ?", (user_id,)
            ).fetchall()
        return {role: (name, mem0_id) for role, name, mem0_id in rows}

    def add_speaker(self, user_id: str, role: str, name: str, mem0_user_id: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO speakers VALUES (?, ?, ?, ?)", (user_id, role, name, mem0_user_id))
            self._db.commit()

    # ------------------------------------------------------------------ users and identities
    def forget_user(self, user_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM turns WHERE user_id = ?", (user_id,))
            self._db.execute("DELETE FROM owners WHERE user_id = ?", (user_id,))
            self._db.execute("DELETE FROM speakers WHERE user_id = ?", (user_id,))
            self._db.execute("DELETE FROM pending WHERE user_id = ?", (user_id,))
            self._db.commit()

    def check_meta(self, key: str, value: str, what: str) -> None:
        """Remember ``value`` under ``key``; a store reopened with another value is refused."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
                self._db.commit()
                return
        if row[0] != value:
            raise MemlabError(f"{what}: this data directory was written with {row[0]!r}, not {value!r}")

    def close(self) -> None:
        with self._lock:
            self._db.close()
