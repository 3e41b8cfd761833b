"""Which memlab user owns a LangGraph namespace: ``MemlabStore(user_namespace=...)``.

LangGraph namespaces are free-form tuples; memlab keeps each user's memory apart (``forget``,
per-user keys of the REST service). ``user_namespace`` says which label names the user:

- an ``int``: the label at that position (``1`` for ``("memories", user_id)``, ``0`` for
  ``(user_id, "memories")``);
- a collection of labels (the default, ``DEFAULT_COLLECTION_LABELS``): the first label that is
  *not* one of them. So ``("user_123", "memories")`` and ``("memories", "user_123")`` both belong
  to ``user_123``, ``("users", "123")`` to ``123``, and ``("a", "b")`` to ``a``.

A namespace without such a label (shorter than the position, or made of collection labels only)
belongs to the store's ``shared_user``. A label that is not a valid memlab user id (``a%b``,
``star*``, non-ASCII) names the user under an escaped id: each other character becomes ``:XX``
(its UTF-8 bytes in hex), and an id still longer than 128 characters becomes ``sha256:<hex>``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence

from memlab.memory import validate_user_id

DEFAULT_COLLECTION_LABELS: frozenset[str] = frozenset(
    {
        "memories",
        "memory",
        "users",
        "user",
        "profile",
        "profiles",
        "preferences",
        "episodes",
        "facts",
        "instructions",
        "procedures",
    }
)
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.@-")


def user_id_for_label(label: str) -> str:
    """The memlab user id a namespace label names (the label itself when it is a valid id)."""
    try:
        return validate_user_id(label)
    except ValueError:
        pass
    escaped = "".join(c if c in _PLAIN else "".join(f":{b:02x}" for b in c.encode()) for c in label)
    if len(escaped) > 128 or not escaped.strip("."):
        return "sha256:" + hashlib.sha256(label.encode()).hexdigest()
    return escaped


class UserNamespace:
    """The rule naming a namespace's memlab user (see the module doc)."""

    def __init__(self, rule: int | Collection[str] = DEFAULT_COLLECTION_LABELS, shared_user: str = "langgraph") -> None:
        if isinstance(rule, bool) or not isinstance(rule, int | Collection) or isinstance(rule, str):
            raise TypeError(
                "user_namespace must be a label position (int) or a collection of collection labels "
                f"(e.g. {{'memories'}}), got {rule!r}"
            )
        if isinstance(rule, int) and rule < 0:
            raise ValueError(f"user_namespace position must be >= 0, got {rule}")
        self.position: int | None = rule if isinstance(rule, int) else None
        self.collections: frozenset[str] = frozenset() if isinstance(rule, int) else frozenset(rule)
        self.shared_user = validate_user_id(shared_user)

    def user_position(self, labels: Sequence[str]) -> int | None:
        """Where the user label sits in ``labels`` (a namespace or a prefix of one), or None."""
        if self.position is not None:
            return self.position if len(labels) > self.position else None
        return next((i for i, label in enumerate(labels) if label not in self.collections), None)

    def user_of(self, namespace: Sequence[str]) -> str:
        """The memlab user owning ``namespace``."""
        position = self.user_position(namespace)
        return self.shared_user if position is None else user_id_for_label(namespace[position])

    def user_of_prefix(self, prefix: Sequence[str]) -> str | None:
        """The one user owning every namespace under ``prefix`` (wildcards ``*`` allowed), or None when
        the prefix does not decide it (the caller then looks through every user)."""
        position = self.user_position(prefix)
        if position is None or any(label == "*" for label in prefix[: position + 1]):
            return None
        return user_id_for_label(prefix[position])

    def __repr__(self) -> str:
        rule = self.position if self.position is not None else sorted(self.collections)
        return f"UserNamespace({rule!r}, shared_user={self.shared_user!r})"
