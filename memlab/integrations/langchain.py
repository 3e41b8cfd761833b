"""langchain-core adapters: a retriever over any memlab memory and a chat history that stores into one.

Both accept an in-process ``MemoryClient`` (or a ``Memory``) or a client of a running service
(``memlab.remote.RemoteMemoryClient``); the retriever also takes an ``AsyncRemoteMemoryClient``
for ``ainvoke``. ``MemlabRetriever(filters=...)`` searches only the turns a ``MemoryFilter`` selects.

``MemlabRetriever`` is a ``BaseRetriever``: ``invoke(query)`` returns the user's recalled memories as
``Document`` objects (``id`` = memory id; metadata carries ``score``, ``source`` (session/turn/role
where the backend knows them), ``user_id`` and ``backend``), in the order the backend returns them
(``rag`` returns conversation order) or by descending score with ``sort_by_score=True``.

``MemlabChatMessageHistory`` is a ``BaseChatMessageHistory`` for ``RunnableWithMessageHistory``:
every added message is written to the memlab memory as the next turn of session ``session_id``,
so later conversations can recall it. ``messages`` returns this conversation's transcript verbatim,
as LangChain documents; the transcript is kept by the history itself (in memory, or in a JSON-lines
file under ``transcript_dir``) because most backends store facts or chunks, not replayable
messages. ``clear()`` empties the transcript only: long-term memories are managed on the client
(``forget``/``delete``), never as a side effect of starting a new conversation. The transcript is
the user's data too: ``transcript_dir`` is registered with the client, and ``client.forget(user)``
deletes ``transcript_dir/<user>/`` (and a history of that user, still open, forgets its copy).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from memlab.client import MemoryClient
from memlab.memory import Memory, MemoryFilter, validate_user_id
from memlab.types import MemoryItem, Message

__all__ = ["MemlabRetriever", "MemlabChatMessageHistory", "to_memlab_message"]


def _as_client(memory: Any, *, allow_async: bool = False) -> Any:
    """A client with ``recall``/``remember``: a MemoryClient, a Memory (wrapped) or a remote client."""
    from memlab.remote import AsyncRemoteMemoryClient, RemoteMemoryClient

    if isinstance(memory, MemoryClient | RemoteMemoryClient):
        return memory
    if allow_async and isinstance(memory, AsyncRemoteMemoryClient):
        return memory
    if isinstance(memory, Memory):
        return MemoryClient(memory)
    raise TypeError(
        "expected a memlab MemoryClient, Memory or RemoteMemoryClient"
        f"{' (or AsyncRemoteMemoryClient)' if allow_async else ''}, got {type(memory).__name__}"
    )


def item_to_document(item: MemoryItem, *, user_id: str, backend: str) -> Document:
    return Document(
        id=item.id,
        page_content=item.text,
        metadata={
            "id": item.id,
            "score": item.score,
            "source": dict(item.source),
            "user_id": user_id,
            "backend": backend,
            **({"memory_metadata": dict(item.metadata)} if item.metadata else {}),
        },
    )


class MemlabRetriever(BaseRetriever):
    """Retrieve one user's memories from a memlab memory as LangChain documents."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Any = Field(description="a memlab MemoryClient, Memory, RemoteMemoryClient or AsyncRemoteMemoryClient")
    user_id: str
    k: int | None = Field(default=None, ge=1, description="items per query (None: the backend's top_k)")
    sort_by_score: bool = Field(default=False, description="order by descending score instead of backend order")
    filters: MemoryFilter | None = Field(default=None, description="search only the turns this filter selects")

    @field_validator("memory")
    @classmethod
    def _wrap(cls, value: Any) -> Any:
        return _as_client(value, allow_async=True)

    @field_validator("user_id")
    @classmethod
    def _user(cls, value: str) -> str:
        return validate_user_id(value)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None
    ) -> list[Document]:
        from memlab.remote import AsyncRemoteMemoryClient

        if isinstance(self.memory, AsyncRemoteMemoryClient):
            raise TypeError("this retriever holds an AsyncRemoteMemoryClient: use ainvoke, or a RemoteMemoryClient")
        retrieval = self.memory.recall(self.user_id, query, k=self.k, filters=self.filters)
        return self._documents(retrieval.items, self.memory.backend)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun | None = None
    ) -> list[Document]:
        from memlab.remote import AsyncRemoteMemoryClient

        if isinstance(self.memory, AsyncRemoteMemoryClient):
            retrieval = await self.memory.recall(self.user_id, query, k=self.k, filters=self.filters)
            return self._documents(retrieval.items, await self.memory.backend())
        if isinstance(self.memory, MemoryClient):
            retrieval = await self.memory.arecall(self.user_id, query, k=self.k, filters=self.filters)
            return self._documents(retrieval.items, self.memory.backend)
        return await super()._aget_relevant_documents(query, run_manager=run_manager)  # type: ignore[arg-type]

    def _documents(self, found: list[MemoryItem], backend: str) -> list[Document]:
        items = list(found)
        if self.sort_by_score:
            items.sort(key=lambda i: -(i.score if i.score is not None else float("-inf")))
        return [item_to_document(i, user_id=self.user_id, backend=backend) for i in items]


