"""The OpenAI-compatible path against a real HTTP server on 127.0.0.1 that the test starts:
success, JSON mode, 429 then success, timeout, malformed bodies; and the llm reader end to end."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from question_helpers import choice_question, open_question

from memlab.llm import LLMConfigError, LLMRequestFailed, make_llm
from memlab.llm.base import LLM, LLMResponse
from memlab.llm.server import OpenAICompatServer
from memlab.readers.llm import LLMReader
from memlab.registry import create_reader
from memlab.types import Retrieval


class ScriptedServer(ThreadingHTTPServer):
    """``/v1/chat/completions`` answering from a script of behaviours, one per request."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[tuple[str, Any]] = []
        self.default: tuple[str, Any] = ("ok", "(b)")
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def next(self) -> tuple[str, Any]:
        with self.lock:
            return self.script.pop(0) if self.script else self.default


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def log_message(self, *args: Any) -> None:
        pass

    def _raw(
        self, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._raw(200, json.dumps({"object": "list", "data": [{"id": "served-7b", "object": "model"}]}).encode())

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append(body)
        kind, arg = self.server.next()
        if kind == "sleep":  # longer than the client's timeout
            time.sleep(arg)
            kind, arg = "ok", "(a)"
        if kind == "429":
            self._raw(
                429, b'{"error": {"message": "slow down", "type": "rate_limit"}}', headers={"Retry-After": str(arg)}
            )
        elif kind == "status":
            self._raw(arg, json.dumps({"error": {"message": f"status {arg}"}}).encode())
        elif kind == "malformed":
            self._raw(200, b'{"id": "x", "choices": [{"message": {"content": ', "application/json")
        elif kind == "html":
            self._raw(200, b"<html>bad gateway</html>", "text/html")
        else:
            content = json.dumps({"answer": "c"}) if kind == "json" else arg
            usage = {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127}
            reply = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": usage,
            }
            self._raw(200, json.dumps(reply).encode())


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def config(server: ScriptedServer, tmp_path, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": server.base_url,
        "model": "gpt-4o-mini",
        "api_key": "test-key",
        "timeout": 0.5,
        "max_retries": 2,
        "initial_backoff": 0.01,
        "cache_dir": str(tmp_path),
        **extra,
    }


QUESTION = choice_question(
    "User: What should I cook tonight?",
    ["(a) Steak", "(b) A vegetarian curry", "(c) Pork ribs", "(d) Nothing"],
    answer=1,
)
MEMORY = Retrieval(context="User: I became vegetarian last month.", tokens=8)
HELLO = [{"role": "user", "content": "hi"}]


def test_success_reports_usage_and_cost(server, tmp_path):
    llm = make_llm(config(server, tmp_path))
    response = llm.chat(HELLO, max_tokens=5)
    assert response.text == "(b)" and response.prompt_tokens == 120 and response.completion_tokens == 7
    assert response.metadata["cost_usd"] == pytest.approx((120 * 0.15 + 7 * 0.60) / 1e6)
    sent = server.requests[-1]
    assert sent["model"] == "gpt-4o-mini" and sent["max_tokens"] == 5 and sent["temperature"] == 0.0
    assert "response_format" not in sent


def test_json_mode_sends_response_format(server, tmp_path):
    server.script = [("json", None)]
    response = make_llm(config(server, tmp_path)).chat(HELLO, json_mode=True)
    assert json.loads(response.text) == {"answer": "c"}
    assert server.requests[-1]["response_format"] == {"type": "json_object"}


def test_rate_limit_then_success(server, tmp_path):
    server.script = [("429", 0), ("429", 0), ("ok", "(d)")]
    response = make_llm(config(server, tmp_path)).chat(HELLO)
    assert response.text == "(d)" and response.metadata["attempts"] == 3
    assert len(server.requests) == 3


def test_timeout_then_success_and_persistent_timeout(server, tmp_path):
    server.script = [("sleep", 1.5)]
    response = make_llm(config(server, tmp_path)).chat(HELLO)
    assert response.text == "(b)" and response.metadata["attempts"] == 2
    server.script = [("sleep", 1.5)] * 3
    with pytest.raises(LLMRequestFailed, match="timed out"):
        make_llm(config(server, tmp_path)).chat([{"role": "user", "content": "other"}])


@pytest.mark.parametrize("kind", ["malformed", "html"])
def test_malformed_body_is_retried_then_reported(server, tmp_path, kind):
    server.script = [(kind, None), ("ok", "(c)")]
    assert make_llm(config(server, tmp_path)).chat(HELLO).text == "(c)"
    server.script = [(kind, None)] * 3
    with pytest.raises(LLMRequestFailed, match="malformed response body"):
        make_llm(config(server, tmp_path)).chat([{"role": "user", "content": "again"}])


def test_server_error_is_retried_but_auth_error_is_a_config_error(server, tmp_path):
    server.script = [("status", 503), ("ok", "(a)")]
    assert make_llm(config(server, tmp_path)).chat(HELLO).text == "(a)"
    server.script = [("status", 401)]
    with pytest.raises(LLMConfigError, match="status 401"):
        make_llm(config(server, tmp_path)).chat([{"role": "user", "content": "x"}])
    assert len(server.requests) == 3  # the 401 was not retried


def test_model_discovered_from_models_endpoint(server, tmp_path):
    llm = make_llm(config(server, tmp_path, model=None))
    assert llm.name == "openai:served-7b"
    llm.chat(HELLO)
    assert server.requests[-1]["model"] == "served-7b"


