"""mem0 with ``infer=True`` on a model that fails, through memlab's own OpenAI-compatible server.

A window whose request the endpoint refuses (a prompt over the model's window) is skipped and
counted; a reply mem0 cannot read is counted; a broken setup or an endpoint that stays down still
fails loudly. Whatever happens, what was stored before stays readable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memlab.llm import LLMConfigError, LLMError, LLMRequestFailed, make_llm
from memlab.llm.base import ChatMessage
from memlab.llm.errors import ContextWindowExceeded, refused_request
from memlab.testing import session
from memlab.testing.chat_models import mem0_extraction_reply
from memlab.testing.fake_llm import HashChoiceLLM, serve
from memlab_plugins.mem0_backend import Mem0Memory

Reply = Callable[[list[ChatMessage]], str]


def refusing(word: str) -> Reply:
    """mem0's rule-based extraction, except that a prompt holding ``word`` is "over the window"."""

    def reply(messages: list[ChatMessage]) -> str:
        if word in messages[-1].content:
            raise ContextWindowExceeded(f"fake-model: 9000 tokens exceed the model's window of 8192 ({word})")
        return mem0_extraction_reply(messages)  # type: ignore[arg-type]  # reads only .content

    return reply


@pytest.fixture
def endpoint() -> Iterator[Callable[[Reply], tuple[str, HashChoiceLLM]]]:
    servers: list[Any] = []

    def start(reply: Reply) -> tuple[str, HashChoiceLLM]:
        llm = HashChoiceLLM("fake-model", reply=reply)
        servers.append(serve(llm, model_id="fake-model"))
        return servers[-1].base_url, llm

    yield start
    for server in servers:
        server.stop()


def llm_config(url: str, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "base_url": url, "model": "fake-model", "api_key": "x", "cache": False, **extra}


def test_the_server_refuses_an_overlong_prompt_as_a_client_error(endpoint: Any) -> None:
    url, fake = endpoint(refusing("papaya"))
    llm = make_llm(llm_config(url, max_retries=3, initial_backoff=0.01))
    with pytest.raises(LLMError, match="400.*exceed the model's window") as caught:
        llm.chat([ChatMessage(role="user", content="papaya")])
    assert not isinstance(caught.value, LLMRequestFailed)
    assert fake.requests == 1, "a prompt that can never fit was retried"
    llm.close()


def test_a_refused_window_is_skipped_and_counted_the_others_are_stored(tmp_path: Path, endpoint: Any) -> None:
    url, fake = endpoint(refusing("papaya"))
    memory = Mem0Memory({"embedder": "hashing", "llm": llm_config(url), "infer_window": 1}, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "I grow papaya trees."), ("user", "I like tea.")), user_id="u")
    assert fake.requests == 2
    assert [i.text for i in memory.list_memories(user_id="u")] == ["User said: I like tea."]
    assert memory.extraction_stats() == {"windows": 2, "failed_windows": 1, "unparsed_replies": 0}
    assert "session 's', turns 0-0" in memory.extraction.failures[0] and "window" in memory.extraction.failures[0]
    assert memory.export("u")["extraction_stats"]["failed_windows"] == 1
    assert memory.extraction_failures == memory.extraction.failures  # named as the profile names its list
    # The turn count advanced: the next session continues after both turns.
    assert memory.ingest(session("s", ("user", "More.")), user_id="u").first_turn == 2
    memory.close()


def test_on_extraction_error_raise_stops_at_the_refused_window(tmp_path: Path, endpoint: Any) -> None:
    url, _ = endpoint(refusing("papaya"))
    config = {"embedder": "hashing", "llm": llm_config(url), "on_extraction_error": "raise"}
    memory = Mem0Memory(config, data_dir=tmp_path)
    with pytest.raises(Exception, match="exceed the model's window"):
        memory.ingest(session("s", ("user", "I grow papaya trees.")), user_id="u")
    memory.close()


def test_replies_mem0_cannot_read_are_counted(tmp_path: Path, endpoint: Any) -> None:
    url, _ = endpoint(lambda messages: "Sure! Here are the memories you asked for.")
    memory = Mem0Memory({"embedder": "hashing", "llm": llm_config(url), "infer_window": 1}, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "I like tea."), ("user", "I sail.")), user_id="u")
    assert memory.extraction_stats() == {"windows": 2, "failed_windows": 0, "unparsed_replies": 2}
    assert memory.list_memories(user_id="u") == []
    memory.close()


def test_an_endpoint_that_stays_down_fails_the_ingest_and_keeps_the_store(tmp_path: Path, endpoint: Any) -> None:
    url, _ = endpoint(mem0_extraction_reply)  # type: ignore[arg-type]
    config = {"embedder": "hashing", "infer_window": 1}
    memory = Mem0Memory({**config, "llm": llm_config(url)}, data_dir=tmp_path)
    memory.ingest(session("s", ("user", "I like tea.")), user_id="u")
    memory.close()

    down = llm_config("http://127.0.0.1:9/v1", max_retries=1, initial_backoff=0.01)
    memory = Mem0Memory({**config, "llm": down}, data_dir=tmp_path)
    with pytest.raises(Exception) as caught:
        memory.ingest(session("s", ("user", "I sail.")), user_id="u")
    cause: BaseException | None = caught.value
    while cause is not None and not isinstance(cause, LLMError):
        cause = cause.__cause__
    assert isinstance(cause, LLMRequestFailed), repr(caught.value)
    assert memory.extraction_stats()["failed_windows"] == 0, "a down endpoint was skipped as if one window were bad"
    assert [i.text for i in memory.list_memories(user_id="u")] == ["User said: I like tea."]
    memory.close()
    memory = Mem0Memory({**config, "llm": llm_config(url)}, data_dir=tmp_path)  # the endpoint is back
    assert memory.ingest(session("s", ("user", "I sail.")), user_id="u").first_turn == 1, "the failed turn was counted"
    assert len(memory.list_memories(user_id="u")) == 2
    memory.close()


def _wrapped(inner: BaseException) -> BaseException:
    try:
        raise RuntimeError("LLM extraction failed") from inner  # as mem0 wraps it
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    ("error", "skippable"),
    [
        (ContextWindowExceeded("9000 tokens exceed the window"), True),
        (LLMError("request rejected (400): bad"), True),
        (_wrapped(ContextWindowExceeded("over the window")), True),
        (LLMConfigError("bad key"), False),
        (_wrapped(LLMRequestFailed("failed after 5 attempts")), False),
        (ValueError("someone else's model failed"), False),
    ],
)
def test_refused_request_tells_one_bad_request_from_a_broken_endpoint(error: BaseException, skippable: bool) -> None:
    assert (refused_request(error) is not None) is skippable