def to_memlab_message(message: BaseMessage) -> Message:
    """Map a LangChain message to a memlab turn (human -> user, ai -> assistant, system -> system)."""
    if isinstance(message, HumanMessage):
        role = "user"
    elif isinstance(message, AIMessage):
        role = "assistant"
    elif isinstance(message, SystemMessage):
        role = "system"
    elif isinstance(message, ChatMessage) and message.role in ("user", "assistant", "system"):
        role = message.role
    else:
        raise ValueError(
            f"cannot store a {type(message).__name__} (type {message.type!r}) in a memlab memory: only human, "
            "ai and system messages (or ChatMessage with role user/assistant/system) are conversation turns"
        )
    content = message.content if isinstance(message.content, str) else message.text
    # model_validate: ChatMessage.role is a plain str (checked above), validated against Role by pydantic.
    return Message.model_validate({"role": role, "content": content})


class MemlabChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history whose messages are also stored in a memlab memory."""

    def __init__(
        self,
        memory: Any,
        *,
        user_id: str,
        session_id: str,
        transcript_dir: str | Path | None = None,
    ) -> None:
        self.client = _as_client(memory)
        self.user_id = validate_user_id(user_id)
        # session ids become file names here, so they follow the user-id rules.
        self.session_id = validate_user_id(session_id)
        self._path = Path(transcript_dir) / self.user_id / f"{self.session_id}.jsonl" if transcript_dir else None
        if transcript_dir is not None:
            self.client.register_user_files(transcript_dir)
        self._lock = threading.Lock()
        self._forgotten = self.client.forget_count(self.user_id)
        self._messages: list[BaseMessage] = self._load()

    def _current(self) -> list[BaseMessage]:
        """The transcript, emptied when the client forgot this user since it was loaded (lock held)."""
        forgotten = self.client.forget_count(self.user_id)
        if forgotten != self._forgotten:
            self._forgotten = forgotten
            self._messages = self._load()
        return self._messages

    def _load(self) -> list[BaseMessage]:
        if self._path is None or not self._path.exists():
            return []
        rows = []
        for number, line in enumerate(self._path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{self._path}:{number}: not a JSON message ({exc.msg})") from exc
        return messages_from_dict(rows)

    # langchain_core types BaseChatMessageHistory.messages as a plain attribute, while its own docs
    # implement it as a read-only property like this one.
    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        with self._lock:
            return list(self._current())

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        batch = list(messages)
        turns = [to_memlab_message(m) for m in batch]  # validate all before storing any
        with self._lock:
            self._current()
            if turns:
                self.client.remember(self.user_id, turns, session_id=self.session_id)
            if self._path is not None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                with self._path.open("a", encoding="utf-8") as handle:
                    handle.write("".join(json.dumps(message_to_dict(m)) + "\n" for m in batch))
            self._messages.extend(batch)

    def clear(self) -> None:
        with self._lock:
            self._messages = []
            if self._path is not None and self._path.exists():
                self._path.unlink()
