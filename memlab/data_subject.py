"""Whose data a call handles, so that forgetting a user also empties the caches memlab writes.

memlab's caches (LLM responses, ``memlab.llm.cache``; embeddings, ``memlab.embedders.cache``) are
keyed by hashes of what was sent, so they cannot be searched for a user's text. Instead, while a
backend works for a user (``Memory.ingest``, ``retrieve``, ``update``), ``handling(user_id)`` names
that user, and each cache entry written meanwhile is tagged with a hash of the user id (never the
id itself: ids may be e-mail addresses). ``forget(user_id)`` then deletes every entry tagged with
that user from every cache open in this process and rewrites the cache files (VACUUM, WAL
truncated), so no byte of the deleted text stays on disk. ``MemoryClient.forget`` and
``MemoryClient.delete`` call it; the evaluation runner's per-question resets do not (reruns keep
their caches).

An entry written for two users is dropped when either is forgotten: a cache miss costs a
recomputation, a kept entry would keep a forgotten user's text.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("memlab_data_subject", default=None)


class ForgettingCache(Protocol):
    def forget_owner(self, owner: str) -> int: ...


_caches: weakref.WeakSet[ForgettingCache] = weakref.WeakSet()
_lock = threading.Lock()


def owner_tag(user_id: str) -> str:
    """What a cache stores instead of the user id."""
    return hashlib.blake2b(user_id.encode("utf-8"), digest_size=16).hexdigest()


@contextmanager
def handling(user_id: str) -> Iterator[None]:
    """Cache entries written inside this block hold ``user_id``'s data (threads started with
    ``contextvars.copy_context`` inherit it)."""
    token = _CURRENT.set(owner_tag(user_id))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_owner() -> str | None:
    """The tag of the user whose data is being handled, if any."""
    return _CURRENT.get()


def register_cache(cache: ForgettingCache) -> None:
    with _lock:
        _caches.add(cache)


def forget(user_id: str) -> int:
    """Delete every cache entry written for ``user_id`` from the caches open in this process;
    returns how many entries went."""
    tag = owner_tag(user_id)
    with _lock:
        caches = list(_caches)
    return sum(cache.forget_owner(tag) for cache in caches)
