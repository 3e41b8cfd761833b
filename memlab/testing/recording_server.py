"""A local OpenAI-compatible ``/v1/chat/completions`` server that records every request body and
answers from a reply function: for protocol tests that check field by field what a reader sends.

    with RecordingServer(lambda body: "(b)") as server:
        ... --llm.base-url server.base_url ...
        server.requests  # [request body as sent, ...]; server.replies: the reply given to each
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]


class _Handler(BaseHTTPRequestHandler):
    server: RecordingServer

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._send(200, {"object": "list", "data": [{"id": self.server.model_id, "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        try:
            text = self.server.reply(body)
        except Exception as exc:  # the test's reply function failed: tell the client, keep serving
            self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "invalid_request_error"}})
            return
        with self.server.lock:
            self.server.requests.append(body)
            self.server.replies.append(text)
        prompt = sum(len(str(m.get("content", ""))) // 4 for m in body.get("messages", []))
        self._send(
            200,
            {
                "id": "chatcmpl-recorded",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", self.server.model_id),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5},
            },
        )


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reply: Reply, *, model_id: str = "recorded-model") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply
        self.model_id = model_id
        self.requests: list[dict[str, Any]] = []
        self.replies: list[str] = []
        self.lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

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

    def __enter__(self) -> RecordingServer:
        self._thread = threading.Thread(target=self.serve_forever, name="recording-llm-server", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
        self.server_close()
