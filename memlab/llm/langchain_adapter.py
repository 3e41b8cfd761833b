"""LangChain, both ways.

* ``LangChainLLM`` wraps any langchain-core ``BaseChatModel`` (ChatOpenAI, ChatAnthropic,
  ChatOllama, ...) as a memlab ``LLM``, so readers and extractors can use it.
* ``MemlabChatModel`` exposes a memlab ``LLM`` as a ``BaseChatModel``, so LangChain chains (and
  Mem0's ``langchain`` LLM provider) can use memlab's cached, retried, cost-counted models.
  ``TextChatModel`` is its base (and that of the test models in ``memlab.testing.chat_models``):
  a chat model whose reply is one text with its token usage.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from memlab.llm.base import LLM, ChatMessage, LLMResponse, response_with_usage, with_json_instruction
from memlab.llm.errors import LLMError, TransientLLMError

_TO_LANGCHAIN = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def _transient_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [TimeoutError, ConnectionError]
    try:  # langchain-openai raises the openai SDK's errors
        import openai

        types += [openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError]
    except ImportError:
        pass
    return tuple(types)


class LangChainLLM(LLM):
    """A memlab LLM backed by a LangChain chat model.

    Temperature and token limits are the chat model's own settings (LangChain has no portable
    per-call form of them); JSON mode is requested in the system message.
    """

    def __init__(self, model: BaseChatModel, *, name: str | None = None) -> None:
        if not isinstance(model, BaseChatModel):
            raise TypeError(f"LangChainLLM needs a langchain_core BaseChatModel, got {type(model).__name__}")
        self.chat_model = model
        ident = getattr(model, "model_name", None) or getattr(model, "model", None)
        self.model = ident if isinstance(ident, str) else None
        self.name = name or f"langchain:{type(model).__name__}" + (f":{self.model}" if self.model else "")
        self._transient = _transient_types()

    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float | None, max_tokens: int | None
    ) -> LLMResponse:
        if json_mode:
            messages = with_json_instruction(messages)
        converted = [_TO_LANGCHAIN[m.role](content=m.content) for m in messages]
        try:
            reply = self.chat_model.invoke(converted)
        except self._transient as exc:
            raise TransientLLMError(f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # a provider error of any kind fails this request, not the process
            raise LLMError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        usage = getattr(reply, "usage_metadata", None)
        reported = (int(usage["input_tokens"]), int(usage["output_tokens"])) if usage else None
        return response_with_usage(_text_of(reply), messages, reported, {})


def _text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    # Content blocks (Anthropic-style): keep the text parts.
    return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, (str, dict)))


class TextChatModel(BaseChatModel):
    """A LangChain chat model whose reply is one text: subclasses implement ``_reply``; cutting at
    ``stop`` sequences and reporting token usage (on the message and as ``llm_output``) happen here."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _reply(self, messages: list[BaseMessage], **kwargs: Any) -> LLMResponse:
        """The reply text with its token usage (``kwargs``: the caller's per-call options)."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        response = self._reply(messages, **kwargs)
        text = response.text
        for marker in stop or []:
            cut = text.find(marker)
            if cut >= 0:
                text = text[:cut]
        usage = {
            "input_tokens": response.prompt_tokens,
            "output_tokens": response.completion_tokens,
            "total_tokens": response.prompt_tokens + response.completion_tokens,
        }
        message = AIMessage(content=text, usage_metadata=usage, response_metadata=dict(response.metadata))
        return ChatResult(generations=[ChatGeneration(message=message)], llm_output={"token_usage": usage})


class MemlabChatModel(TextChatModel):
    """A LangChain chat model that answers through a memlab ``LLM``."""

    llm: Any
    temperature: float = 0.0
    max_tokens: int | None = None
    json_mode: bool = False

    @property
    def _llm_type(self) -> str:
        return "memlab"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"llm": self.llm.name, "temperature": self.temperature, "max_tokens": self.max_tokens}

    def _reply(self, messages: list[BaseMessage], **kwargs: Any) -> LLMResponse:
        if not isinstance(self.llm, LLM):
            raise TypeError(f"MemlabChatModel.llm must be a memlab LLM, got {type(self.llm).__name__}")
        converted = [ChatMessage(role=_role_of(m), content=_text_of(m)) for m in messages]
        return self.llm.chat(
            converted,
            json_mode=kwargs.get("json_mode", self.json_mode),
            temperature=kwargs.get("temperature", self.temperature),
            max_tokens=kwargs.get("max_tokens", self.max_tokens),
        )


def _role_of(message: BaseMessage) -> Literal["system", "user", "assistant"]:
    kind = message.type
    if kind == "system":
        return "system"
    if kind in ("human", "user"):
        return "user"
    if kind in ("ai", "assistant"):
        return "assistant"
    raise ValueError(f"memlab LLMs take system, user and assistant messages, not {kind!r} ({type(message).__name__})")
