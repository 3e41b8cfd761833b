"""A local OpenAI-compatible ``/v1/chat/completions`` server (127.0.0.1 only) that records every
request body and answers with a function of the request; used by the LoCoMo, judge and
LongMemEval tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reply: Reply) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def contents(self) -> list[str]:
        """The last message's content of every recorded request, in arrival order."""
        with self.lock:
            return [r["messages"][-1]["content"] for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    server: RecordingServer

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, {"object": "list", "data": [{"id": "recorded-model", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append(request)
        text = self.server.reply(request)
        self._send(200, {
            "id": "chatcmpl-rec", "object": "chat.completion", "created": 0, "model": request.get("model", "m"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105},
        })


@contextmanager
def recording_server(reply: Reply) -> Iterator[RecordingServer]:
    server = RecordingServer(reply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def llm_settings(server: RecordingServer, **extra: Any) -> dict[str, Any]:
    """``--llm.*`` settings that point at the server."""
    return {"base_url": server.base_url, "model": "gpt-4o-mini", "api_key": "test-key", "timeout": 10,
            "max_retries": 0, **extra}
