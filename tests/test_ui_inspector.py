"""The memory inspector's serving (``memlab serve --ui`` / ``MEMLAB_SERVE_UI=1``): a static page, off by
default, that adds no way into /v1 without a key. What the page does is tested in a browser
(test_ui_browser.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memlab.server.app import create_app
from memlab.server.cli import build_settings
from memlab.server.settings import ServerSettings

KEY = "inspector-key-0123456789abcdef"


def _app(tmp_path: Path, ui: bool) -> TestClient:
    settings = ServerSettings(backend="full_context", data_dir=tmp_path / "data", api_keys=[KEY], ui=ui)
    return TestClient(create_app(settings))


def test_ui_is_off_by_default_and_on_with_the_flag_or_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLAB_SERVE_UI", raising=False)
    assert build_settings([]).ui is False
    assert build_settings(["--ui"]).ui is True
    monkeypatch.setenv("MEMLAB_SERVE_UI", "1")
    assert build_settings([]).ui is True


def test_the_page_needs_no_key_and_opens_nothing_else(tmp_path: Path) -> None:
    with _app(tmp_path, ui=False) as http:
        assert http.get("/ui/").status_code == 404
    with _app(tmp_path / "on", ui=True) as http:
        page = http.get("/ui/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "set-cookie" not in page.headers
        assert http.get("/ui", follow_redirects=False).headers["location"] == "/ui/"
        assert http.get("/ui/static/ui.css").headers["content-type"].startswith("text/css")
        assert http.get("/ui/static/test_ui.py").status_code == 404
        assert http.get("/v1/users/alice/memories").status_code == 401  # still closed without a key
        assert http.get("/v1/info", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert not [p for p in http.get("/openapi.json").json()["paths"] if p.startswith("/ui")]
