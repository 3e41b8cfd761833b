"""A local OpenAI-compatible ``/v1/chat/completions`` server that records every request body and
answers from a reply function: for protocol tests that check field by field what a reader sends.

    with RecordingServer(lambda body: "(b)") as server:
        ... --llm.base-url server.base_url ...
        server.requests  # [request body as sent, ...]; server.replies: the reply given to each
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from memlab.llm.server import JSONHandler, LocalHTTPServer, chat_completion

Reply = Callable[[dict[str, Any]], str]


class _Handler(JSONHandler):
    server: RecordingServer

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self.send_json(200, {"object": "list", "data": [{"id": self.server.model_id, "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        try:
            text = self.server.reply(body)
        except Exception as exc:  # the test's reply function failed: tell the client, keep serving
            self.send_json_error(400, f"{type(exc).__name__}: {exc}")
            return
        with self.server.lock:
            self.server.requests.append(body)
            self.server.replies.append(text)
        prompt = sum(len(str(m.get("content", ""))) // 4 for m in body.get("messages", []))
        self.send_json(
            200,
            chat_completion(
                text,
                model=body.get("model", self.server.model_id),
                prompt_tokens=prompt,
                completion_tokens=5,
                completion_id="chatcmpl-recorded",
            ),
        )


class RecordingServer(LocalHTTPServer):
    thread_name = "recording-llm-server"

    def __init__(self, reply: Reply, *, model_id: str = "recorded-model") -> None:
        super().__init__(_Handler)
        self.reply = reply
        self.model_id = model_id
        self.requests: list[dict[str, Any]] = []
        self.replies: list[str] = []
        self.lock = threading.Lock()

    def contents(self) -> list[str]:
        """The last message's content of every recorded request, in arrival order."""
        with self.lock:
            return [r["messages"][-1]["content"] for r in self.requests]

    def llm_settings(self, **extra: Any) -> dict[str, Any]:
        """``--llm.*`` settings that point a reader (or judge) at this server."""
        return {
            "base_url": self.base_url,
            "model": "gpt-4o-mini",
            "api_key": "test-key",
            "timeout": 10,
            "max_retries": 0,
            **extra,
        }
