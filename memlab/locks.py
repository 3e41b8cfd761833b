"""Locks: one live process per directory (``DirectoryLock``), and a phase-fair reader-writer lock
between threads (``ReadWriteLock``).

``DirectoryLock``: an exclusive, advisory lock on a file inside the directory.

The lock is an ``fcntl.flock`` on ``<dir>/.memlab.lock``. The kernel drops it when the holding
process dies, however it dies (kill -9 included), so a stale lock file never blocks anyone; the
file only tells the next process who held it (pid and purpose) for the error message.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memlab.errors import DirectoryInUseError

LOCK_FILE = ".memlab.lock"


class DirectoryLock:
    """``with DirectoryLock(path, purpose="memlab run"):`` holds ``path`` for this process.

    A second holder, in another process or in this one, fails at once with
    :class:`DirectoryInUseError` naming the holder's pid. Re-entrant use of the same object is not
    supported: acquire once, release once.
    """

    def __init__(self, directory: str | Path, *, purpose: str = "memlab") -> None:
        self.directory = Path(directory)
        self.purpose = purpose
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self.directory / LOCK_FILE

    def holder(self) -> dict[str, Any]:
        """What the lock file says about its last holder (may be empty or stale)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> DirectoryLock:
        if self._fd is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self.holder()
            who = f"{holder.get('purpose', 'another memlab process')} (pid {holder.get('pid', '?')})"
            raise DirectoryInUseError(
                f"{self.directory} is in use: another {who} is using it; stop that process or use another directory"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "purpose": self.purpose}).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class ReadWriteLock:
    """Many readers or one writer, taking turns (phase-fair): a waiting writer keeps new readers out,
    so searches cannot starve an ingest; when a writer releases, the readers that waited meanwhile
    go before the next writer, so an ingest writing in many short holds cannot starve searches
    either (with writers simply first it would take the lock back before a waiting search woke)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._readers_waiting = 0
        self._writer = False
        self._writers_waiting = 0
        self._readers_turn = False

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._readers_waiting += 1
            entered = False
            try:
                while self._writer or (self._writers_waiting and not self._readers_turn):
                    self._cond.wait()
                entered = True
            finally:
                self._readers_waiting -= 1
                if not entered and not self._readers and not self._readers_waiting:  # interrupted waiting
                    self._readers_turn = False
                    self._cond.notify_all()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._readers_turn = False
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers or self._readers_turn:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._readers_turn = self._readers_waiting > 0
                self._cond.notify_all()
