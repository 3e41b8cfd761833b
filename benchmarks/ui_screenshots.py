"""The screenshots in docs/ui.md, taken in headless Chromium from real servers on 127.0.0.1.

1. A real run: ``memlab run --dataset synthetic --backends rag,full_context`` (the packaged MiniLM
   embedder, a minute or two; ``--run DIR`` uses a run directory you have instead), served by
   ``memlab ui``: the front page, the question list filtered to the questions the rows disagree on,
   and the page of one of those questions.
2. ``memlab serve --ui`` with the profile backend (hashing embedder) and a few messages of one user:
   the memory inspector with the list, a search and an item's history open.

    python benchmarks/ui_screenshots.py                 # writes docs/images/ui-*.png
    python benchmarks/ui_screenshots.py --run runs/dev  # your own run instead of the synthetic one
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memlab.testing.browser import browser_unavailable, headless_chromium  # noqa: E402

OUT = REPO / "docs" / "images"
WIDTH = 1366  # a laptop screen
MESSAGES = [
    "I adopted a grey cat named Pixel last spring.",
    "I keep bees on the roof of my apartment in Lisbon.",
    "My sister Ana is getting married in June, and I am giving the speech.",
    "I switched from coffee to green tea because coffee kept me awake.",
    "I am allergic to peanuts, so please never suggest satay.",
    "My favourite author is Ursula K. Le Guin; I reread The Dispossessed every winter.",
]


def real_run(tmp: Path) -> Path:
    out = tmp / "synthetic-run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "memlab.cli", "run", "--dataset", "synthetic", "--backends", "rag,full_context"]
    command += ["--out", str(out), "--no-plots"]
    print("running:", " ".join(command[2:]), flush=True)
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return out


def shoot(browser: Any, url: str, path: Path, before: Any = None) -> None:
    browser.set_window_size(WIDTH, 900)
    browser.get(url)
    if before is not None:
        before(browser)
    height = browser.execute_script("return Math.min(document.documentElement.scrollHeight, 4200)")
    browser.set_window_size(WIDTH, max(900, int(height)))
    time.sleep(0.3)
    browser.save_screenshot(str(path))
    print("wrote", path.relative_to(REPO))


def explorer_shots(browser: Any, run: Path) -> None:
    from memlab.ui.server import make_server, url_of

    server = make_server([run], port=0)
    server.explorer.wait_for_texts = 60  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = url_of(server)
    try:
        snapshot = server.explorer.index.snapshot()  # type: ignore[attr-defined]
        memory_rows = [r for r in snapshot.rows if not r.control]
        # A question where a memory row retrieved the evidence and the rows disagree: the page shows why.
        chosen = next(
            (
                e
                for e in snapshot.questions.values()
                if e.disagree
                and any(
                    p.retrieved_messages and set(p.evidence_messages) & set(p.retrieved_messages[:3])
                    for p in e.cells.values()
                )
            ),
            next(iter(snapshot.questions.values())),
        )
        shoot(browser, base, OUT / "ui-runs.png")
        row = memory_rows[-1].short if memory_rows else "R1"
        shoot(browser, base + f"questions?row={row}&result=wrong&disagree=1", OUT / "ui-questions.png")
        shoot(browser, base + "questions/" + quote(chosen.question_id, safe=""), OUT / "ui-question.png")
    finally:
        server.shutdown()
        server.server_close()


def inspector_shot(browser: Any, tmp: Path) -> None:
    import httpx
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from memlab.testing.server_process import start_memlab_serve

    key = "screenshot-key-0123456789abcdef"
    args = ("--backend", "profile", "--profile.embedder", "hashing", "--data-dir", str(tmp / "data"), "--ui")
    with start_memlab_serve(*args, log=tmp / "serve.log", api_keys=key) as server:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, trust_env=False) as http:
            messages = [{"role": "user", "content": text} for text in MESSAGES]
            http.post("/v1/users/alice/messages", json={"session_id": "s1", "messages": messages}).raise_for_status()
            items = http.get("/v1/users/alice/memories").json()["items"]
            tea = next(i for i in items if "tea" in i["text"])
            http.patch(
                f"/v1/users/alice/memories/{tea['id']}",
                json={"text": "I switched from coffee to green tea, and now drink rooibos in the evening."},
            ).raise_for_status()

        def use(browser: Any) -> None:
            browser.find_element(By.ID, "api-key").send_keys(key, Keys.ENTER)
            browser.find_element(By.ID, "user-id").send_keys("alice", Keys.ENTER)
            deadline = time.monotonic() + 20
            while "Page 1" not in browser.find_element(By.ID, "page-info").text and time.monotonic() < deadline:
                time.sleep(0.05)
            browser.find_element(By.ID, "search-query").send_keys("what does she drink", Keys.ENTER)
            time.sleep(0.5)
            row = browser.find_element(By.CSS_SELECTOR, f"#list tr[data-item='{tea['id']}']")
            row.find_element(By.XPATH, ".//button[.='History']").click()
            time.sleep(0.5)
            browser.execute_script("window.scrollTo(0, 0)")

        shoot(browser, server.url + "/ui/", OUT / "ui-inspector.png", before=use)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, help="a run directory to show (default: a fresh synthetic run)")
    args = parser.parse_args()
    reason = browser_unavailable()
    if reason is not None:
        print(f"no screenshots: {reason}", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ui-shots-") as folder:
        tmp = Path(folder)
        run = args.run or real_run(tmp)
        with headless_chromium(WIDTH, 900) as browser:
            explorer_shots(browser, run)
            inspector_shot(browser, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
