"""Serve any memlab LLM as an OpenAI-compatible ``/v1/chat/completions`` endpoint (stdlib only).

Useful to run a local model (``hf`` provider, GGUF included) behind the same HTTP path that
OpenAI, vLLM or llama.cpp would take, e.g. to try ``memlab run --reader llm --llm.base-url ...``
without a hosted model::

    python -m memlab.llm.server --model path/to/model.gguf --port 8000
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from memlab.llm.base import LLM, ChatMessage
from memlab.llm.errors import ContextWindowExceeded, LLMError


class JSONHandler(BaseHTTPRequestHandler):
    """Reads and answers JSON bodies, errors in OpenAI's shape; logs requests only when the server is verbose."""

    server: LocalHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
        if self.server.verbose:
            super().log_message(format, *args)

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_json_error(
        self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None
    ) -> None:
        self.send_json(status, {"error": {"message": message, "type": kind, "code": code}})


def chat_completion(
    text: str,
    *,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    finish_reason: str = "stop",
    completion_id: str | None = None,
) -> dict[str, Any]:
    """The body of a ``/v1/chat/completions`` answer: one choice, ``text`` as the assistant's message."""
    return {
        "id": completion_id or f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


_Server = TypeVar("_Server", bound="LocalHTTPServer")


class LocalHTTPServer(ThreadingHTTPServer):
    """A threaded HTTP server that ``start()`` (or a ``with`` block) runs in a daemon thread; ``.base_url``
    is its OpenAI-style base URL (``http://host:port/v1``)."""

    daemon_threads = True
    thread_name = "memlab-http-server"
    verbose = False

    def __init__(self, handler: type[JSONHandler], *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), handler)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        # server_bind() sets server_address from getsockname(), which gives the host as str (typeshed
        # also allows bytes, which is only what a caller may pass in).
        host, port = cast("tuple[str, int]", self.server_address[:2])
        return f"http://{host}:{port}/v1"

    def start(self: _Server) -> _Server:
        self._thread = threading.Thread(target=self.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(JSONHandler):
    server: OpenAICompatServer

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.path.rstrip("/") == "/v1/models":
            self.send_json(
                200, {"object": "list", "data": [{"id": self.server.model_id, "object": "model", "owned_by": "memlab"}]}
            )
        else:
            self.send_json_error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_json_error(404, f"no route {self.path}")
            return
        # Every field is checked before the model runs: an exception escaping this handler would
        # drop the connection without any HTTP response.
        try:
            body = self.read_json()
            messages = [ChatMessage.model_validate(m) for m in body["messages"]]
            if not messages:
                raise ValueError("'messages' must not be empty")
            json_mode = (body.get("response_format") or {}).get("type") == "json_object"
            max_tokens = _optional_int(body.get("max_completion_tokens") or body.get("max_tokens"), "max_tokens")
            temperature = float(body.get("temperature") or 0.0)
            if temperature < 0:
                raise ValueError("'temperature' must be >= 0")
        except (ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
            self.send_json_error(400, f"bad request: {exc}")
            return
        try:
            with self.server.lock:
                response = self.server.llm.chat(
                    messages, json_mode=json_mode, temperature=temperature, max_tokens=max_tokens
                )
        except ContextWindowExceeded as exc:
            # As OpenAI answers it: a client error, so clients do not retry what can never fit.
            self.send_json_error(400, str(exc), "invalid_request_error", code="context_length_exceeded")
            return
        except LLMError as exc:
            self.send_json_error(500, str(exc), "server_error")
            return
        except Exception as exc:  # a model failure must still answer the client
            self.send_json_error(500, f"{type(exc).__name__}: {exc}", "server_error")
            return
        self.send_json(
            200,
            chat_completion(
                response.text,
                model=self.server.model_id,
                prompt_tokens=response.prompt_tokens,
                completion_tokens=response.completion_tokens,
                finish_reason=response.metadata.get("finish_reason", "stop"),
            ),
        )


def _optional_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name!r} must be a positive integer, got {value!r}")
    return value


class OpenAICompatServer(LocalHTTPServer):
    """``OpenAICompatServer(llm).start()`` serves on 127.0.0.1; ``.base_url`` is what clients use."""

    thread_name = "memlab-llm-server"

    def __init__(
        self, llm: LLM, *, host: str = "127.0.0.1", port: int = 0, model_id: str | None = None, verbose: bool = False
    ) -> None:
        super().__init__(_Handler, host=host, port=port)
        self.llm = llm
        self.model_id = model_id or llm.name
        self.verbose = verbose
        self.lock = threading.Lock()  # local models answer one request at a time


def main(argv: list[str] | None = None) -> None:
    from memlab.llm.config import LLMConfig, build_provider

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="local model directory, .gguf file or hub id in the local cache")
    parser.add_argument("--gguf-file", default=None)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    llm = build_provider(LLMConfig(provider="hf", model=args.model, gguf_file=args.gguf_file, device=args.device))
    server = OpenAICompatServer(llm, host=args.host, port=args.port, verbose=args.verbose)
    print(f"serving {llm.name} at {server.base_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
