"""Server time of the runs explorer (``memlab ui``) on a large run, and the memory inspector paging a large user.

1. Writes a run directory of ``--questions`` (5,000) questions x ``--rows`` (10) rows in the real result
   format (``memlab.testing.run_files``: predictions.jsonl, summary.json, errors.log), serves it with
   ``memlab ui``'s server on 127.0.0.1 and measures, over ``--requests`` requests each, the server
   time (the ``Server-Timing`` header: request parsed to page built) and the client time (request
   sent to response read) of the front page, question pages (random questions; also opened from a
   filtered list, which adds that list's previous / next) and question-list
   filters (row right/wrong, field values, "rows disagree", distance, sorted, paged). Also: the
   first load (reading and indexing the files) and a reload after 100 new predictions were appended
   (a run in progress). Targets (issue 33): front page and question page p95 <= 150 ms, filter
   p95 <= 300 ms.
2. Starts ``memlab serve --ui`` (full_context backend, an API key), stores ``--memories`` (10,000)
   memories for one user through the API, and in headless Chromium pages through all of them with
   the inspector's "Next page" button, recording per page the time to show it, the rows on the page
   and the items each /v1 response carried: the page never holds more than one page of items.
   Skipped, saying why, without a browser.

    python benchmarks/bench_ui.py
    python benchmarks/bench_ui.py --questions 500 --rows 4 --requests 30 --memories 1000   # quick
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memlab.results import PREDICTIONS_FILE  # noqa: E402
from memlab.testing.run_files import synthetic_predictions, write_run_files  # noqa: E402

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, never a proxy
FILTERS = (  # {last}: the last memory row (R<rows - 1>); the control is R<rows>
    "/questions?row=R3&result=wrong",
    "/questions?row={last}&result=right&field=who:self",
    "/questions?disagree=1&sort=-distance",
    "/questions?type=recall_user_shared_facts&field=updated:true&sort=right",
    "/questions?distance=16k-32k&row=R1&result=wrong&disagree=1&page=2",
    "/questions?field=scenario:email&field=who:family&sort=-right&per=200",
    "/questions?q=q04&sort=distance",
)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def fetch(base: str, path: str) -> tuple[float, float, int]:
    """(server ms from Server-Timing, client ms, bytes) of one GET."""
    started = time.perf_counter()
    with OPENER.open(base + path.lstrip("/")) as response:
        body = response.read()
        timing = response.headers["Server-Timing"]
    client = 1000 * (time.perf_counter() - started)
    return float(timing.split("dur=")[1]), client, len(body)


def measure(base: str, name: str, paths: list[str], target: float | None) -> bool:
    server, client, size = [], [], []
    for path in paths:
        s, c, n = fetch(base, path)
        server.append(s)
        client.append(c)
        size.append(n)
    ok = target is None or p95(server) <= target
    verdict = "" if target is None else f"  target p95 <= {target:.0f} ms: {'met' if ok else 'MISSED'}"
    print(
        f"{name:<16} n={len(paths):<4} server ms p50 {statistics.median(server):7.1f}  p95 {p95(server):7.1f}  "
        f"max {max(server):7.1f} | client ms p95 {p95(client):7.1f} | page {statistics.median(size) / 1024:6.1f} KiB"
        + verdict
    )
    return ok


def bench_explorer(args: argparse.Namespace, tmp: Path) -> bool:
    from memlab.ui.server import make_server, url_of

    started = time.perf_counter()
    run = write_run_files(tmp / "big-run", questions=args.questions, rows=args.rows, seed=1)
    size = (run / PREDICTIONS_FILE).stat().st_size
    print(
        f"run directory: {args.questions:,} questions x {args.rows} rows = {args.questions * args.rows:,} predictions "
        f"({size / 2**20:.1f} MiB predictions.jsonl), written in {time.perf_counter() - started:.1f} s"
    )
    started = time.perf_counter()
    server = make_server([run], port=0)  # reads and indexes the files
    indexed = time.perf_counter() - started
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = url_of(server)
    try:
        first, _, _ = fetch(base, "/")  # draws the plots once
        print(
            f"first load: files read and indexed in {1000 * indexed:.0f} ms; first front page {first:.0f} ms (plots drawn)"
        )
        rng = random.Random(0)
        ids = list(server.explorer.index.snapshot().questions)  # type: ignore[attr-defined]
        n = args.requests
        ok = measure(base, "front page /", ["/"] * n, 150)
        ok &= measure(base, "question page", [f"/questions/{quote(rng.choice(ids))}" for _ in range(n)], 150)
        within = "?list=" + quote("row=R2&result=wrong&sort=-distance")  # opened from a list: previous / next in it
        ok &= measure(base, "question in list", [f"/questions/{quote(rng.choice(ids))}{within}" for _ in range(n)], 150)
        ok &= measure(base, "question list", ["/questions"] * n, 300)
        filters = [f.format(last=f"R{args.rows - 1}") for f in FILTERS]
        ok &= measure(base, "list filters", [filters[i % len(filters)] for i in range(n)], 300)

        # A run in progress: 100 more predictions appended; the next request reads only those.
        extra, _ = synthetic_predictions(args.questions + 10, args.rows, seed=1)
        with (run / PREDICTIONS_FILE).open("a", encoding="utf-8") as handle:
            for prediction in extra[-100:]:
                handle.write(prediction.model_dump_json() + "\n")
        index = server.explorer.index  # type: ignore[attr-defined]
        started = time.perf_counter()
        reload_ms, _, _ = fetch(base, "/questions?disagree=1")
        print(f"reload after 100 appended predictions (parse the new lines, add them to the index): {reload_ms:.0f} ms")
        # The rows' summaries and tests follow in a background thread; pages answer meanwhile.
        during = []
        while index.recomputing():
            during.append(fetch(base, f"/questions/{quote(rng.choice(ids))}")[0])
        print(
            f"rows and paired tests recomputed in the background in {time.perf_counter() - started:.1f} s; "
            f"{len(during)} question pages served meanwhile, server ms p95 "
            f"{p95(during) if during else 0:.1f} (the recomputation holds the GIL at times)"
        )
        return ok
    finally:
        server.shutdown()
        server.server_close()


def bench_inspector(args: argparse.Namespace, tmp: Path) -> bool:
    from memlab.testing.browser import browser_unavailable, headless_chromium
    from memlab.testing.server_process import start_memlab_serve

    reason = browser_unavailable()
    if reason is not None:
        print(f"inspector: skipped: {reason}")
        return True
    import httpx
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    key = "bench-ui-key-0123456789abcdef"
    log = tmp / "serve.log"
    data = tmp / "data"
    with start_memlab_serve(
        "--backend", "full_context", "--data-dir", str(data), "--ui", log=log, api_keys=key
    ) as server:
        started = time.perf_counter()
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, trust_env=False) as http:
            batch = 500
            for start in range(0, args.memories, batch):
                messages = [
                    {"role": "user", "content": f"memory {i}: the user mentioned fact number {i}"}
                    for i in range(start, min(args.memories, start + batch))
                ]
                response = http.post(
                    "/v1/users/bench/messages",
                    json={"session_id": f"s{start // batch}", "messages": messages},
                    timeout=120,
                )
                response.raise_for_status()
        print(f"inspector: {args.memories:,} memories stored for one user in {time.perf_counter() - started:.1f} s")
        with headless_chromium() as browser:
            browser.get(server.url + "/ui/")
            browser.find_element(By.ID, "api-key").send_keys(key, Keys.ENTER)
            browser.find_element(By.ID, "user-id").send_keys("bench", Keys.ENTER)
            info = browser.find_element(By.ID, "page-info")

            def wait_page(number: int) -> None:
                deadline = time.monotonic() + 30
                while not info.text.startswith(f"Page {number} ·") and time.monotonic() < deadline:
                    time.sleep(0.005)
                if not info.text.startswith(f"Page {number} ·"):
                    raise RuntimeError(f"page {number} did not show: {info.text!r}")

            wait_page(1)
            seen, rows_max, times, page = 0, 0, [], 1
            while True:
                rows = len(browser.find_elements(By.CSS_SELECTOR, "#list tbody tr"))
                seen += rows
                rows_max = max(rows_max, rows)
                button = browser.find_element(By.ID, "page-next")
                if not button.is_enabled():
                    break
                clicked = time.perf_counter()
                button.click()
                page += 1
                wait_page(page)
                times.append(1000 * (time.perf_counter() - clicked))
            responses = browser.execute_script(
                "return performance.getEntriesByType('resource')"
                ".filter(function (e) { return e.name.indexOf('/memories?') >= 0; })"
                ".map(function (e) { return [e.name, e.encodedBodySize || e.transferSize]; })"
            )
        largest = max(size for _, size in responses) if responses else 0
        limits = sorted({name.split("limit=")[1].split("&")[0] for name, _ in responses if "limit=" in name})
        limited = len(limits) == 1 and all("limit=" in name for name, _ in responses)
        ok = seen == args.memories and rows_max <= 100 and limited
        print(
            f"inspector: paged through {seen:,} of {args.memories:,} memories in {page} pages of at most {rows_max} rows "
            f"({len(responses)} /v1 list requests, "
            + (f"each with limit={limits[0]}" if limited else f"limits {limits or 'none'}")
            + f", largest response {largest / 1024:.1f} KiB); "
            f"next page shown in p50 {statistics.median(times):.0f} ms, p95 {p95(times):.0f} ms"
            + ("" if ok else "  UNEXPECTED: not every memory was seen once, or a page held too many")
        )
        return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=10, help="rows, the blind control included (at least 4)")
    parser.add_argument("--requests", type=int, default=100, help="requests per page kind")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--no-inspector", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as folder:
        tmp = Path(folder)
        ok = bench_explorer(args, tmp)
        if not args.no_inspector:
            ok &= bench_inspector(args, tmp)
    print("all targets met" if ok else "some target missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
