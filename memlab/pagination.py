"""Pages of lists (memories, history events, export items) with opaque cursors.

Memories are paged in id order (digits compared as numbers, so ``s#2`` comes before ``s#10``) and
the cursor names the last id returned: a memory added or deleted while a client walks the pages
moves no other memory between pages, so every memory that exists throughout the walk is returned
exactly once. History events only ever grow at the end, so their cursor is a position. Without a
``limit`` everything comes in one page, in the backend's own order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

MAX_PAGE_SIZE = 1000
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page: its items and the cursor of the next page (None after the last)."""

    items: list[T]
    next_cursor: str | None = None


def natural_key(text: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key comparing runs of digits as numbers."""
    return tuple((1, int(part), "") if part.isdigit() else (0, 0, part) for part in _DIGITS.split(text) if part)


def _id_order(text: str) -> tuple[tuple[tuple[int, int, str], ...], str]:
    return natural_key(text), text  # the id itself breaks ties ("s#01" and "s#1")


# Cursor forms: "i." + the hex of the last id's UTF-8 bytes (pages by id), "p." + a position. Every
# string these patterns match is a usable cursor (a service can state them in its schema).
ID_CURSOR_PATTERN = r"^i\.([0-9a-f]{2}){0,2048}$"
POSITION_CURSOR_PATTERN = r"^p\.[0-9]{1,18}$"
_FORMS = {"id": re.compile(ID_CURSOR_PATTERN), "position": re.compile(POSITION_CURSOR_PATTERN)}


def encode_cursor(kind: str, value: str | int) -> str:
    if kind == "id":
        return "i." + str(value).encode("utf-8").hex()
    return f"p.{int(value)}"


def decode_cursor(kind: str, cursor: str) -> Any:
    if not isinstance(cursor, str) or not _FORMS[kind].match(cursor):
        raise ValueError(f"invalid cursor {str(cursor)[:40]!r}: pass the next_cursor of a previous page")
    if kind == "id":
        return bytes.fromhex(cursor[2:]).decode("utf-8", errors="replace")
    return int(cursor[2:])


def check_limit(limit: int | None) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE):
        raise ValueError(f"limit must be an integer from 1 to {MAX_PAGE_SIZE}, got {limit!r}")
    return limit


def page_by_id(items: Sequence[T], id_of: Callable[[T], str], *, limit: int | None, cursor: str | None) -> Page[T]:
    """Items after the cursor's id, in id order, at most ``limit`` (all of them, unsorted, without limit or cursor)."""
    check_limit(limit)
    if limit is None and cursor is None:
        return Page(list(items))
    ordered = sorted(items, key=lambda item: _id_order(id_of(item)))
    if cursor is not None:
        mark = _id_order(decode_cursor("id", cursor))
        ordered = [item for item in ordered if _id_order(id_of(item)) > mark]
    if limit is None or len(ordered) <= limit:
        return Page(ordered)
    chosen = ordered[:limit]
    return Page(chosen, encode_cursor("id", id_of(chosen[-1])))


def page_by_position(items: Sequence[T], *, limit: int | None, cursor: str | None) -> Page[T]:
    """Items from the cursor's position on, at most ``limit`` (for lists that only grow at the end)."""
    check_limit(limit)
    start = 0
    if cursor is not None:
        start = decode_cursor("position", cursor)
    end = len(items) if limit is None else start + limit
    chosen = list(items[start:end])
    return Page(chosen, encode_cursor("position", end) if end < len(items) else None)
