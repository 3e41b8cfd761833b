"""Upgrading a store's schema in place: the one rule every versioned store (SQLite or PostgreSQL) follows.

A store records the version its tables were made with; on open, ``upgrade_schema`` runs the
migrations that take it to the version this memlab writes, one step at a time, and refuses a store
written by a newer memlab (its data would be misread). The caller runs it inside one transaction
and records the new version, so a failed migration leaves the old schema untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from memlab.errors import MemlabError

Db = TypeVar("Db")


def upgrade_schema(
    db: Db,
    stored: int,
    current: int,
    migrations: Mapping[int, Callable[[Db], None]],
    *,
    where: str,
    error: type[MemlabError],
) -> None:
    """Run ``migrations[v](db)`` (version v to v+1) from ``stored`` up to ``current``.

    A ``stored`` newer than ``current`` raises ``error`` naming ``where`` (the file or database).
    """
    if stored > current:
        raise error(f"{where}: schema version {stored}, newer than this memlab ({current})")
    for version in range(stored, current):
        migrations[version](db)
