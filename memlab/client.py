"""The memory layer a chatbot embeds: open any registered backend by name and talk to it per user.

``MemoryClient`` wraps one backend instance with a persistent data directory and adds what an
application needs around the raw ``Memory`` interface: plain-Python arguments (dicts, tuples or
``Message`` objects), a lock so several threads can share one client (backends are not assumed
thread-safe), ownership checks before anything is done to a memory by id, and a clear statement
of whether the data survives a restart.

Persistence policy: with a ``data_dir`` and a backend that declares ``Capability.PERSIST`` the
memory survives restarts. With a ``data_dir`` and a backend that does not persist (``rag``,
``none``), the client warns with ``EphemeralMemoryWarning``, or refuses with ``PersistenceError``
when ``require_persistence=True`` (the REST service always requires it unless told otherwise).
Without a ``data_dir`` the memory is in-process only, which is the caller's explicit choice, so
there is no warning unless persistence is required.

``MemoryChat`` shows the chatbot loop: recall, call the LLM with the recalled context, store the turn.
"""

from __future__ import annotations

import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from memlab.errors import MemlabError
from memlab.memory import Capability, IngestReport, Memory, validate_user_id
from memlab.registry import create_backend
from memlab.tokens import truncate_front
from memlab.types import MemoryItem, Message, Retrieval, Session

__all__ = [
    "MemoryClient",
    "MemoryChat",
    "ChatReply",
    "EphemeralMemoryWarning",
    "PersistenceError",
    "MemoryNotFoundError",
    "MessageLike",
]

# What remember() accepts for one message.
MessageLike = Union[Message, Mapping[str, Any], tuple[str, str]]

DEFAULT_SESSION_ID = "default"


class EphemeralMemoryWarning(UserWarning):
    """The backend keeps its state in process memory: it is lost when the process ends."""


class PersistenceError(MemlabError):
    """Persistence was required but the backend (or the missing data_dir) cannot provide it."""


