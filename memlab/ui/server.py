"""``memlab ui RUN_DIR...``: the runs explorer over HTTP, on the standard library's threading server.

Read-only, GET only, no state but the indexed result files. Each answer carries a ``Server-Timing``
header with the time spent building it (``benchmarks/bench_ui.py`` reads it), and a
Content-Security-Policy that allows nothing from elsewhere (the pages need nothing from elsewhere).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from memlab.ui.dataset_context import DatasetTexts
from memlab.ui.pages import FrontPage, bad_request, not_found, question_list, question_page
from memlab.ui.question_filter import FilterError, QuestionQuery
from memlab.ui.run_index import RunIndex

log = logging.getLogger("memlab.ui")

STATIC_DIR = Path(__file__).parent / "static"
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
DEFAULT_PORT = 8700


class RunsExplorer:
    """The pages of the runs explorer, independent of the HTTP server (tests call ``answer``)."""

    def __init__(self, run_dirs: Sequence[str | Path], wait_for_texts: float = 0.0) -> None:
        self.index = RunIndex(run_dirs)
        self.texts = DatasetTexts()
        self.front = FrontPage()
        self.wait_for_texts = wait_for_texts  # seconds a question page may wait for its dataset (scripts)
        self._front_lock = threading.Lock()

    def answer(self, target: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of ``target`` (path and query)."""
        parts = urlsplit(target)
        path = parts.path
        if path.startswith("/static/"):
            return self._static(path[len("/static/") :])
        html = "text/html; charset=utf-8"
        snapshot = self.index.snapshot()
        if path == "/":
            with self._front_lock:  # one drawing of the plots at a time
                return 200, html, self.front.render(snapshot).encode()
        if path == "/questions":
            try:
                query = QuestionQuery.parse(parse_qs(parts.query, keep_blank_values=False))
                return 200, html, question_list(snapshot, query).encode()
            except FilterError as exc:
                return 400, html, bad_request(str(exc)).encode()
        if path.startswith("/questions/"):
            question_id = unquote(path[len("/questions/") :])
            try:
                carried = parse_qs(parts.query).get("list", [""])[-1]
                within = QuestionQuery.parse(parse_qs(carried)) if carried else None
                page = question_page(snapshot, question_id, self.texts, self.wait_for_texts, within)
            except FilterError as exc:
                return 400, html, bad_request(f"list: {exc}").encode()
            if page is None:
                return 404, html, not_found(f"No run has a question {question_id!r}.").encode()
            return 200, html, page.encode()
        return 404, html, not_found(f"No page {path!r}.").encode()

    def _static(self, name: str) -> tuple[int, str, bytes]:
        path = STATIC_DIR / name
        if "/" in name or path.suffix not in STATIC_TYPES or not path.is_file():
            return 404, "text/plain; charset=utf-8", b"not found"
        return 200, STATIC_TYPES[path.suffix], path.read_bytes()


def _handler(explorer: RunsExplorer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "memlab-ui"

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            started = time.perf_counter()
            try:
                status, content_type, body = explorer.answer(self.path)
            except Exception:  # noqa: BLE001 - one broken page must not stop the server; the log has it
                log.exception("GET %s failed", self.path)
                status, content_type, body = 500, "text/plain; charset=utf-8", b"internal error (see the server log)"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "max-age=300" if self.path.startswith("/static/") else "no-store")
            self.send_header("Server-Timing", f"app;dur={1000 * (time.perf_counter() - started):.2f}")
            for name, value in SECURITY_HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self) -> None:  # noqa: N802
            self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
            self.send_header("Allow", "GET")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
            log.info("%s - %s", self.address_string(), format % args)

    return Handler


def make_server(
    run_dirs: Sequence[str | Path], host: str = "127.0.0.1", port: int = DEFAULT_PORT
) -> ThreadingHTTPServer:
    """The explorer's HTTP server, bound (port 0: any free port), not yet serving."""
    explorer = RunsExplorer(run_dirs)
    explorer.index.snapshot()  # read the runs now: a bad run directory fails here, not on the first page
    server = ThreadingHTTPServer((host, port), _handler(explorer))
    server.daemon_threads = True
    server.explorer = explorer  # type: ignore[attr-defined]
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    host, port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


__all__ = ["DEFAULT_PORT", "RunsExplorer", "make_server", "url_of"]
