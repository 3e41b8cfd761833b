"""Ends what a driver started when the driver dies without cleaning up (SIGKILL).

A local Ray started by ``--executor ray`` runs its own processes (gcs, raylet, agents, worker
actors). Worker actors watch the driver themselves (``end_with_parent``), but Ray's agents outlive
a SIGKILLed driver. The reaper is a tiny process, in a session of its own, that records the
driver's descendants twice a second and, once the driver is gone, kills those still running
(checking each one's start time, so a reused pid is never hit). Linux only (it reads /proc).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_SECONDS = 0.5
_started: subprocess.Popen[bytes] | None = None


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a live process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":
        return None
    return int(fields[1]), fields[19]


def _descendants(root: int) -> dict[int, str]:
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                children.setdefault(stat[0], []).append((int(entry.name), stat[1]))
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for pid, started in children.get(todo.pop(), []):
            if pid not in found:
                found[pid] = started
                todo.append(pid)
    return found


def start_reaper() -> None:
    """Start (once per process) a reaper watching this process; a no-op off Linux."""
    global _started
    if _started is not None or not sys.platform.startswith("linux"):
        return
    _started = subprocess.Popen(
        [sys.executable, "-m", "memlab.run.executors.reaper", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def watch(driver: int) -> None:
    me = os.getpid()
    known: dict[int, str] = {}
    driver_stat = _stat(driver)
    while driver_stat is not None and _stat(driver) == driver_stat:
        known.update(_descendants(driver))
        time.sleep(POLL_SECONDS)
    for pid, started in known.items():
        stat = _stat(pid)
        if pid != me and stat is not None and stat[1] == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


if __name__ == "__main__":
    watch(int(sys.argv[1]))