class MemoryNotFoundError(MemlabError, KeyError):
    """No memory with that id belongs to that user (it may exist for another user)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


def to_message(value: MessageLike) -> Message:
    """Accept a Message, a ``{"role", "content"}`` mapping or a ``(role, content)`` pair."""
    if isinstance(value, Message):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Message(role=value[0], content=value[1])  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        return Message.model_validate(dict(value))
    raise TypeError(f"cannot read a message from {type(value).__name__}: use Message, a dict or (role, content)")


class MemoryClient:
    """Thread-safe, per-user access to one memory backend.

    >>> client = MemoryClient("full_context", data_dir="memdata")       # doctest: +SKIP
    >>> client.remember("alice", [("user", "I adopted a cat named Pixel.")])  # doctest: +SKIP
    >>> client.recall("alice", "what is my cat called?").context        # doctest: +SKIP
    """

    def __init__(
        self,
        backend: str | Memory,
        config: Mapping[str, Any] | None = None,
        *,
        data_dir: str | Path | None = None,
        require_persistence: bool = False,
        **backend_kwargs: Any,
    ) -> None:
        if isinstance(backend, Memory):
            if config is not None or data_dir is not None or backend_kwargs:
                raise ValueError("pass config/data_dir when opening a backend by name, not with an instance")
            self.memory = backend
        else:
            self.memory = create_backend(
                backend, dict(config or {}), data_dir=Path(data_dir) if data_dir else None, **backend_kwargs
            )
        self.data_dir = self.memory.data_dir
        # One lock around the backend: plugins keep shared indexes, files and counters that are
        # not written for concurrent use, so calls are serialised (reads included).
        self._lock = threading.RLock()
        self._closed = False
        self._check_persistence(require_persistence)

    # ------------------------------------------------------------------ identity
    @property
    def backend(self) -> str:
        return self.memory.name

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.memory.capabilities

    @property
    def persistent(self) -> bool:
        """True when what is stored survives a restart of the process."""
        return self.data_dir is not None and self.memory.supports(Capability.PERSIST)

    def supports(self, capability: Capability | str) -> bool:
        return self.memory.supports(capability)

    def _check_persistence(self, required: bool) -> None:
        if self.persistent:
            return
        if self.data_dir is None:
            reason = "no data_dir was given, so memories live only in this process"
        else:
            reason = (
                f"backend {self.backend!r} does not declare the 'persist' capability: memories live only in "
                f"this process and nothing is written to {self.data_dir}"
            )
        if required:
            raise PersistenceError(f"persistent memory required, but {reason} (they would not survive a restart)")
        if self.data_dir is not None:
            warnings.warn(f"{reason}; they will not survive a restart", EphemeralMemoryWarning, stacklevel=3)

    # ------------------------------------------------------------------ core operations
    def remember(
        self, user_id: str, messages: Iterable[MessageLike], *, session_id: str = DEFAULT_SESSION_ID
    ) -> IngestReport:
        """Append ``messages`` to session ``session_id`` of ``user_id``'s memory."""
        parsed = [to_message(m) for m in messages]
        session = Session(id=session_id, messages=parsed)
        with self._guard():
            return self.memory.ingest(session, user_id=user_id)

    def recall(self, user_id: str, query: str, k: int | None = None) -> Retrieval:
        """What ``user_id``'s memory holds that is relevant to ``query`` (at most ``k`` items)."""
        with self._guard():
            return self.memory.retrieve(query, user_id=user_id, k=k)

    def forget(self, user_id: str) -> None:
        """Delete everything stored about ``user_id``."""
        with self._guard():
            self.memory.reset(user_id)

    # ------------------------------------------------------------------ capability operations
    def memories(self, user_id: str) -> list[MemoryItem]:
        """All of ``user_id``'s memories (needs the 'list' capability)."""
        with self._guard():
            return self.memory.list_memories(user_id=user_id)

    def get(self, user_id: str, item_id: str) -> MemoryItem:
        """One memory by id, only if it belongs to ``user_id`` (needs 'list')."""
        with self._guard():
            return self._owned(user_id, item_id)

    def update(self, user_id: str, item_id: str, text: str) -> MemoryItem:
        """Replace the text of one of ``user_id``'s memories (needs 'update')."""
        with self._guard():
            self.memory._require(Capability.UPDATE)
            self._owned(user_id, item_id)
            return self._by_id(lambda: self.memory.update(item_id, text, user_id=user_id), user_id, item_id)

    def delete(self, user_id: str, item_id: str) -> None:
        """Delete one of ``user_id``'s memories (needs 'delete')."""
        with self._guard():
            self.memory._require(Capability.DELETE)
            self._owned(user_id, item_id)
            self._by_id(lambda: self.memory.delete(item_id, user_id=user_id), user_id, item_id)

    def history(self, user_id: str, item_id: str) -> list[dict[str, Any]]:
        """The change history of one of ``user_id``'s memories (needs 'history').

        Deleted memories keep their history, so there is no 'list' check here: the backend's own
        per-user scoping decides, and an id it does not know for this user is ``MemoryNotFoundError``.
        """
        with self._guard():
            self.memory._require(Capability.HISTORY)
            validate_user_id(user_id)
            return self._by_id(lambda: self.memory.history(item_id, user_id=user_id), user_id, item_id)

    def _owned(self, user_id: str, item_id: str) -> MemoryItem | None:
        """Check that ``item_id`` is one of ``user_id``'s memories.

        The backends scope ids by user themselves; this second check means a backend bug cannot
        let one user reach another's memory. Without 'list' the backend's own scoping is all there is.
        """
        validate_user_id(user_id)
        if not self.memory.supports(Capability.LIST):
            return None
        for item in self.memory.list_memories(user_id=user_id):
            if item.id == item_id:
                return item
        raise MemoryNotFoundError(f"user {user_id!r} has no memory with id {item_id!r}")

    @staticmethod
    def _by_id(call: Callable[[], Any], user_id: str, item_id: str) -> Any:
        try:
            return call()
        except MemoryNotFoundError:
            raise
        except LookupError as exc:  # backends signal unknown ids with KeyError/LookupError
            raise MemoryNotFoundError(f"user {user_id!r} has no memory with id {item_id!r}") from exc

    # ------------------------------------------------------------------ lifecycle
    def _guard(self) -> threading.RLock:
        if self._closed:
            raise MemlabError("this MemoryClient is closed")
        return self._lock

    def close(self) -> None:
        """Flush and release the backend. Safe to call twice."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self.memory.close()

    def __enter__(self) -> "MemoryClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.data_dir) if self.data_dir else "in-process"
        return f"MemoryClient(backend={self.backend!r}, data_dir={where!r}, persistent={self.persistent})"


# ---------------------------------------------------------------------- the chatbot loop
ChatFunction = Callable[[list[dict[str, str]]], str]

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant with a long-term memory of this user. Use what you remember when it "
    "is relevant, prefer the most recent information when facts changed, and never invent memories."
)


@dataclass
class ChatReply:
    """One turn of ``MemoryChat``: the answer, what was recalled and the exact prompt sent."""

    text: str
    retrieval: Retrieval
    prompt: list[dict[str, str]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


class MemoryChat:
    """Recall, answer with the recalled context, store the turn.

    ``llm`` is either a ``memlab.llm.LLM`` (anything with ``chat(messages) -> LLMResponse``) or a
    plain function taking OpenAI-style ``[{"role", "content"}]`` messages and returning the reply text.
    The last ``window`` messages of this conversation are sent verbatim; older ones reach the model
    only through recall. The recalled context is cut from the front to ``max_context_tokens``.
    """

    def __init__(
        self,
        client: MemoryClient,
        llm: Any,
        *,
        user_id: str,
        session_id: str | None = None,
        k: int = 5,
        window: int = 10,
        max_context_tokens: int = 2000,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    ) -> None:
        self.client = client
        self.llm = llm
        self.user_id = validate_user_id(user_id)
        # A fresh session per chat object: the memory sees each conversation as its own session.
        self.session_id = session_id or f"chat-{uuid.uuid4().hex[:12]}"
        self.k = k
        self.window = window
        self.max_context_tokens = max_context_tokens
        self.system_prompt = system_prompt
        self.turns: list[dict[str, str]] = []

    def build_prompt(self, text: str, retrieval: Retrieval) -> list[dict[str, str]]:
        system = self.system_prompt
        context = truncate_front(retrieval.context, self.max_context_tokens).strip()
        if context:
            system += f"\n\nWhat you remember about this user:\n{context}"
        recent = self.turns[-self.window :] if self.window > 0 else []
        return [{"role": "system", "content": system}, *recent, {"role": "user", "content": text}]

    def send(self, text: str) -> ChatReply:
        if not text.strip():
            raise ValueError("message must not be empty")
        retrieval = self.client.recall(self.user_id, text, k=self.k)
        prompt = self.build_prompt(text, retrieval)
        reply, prompt_tokens, completion_tokens = self._call(prompt)
        turn = [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
        # Stored only after the model answered, so a failed call leaves no half turn behind.
        self.client.remember(self.user_id, turn, session_id=self.session_id)
        self.turns.extend(turn)
        return ChatReply(reply, retrieval, prompt, prompt_tokens, completion_tokens)

    def _call(self, prompt: Sequence[dict[str, str]]) -> tuple[str, int, int]:
        chat = getattr(self.llm, "chat", None)
        if callable(chat):
            response = chat(list(prompt))
            return response.text, response.prompt_tokens, response.completion_tokens
        if callable(self.llm):
            text = self.llm(list(prompt))
            if not isinstance(text, str):
                raise TypeError(f"the llm function must return a string, got {type(text).__name__}")
            return text, 0, 0
        raise TypeError("llm must be a memlab.llm.LLM or a function(messages) -> str")