def test_reader_end_to_end_with_cache_and_cost(server, tmp_path):
    reader = create_reader("llm", {"llm": config(server, tmp_path)})
    assert reader.describe() == "llm:openai:gpt-4o-mini:lenient"
    server.default = ("ok", "The user is vegetarian now.\n<final_answer> (b)")
    answer = reader.answer(QUESTION, MEMORY)
    assert answer.choice == 1 and answer.error is None and answer.metadata["parse_failure"] is False
    assert (answer.prompt_tokens, answer.completion_tokens) == (120, 7)
    assert answer.metadata["cost_usd"] == pytest.approx((120 * 0.15 + 7 * 0.60) / 1e6)
    prompt = server.requests[-1]["messages"]
    assert "I became vegetarian" in prompt[0]["content"]
    assert "<final_answer>" in prompt[1]["content"] and "(b) A vegetarian curry" in prompt[1]["content"]
    # A rerun (new reader, same cache dir) sends nothing and reports the same tokens and cost.
    sent = len(server.requests)
    again = LLMReader({"llm": config(server, tmp_path)}).answer(QUESTION, MEMORY)
    assert len(server.requests) == sent
    assert again.metadata["cached"] and again.choice == 1 and again.prompt_tokens == 120
    assert again.metadata["cost_usd"] == answer.metadata["cost_usd"] and again.metadata["spent_usd"] == 0.0


def test_reader_counts_parse_failures_and_records_errors(server, tmp_path):
    reader = LLMReader({"llm": config(server, tmp_path, cache=False)})
    server.script = [("ok", "Both (a) and (c) could work.")]
    failed = reader.answer(QUESTION, MEMORY)
    assert failed.choice is None and failed.error is None and failed.scores == []
    assert failed.metadata["parse_failure"] is True and failed.metadata["raw_reply"] == "Both (a) and (c) could work."
    server.script = [("429", 0)] * 3
    errored = reader.answer(QUESTION, MEMORY)
    assert errored.error is not None and "after 3 attempts" in errored.error and errored.choice is None


def test_reader_json_mode(server, tmp_path):
    server.script = [("json", None)]
    answer = LLMReader({"llm": config(server, tmp_path), "json_mode": True}).answer(QUESTION, MEMORY)
    assert answer.choice == 2
    assert server.requests[-1]["response_format"] == {"type": "json_object"}


def test_reader_open_question(server, tmp_path):
    open_q = open_question("Where does the user live?", "Lisbon")
    server.script = [("ok", "Lisbon")]
    answer = LLMReader({"llm": config(server, tmp_path)}).answer(open_q, Retrieval(context="User: I live in Lisbon."))
    assert answer.text == "Lisbon" and answer.choice is None
    assert server.requests[-1]["max_tokens"] == 64


def test_reader_answer_many_uses_parallel_requests(server, tmp_path):
    server.default = ("ok", "(b)")
    reader = LLMReader({"llm": config(server, tmp_path, max_concurrency=3, cache=False)})
    questions = [QUESTION.model_copy(update={"id": f"q{i}", "text": f"question {i}"}) for i in range(6)]
    answers = reader.answer_many([(q, MEMORY) for q in questions])
    assert [a.choice for a in answers] == [1] * 6 and len(server.requests) == 6


class Echo(LLM):
    name = "echo:v1"

    def _chat(self, messages, *, json_mode, temperature, max_tokens):
        text = json.dumps({"answer": "a"}) if json_mode else f"echo: {messages[-1].content}"
        return LLMResponse(text=text, prompt_tokens=3, completion_tokens=2)


def test_memlab_server_round_trip(tmp_path):
    srv = OpenAICompatServer(Echo()).start()
    try:
        llm = make_llm({"base_url": srv.base_url, "cache": False, "max_retries": 0})
        assert llm.name == "openai:echo:v1"  # model id discovered from /v1/models
        response = llm.chat([{"role": "user", "content": "ping"}])
        assert response.text == "echo: ping" and (response.prompt_tokens, response.completion_tokens) == (3, 2)
        assert json.loads(llm.chat(HELLO, json_mode=True).text) == {"answer": "a"}
    finally:
        srv.stop()


def test_memlab_server_answers_bad_requests_and_model_failures_with_json(tmp_path):
    import urllib.error
    import urllib.request

    class Broken(Echo):
        def _chat(self, messages, *, json_mode, temperature, max_tokens):
            if messages[-1].content == "boom":
                raise RuntimeError("model crashed")
            return super()._chat(messages, json_mode=json_mode, temperature=temperature, max_tokens=max_tokens)

    srv = OpenAICompatServer(Broken()).start()

    def post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"{srv.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:  # a dropped connection would raise URLError/RemoteDisconnected
            return exc.code, json.loads(exc.read())

    try:
        for bad in (
            {"messages": []},
            {"messages": HELLO, "temperature": "hot"},
            {"messages": HELLO, "max_tokens": "9"},
            {"messages": HELLO, "max_tokens": 0},
            {"messages": HELLO, "response_format": "json"},
        ):
            status, body = post(bad)
            assert status == 400 and body["error"]["type"] == "invalid_request_error", bad
        status, body = post({"messages": [{"role": "user", "content": "boom"}]})
        assert status == 500 and "model crashed" in body["error"]["message"]
        status, body = post({"messages": HELLO, "max_tokens": 5, "temperature": 0.5})
        assert status == 200 and body["choices"][0]["message"]["content"] == "echo: hi"
    finally:
        srv.stop()
