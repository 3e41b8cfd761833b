"""The web UI in a real browser: headless Chromium (Debian's chromium + chromium-driver) through Selenium,
against servers on 127.0.0.1: the runs explorer (``memlab ui``) and the memory inspector
(``memlab serve --ui``, the ``notes`` backend of test_server.py, which can list, update, delete and
keep history). Skipped, with the reason, only where no browser can be driven."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memlab.testing.browser import browser_unavailable, headless_chromium
from memlab.testing.run_files import write_run_files
from memlab.ui.server import make_server, url_of

pytestmark = pytest.mark.skipif(browser_unavailable() is not None, reason=str(browser_unavailable()))

WAIT = 15.0


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as driver:
        yield driver


def wait_for(condition: Any, what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception:  # noqa: BLE001 - the element is not there yet
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_runs_explorer_front_list_filter_and_question_by_keyboard(tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    run = write_run_files(tmp_path / "run", questions=80, rows=3)
    server = make_server([run], port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = url_of(server)
    try:
        browser.get(base)
        assert browser.title == "Runs · memlab"
        assert "backend0/embedding[minilm]" in browser.find_element(By.TAG_NAME, "table").text
        images = browser.find_elements(By.CSS_SELECTOR, "figure img")
        assert images and all(browser.execute_script("return arguments[0].naturalWidth", i) > 0 for i in images)

        # Keyboard: the skip link comes first, then the navigation.
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.TAB)
        assert browser.switch_to.active_element.text == "Skip to content"
        browser.switch_to.active_element.send_keys(Keys.TAB)
        assert browser.switch_to.active_element.text == "Runs"
        browser.switch_to.active_element.send_keys(Keys.TAB)
        browser.switch_to.active_element.send_keys(Keys.ENTER)
        wait_for(lambda: browser.current_url == base + "questions", "the question list")

        # Filter by labelled controls; the result is a stable URL.
        Select(browser.find_element(By.XPATH, "//label[contains(., 'Row')]/select")).select_by_value("R2")
        Select(browser.find_element(By.XPATH, "//label[contains(., 'Row was')]/select")).select_by_value("wrong")
        browser.find_element(By.XPATH, "//label[contains(., 'rows disagree')]/input").click()
        browser.find_element(By.XPATH, "//label[contains(., 'Id contains')]/input").send_keys(Keys.ENTER)
        wait_for(lambda: "row=R2" in browser.current_url, "the filtered list")
        assert "result=wrong" in browser.current_url and "disagree=1" in browser.current_url
        status = browser.find_element(By.CSS_SELECTOR, "[role=status]").text
        assert "questions match" in status
        marks = browser.find_elements(By.CSS_SELECTOR, "tbody tr td:nth-child(6) .mark")  # R2's column
        assert marks and all("wrong" in m.get_attribute("title") for m in marks)

        browser.find_element(By.CSS_SELECTOR, "tbody tr th a").click()
        wait_for(lambda: "/questions/" in browser.current_url, "a question page")
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Question ")
        picks = browser.find_elements(By.XPATH, '//h2[.="Each row\'s pick"]/following-sibling::div[1]//tbody/tr')
        assert len(picks) == 3
        assert browser.find_elements(By.CSS_SELECTOR, "li.turn.evidence .badge"), "evidence turns highlighted"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def inspector_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from test_server import ADMIN_KEY, start_server

    tmp = tmp_path_factory.mktemp("inspector")
    server = start_server(tmp, "--backend", "notes", "--data-dir", str(tmp / "data"), "--ui")
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, trust_env=False) as http:
        for batch in range(3):  # 60 memories: more than one page
            messages = [
                {
                    "role": "user",
                    "content": f"note {batch * 20 + i} about bees" if i % 5 == 0 else f"note {batch * 20 + i}",
                }
                for i in range(20)
            ]
            assert (
                http.post(
                    "/v1/users/alice/messages", json={"session_id": f"s{batch}", "messages": messages}
                ).status_code
                == 201
            )
    yield server
    server.stop()


def test_inspector_is_static_and_v1_stays_closed(inspector_server: Any) -> None:
    with httpx.Client(base_url=inspector_server.url, trust_env=False) as anonymous:
        page = anonymous.get("/ui/")
        assert page.status_code == 200 and "Memory inspector" in page.text
        assert "set-cookie" not in page.headers
        assert "connect-src 'self'" in page.headers["content-security-policy"]
        assert anonymous.get("/ui/static/inspector.js").status_code == 200
        assert anonymous.get("/ui/static/../app.py").status_code == 404
        assert anonymous.get("/v1/users/alice/memories").status_code == 401
        assert "/ui/" not in anonymous.get("/openapi.json").text


def test_inspector_lists_pages_searches_edits_deletes_restores_exports_and_forgets(
    inspector_server: Any, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from test_server import ALICE_KEY

    browser.get(inspector_server.url + "/ui/")
    find = browser.find_element

    def message() -> str:
        return str(find(By.ID, "message").text)

    find(By.ID, "api-key").send_keys("wrong-key-0123456789abcdef", Keys.ENTER)
    wait_for(lambda: "failed (401)" in message(), "the refused key")
    find(By.ID, "api-key").send_keys(ALICE_KEY, Keys.ENTER)
    wait_for(lambda: message() == "Key accepted.", "the key")
    assert browser.execute_script("return sessionStorage.getItem('memlab-inspector-key')") == ALICE_KEY
    assert browser.get_cookies() == []

    find(By.ID, "user-id").send_keys("bob", Keys.ENTER)  # a user this key may not act for
    wait_for(lambda: "failed (403)" in message(), "the 403")
    user = find(By.ID, "user-id")
    user.clear()
    user.send_keys("alice", Keys.ENTER)
    wait_for(lambda: "Page 1 · 50 item(s) · more follow" in find(By.ID, "page-info").text, "the first page")
    find(By.ID, "page-next").click()
    wait_for(lambda: "Page 2 · 10 item(s)" in find(By.ID, "page-info").text, "the second page")
    find(By.ID, "page-prev").click()
    wait_for(lambda: find(By.ID, "page-info").text.startswith("Page 1"), "back to the first page")

    find(By.ID, "search-query").send_keys("bees", Keys.ENTER)
    wait_for(lambda: find(By.CSS_SELECTOR, "#search-results tbody tr"), "search results")
    scores = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#search-results tbody td.num")]
    assert scores and all(float(s) > 0 for s in scores)

    first = find(By.CSS_SELECTOR, "#list tbody tr")
    item_id = first.get_attribute("data-item")
    first.find_element(By.XPATH, ".//button[.='Edit']").click()
    area = first.find_element(By.TAG_NAME, "textarea")
    area.clear()
    area.send_keys("note corrected by hand")
    first.find_element(By.XPATH, ".//button[.='Save']").click()
    wait_for(lambda: message() == f"Saved {item_id}.", "the edit")

    first.find_element(By.XPATH, ".//button[.='History']").click()
    wait_for(lambda: "UPDATE" in find(By.ID, "history").text, "the history with the edit")

    find(By.CSS_SELECTOR, f"#list tr[data-item='{item_id}'] button.danger").click()
    browser.switch_to.alert.accept()
    wait_for(lambda: message().startswith(f"Deleted {item_id}."), "the delete")
    assert not browser.find_elements(By.CSS_SELECTOR, f"#list tr[data-item='{item_id}']")
    assert find(By.ID, "restore-id").get_attribute("value") == item_id
    find(By.CSS_SELECTOR, "#restore-form button").click()
    # The notes backend has no restore: the service's answer is shown, whatever it is, without breaking the page.
    wait_for(lambda: "Cannot restore" in message() or "Restored" in message(), "the restore answer")

    find(By.ID, "export").click()
    wait_for(lambda: message().startswith("Export of alice downloaded (59 item(s))"), "the export")

    forget = find(By.ID, "forget")
    assert not forget.is_enabled()
    find(By.ID, "forget-confirm").send_keys("alic")
    assert not forget.is_enabled()
    find(By.ID, "forget-confirm").send_keys("e")
    assert forget.is_enabled()
    forget.click()
    wait_for(lambda: message() == "Everything stored about alice was deleted.", "the forget")
    wait_for(lambda: "No memories stored" in find(By.ID, "list").text, "the empty list")
