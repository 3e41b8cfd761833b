"""One live process per directory: an exclusive, advisory lock on a file inside it.

The lock is an ``fcntl.flock`` on ``<dir>/.memlab.lock``. The kernel drops it when the holding
process dies, however it dies (kill -9 included), so a stale lock file never blocks anyone; the
file only tells the next process who held it (pid and purpose) for the error message.
"""

from __future__ import annotations

import fcntl
import json
import os
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
