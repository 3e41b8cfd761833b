"""LangChain both ways: a BaseChatModel as a memlab LLM, and a memlab LLM as a BaseChatModel."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from question_helpers import choice_question

from memlab.llm import LLM, LLMError, LLMResponse, make_llm
from memlab.llm.langchain_adapter import LangChainLLM, MemlabChatModel
from memlab.readers.llm import LLMReader
from memlab.types import Retrieval


class Recording(LLM):
    name = "recording:m"

    def __init__(self) -> None:
        self.seen = []

    def _chat(self, messages, *, json_mode, temperature, max_tokens):
        self.seen.append((messages, json_mode, temperature, max_tokens))
        return LLMResponse(text=f"reply to {messages[-1].content} STOP tail", prompt_tokens=11, completion_tokens=4)


def test_langchain_model_as_memlab_llm_counts_usage():
    reply = AIMessage(content="(c)", usage_metadata={"input_tokens": 50, "output_tokens": 2, "total_tokens": 52})
    llm = LangChainLLM(GenericFakeChatModel(messages=iter([reply])))
    response = llm.chat([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    assert response.text == "(c)" and (response.prompt_tokens, response.completion_tokens) == (50, 2)
    assert llm.name.startswith("langchain:GenericFakeChatModel")


def test_langchain_model_without_usage_gets_estimate_and_json_instruction():
    model = FakeListChatModel(responses=['{"answer": "a"}'])
    response = LangChainLLM(model).chat([{"role": "user", "content": "three little words"}], json_mode=True)
    assert response.text == '{"answer": "a"}' and response.metadata["usage_estimated"]
    assert response.prompt_tokens > 3  # the JSON instruction was added in a system message


def test_langchain_errors_become_llm_errors():
    class Broken(FakeListChatModel):
        def _call(self, *args, **kwargs):
            raise RuntimeError("provider exploded")

    with pytest.raises(LLMError, match="provider exploded"):
        LangChainLLM(Broken(responses=["x"])).chat([{"role": "user", "content": "u"}])
    with pytest.raises(TypeError):
        LangChainLLM(object())  # type: ignore[arg-type]


def test_make_llm_from_langchain_class_path(tmp_path):
    llm = make_llm(
        {
            "langchain_class": "langchain_core.language_models.fake_chat_models:FakeListChatModel",
            "langchain_kwargs": {"responses": ["first", "second"]},
            "cache_dir": str(tmp_path),
        }
    )
    assert llm.chat([{"role": "user", "content": "a"}]).text == "first"
    assert llm.chat([{"role": "user", "content": "a"}]).cached  # same prompt: from the cache


def test_reader_with_a_langchain_model_instance(tmp_path):
    question = choice_question("Pick one", ["w", "x", "y", "z"], answer=3)
    reader = LLMReader({"llm": {"cache_dir": str(tmp_path)}}, llm=FakeListChatModel(responses=["<final_answer> (d)"]))
    assert reader.answer(question, Retrieval()).choice == 3
    assert reader.describe() == "llm:langchain:FakeListChatModel:lenient"


def test_memlab_llm_as_langchain_model_in_a_chain():
    inner = Recording()
    chat = MemlabChatModel(llm=inner, max_tokens=20)
    chain = ChatPromptTemplate.from_messages([("system", "be brief"), ("human", "{q}")]) | chat | StrOutputParser()
    assert chain.invoke({"q": "hello"}) == "reply to hello STOP tail"
    messages, json_mode, temperature, max_tokens = inner.seen[-1]
    assert [m.role for m in messages] == ["system", "user"] and max_tokens == 20 and not json_mode
    result = chat.invoke([SystemMessage("s"), HumanMessage("q"), AIMessage("a"), HumanMessage("again")], stop=["STOP"])
    assert result.content == "reply to again "
    assert result.usage_metadata == {"input_tokens": 11, "output_tokens": 4, "total_tokens": 15}
    with pytest.raises(ValueError, match="tool"):
        chat.invoke([ToolMessage("r", tool_call_id="1")])


def test_round_trip_memlab_to_langchain_to_memlab(tmp_path):
    wrapped = make_llm({"cache_dir": str(tmp_path)}, llm=MemlabChatModel(llm=Recording()))
    response = wrapped.chat([{"role": "user", "content": "x"}])
    assert response.text.startswith("reply to x") and response.prompt_tokens == 11
