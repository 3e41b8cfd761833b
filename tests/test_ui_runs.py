"""The runs explorer (``memlab ui``) without a browser: its pages as HTML, its filters, a run in progress,
and the server over real HTTP on 127.0.0.1. The browser tests are in test_ui_browser.py."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from html import unescape
from pathlib import Path
from urllib.parse import quote

import pytest

from memlab.cli import main as memlab_main
from memlab.report.compare import compare_runs
from memlab.results import PREDICTIONS_FILE, SUMMARY_FILE, Prediction, RunSummary, read_predictions, summarize_rows
from memlab.testing.run_files import write_run_files
from memlab.ui.server import RunsExplorer, make_server, url_of


def page(explorer: RunsExplorer, target: str) -> tuple[int, str]:
    status, _, body = explorer.answer(target)
    return status, body.decode()


def rows_marked(html: str) -> list[str]:
    """The ✓/✗ words of the question list's cells, in order."""
    return re.findall(r'<span class="mark (right|wrong|error|not-answered)', html)


def test_front_page_shows_rows_intervals_controls_and_the_holm_matrix(tmp_path: Path) -> None:
    run = write_run_files(tmp_path / "run", questions=60, rows=3)
    status, html = page(RunsExplorer([run]), "/")
    assert status == 200
    comparison = compare_runs([run])
    for row in comparison.rows:  # every row, with its Wilson interval as memlab compare prints it
        assert row.name in html
        assert row.accuracy is not None
        assert f"{100 * row.accuracy.low:.1f}, {100 * row.accuracy.high:.1f}" in html
    assert "none/embedding[minilm] (control)" in html
    assert "Paired tests between rows (McNemar, holm-adjusted)" in html
    for test in comparison.pairwise:  # the matrix cells are memlab compare's
        assert f"p={test.p_adjusted:.2g}" in html
    assert "By who" in html and "By distance to the evidence" in html  # per-field and per-distance breakdowns
    assert html.count('<img src="data:image/png;base64,') >= 2  # plots inline, nothing fetched elsewhere
    assert "http://" not in html and "https://" not in html
    assert 'href="/questions?row=R1&amp;result=wrong"' in html


def test_question_list_filters_sorts_and_pages_with_stable_urls(tmp_path: Path) -> None:
    run = write_run_files(tmp_path / "run", questions=120, rows=3)
    explorer = RunsExplorer([run])
    predictions = read_predictions(run)
    wrong_in_r1 = {p.question_id for p in predictions if p.backend == "backend0" and not p.correct}

    status, html = page(explorer, "/questions?row=R1&result=wrong&per=200")
    assert status == 200
    listed = set(re.findall(r'href="/questions/([^"?]+)["?]', html))
    assert listed == wrong_in_r1
    assert f"{len(wrong_in_r1):,} of 120 questions match" in html

    _, html = page(explorer, "/questions?field=who:self&type=recall_user_shared_facts&per=200")
    selected = {
        p.question_id
        for p in predictions
        if p.fields["who"] == "self" and p.question_type == "recall_user_shared_facts"
    }
    assert set(re.findall(r'href="/questions/([^"?]+)["?]', html)) == selected

    _, html = page(explorer, "/questions?disagree=1&per=200")  # right/wrong differ, or the picks do
    picks: dict[str, set[tuple[bool | None, int | None]]] = {}
    for p in predictions:
        picks.setdefault(p.question_id, set()).add((p.correct, p.chosen))
    disagreeing = {q for q, seen in picks.items() if len(seen) > 1}
    assert set(re.findall(r'href="/questions/([^"?]+)["?]', html)) == disagreeing
    assert any(len(set(rows_marked(cells))) == 1 for cells in re.findall(r"<tr><th scope=.*?</tr>", html))

    comparison = compare_runs([run])  # the McNemar matrix's discordant counts are the versus filter's
    test = next(
        t for t in comparison.pairwise if (t.row_a, t.row_b) == (comparison.rows[0].name, comparison.rows[1].name)
    )
    for result, expected in (("right", test.a_only), ("wrong", test.b_only), ("", test.a_only + test.b_only)):
        _, html = page(
            explorer,
            f"/questions?row=R1&versus=R2&per=200&result={result}",
        )
        assert f"{expected:,} of 120 questions match" in html, result
    _, front = page(explorer, "/")
    assert (
        f'href="/questions?row=R1&amp;result=right&amp;versus=R2" title="right in R1, wrong in R2">+{test.a_only}</a>'
        in front
    )

    # A question opened from a list steps through that list.
    _, html = page(explorer, "/questions?row=R1&result=wrong&sort=-distance&per=25")
    ids = re.findall(r'href="/questions/([^"?]+)\?list=row%3DR1%26result%3Dwrong%26sort%3D-distance%26per%3D25"', html)
    assert len(ids) == min(25, len(wrong_in_r1))
    _, question = page(explorer, f"/questions/{ids[1]}?list=row%3DR1%26result%3Dwrong%26sort%3D-distance%26per%3D25")
    assert f"2 of {len(wrong_in_r1)} in the list" in question
    assert (
        f'href="/questions/{ids[0]}?list=row%3DR1%26result%3Dwrong%26sort%3D-distance%26per%3D25" rel="prev"'
        in question
    )
    assert (
        f'href="/questions/{ids[2]}?list=row%3DR1%26result%3Dwrong%26sort%3D-distance%26per%3D25" rel="next"'
        in question
    )
    assert page(explorer, f"/questions/{ids[0]}?list=sort%3Dcolour")[0] == 400

    _, html = page(explorer, "/questions?sort=-distance&per=25")
    distances = [
        int(d.replace(",", "")) for d in re.findall(r'</td><td>who=[^<]*</td><td class="num">([\d,]+)</td>', html)
    ]
    assert distances == sorted(distances, reverse=True) and len(distances) == 25

    _, html = page(explorer, "/questions?per=25&page=2")
    assert "page 2 of 5" in html
    assert 'href="/questions?page=3&amp;per=25" rel=next' in html  # the next page's URL keeps the query

    for bad, message in (
        ("/questions?sort=colour", "sort='colour': expected one of"),
        ("/questions?row=R9", "row='R9': no such row"),
        ("/questions?page=x", "page='x': expected a whole number"),
        ("/questions?result=wrong", "result=wrong needs a row"),
        ("/questions?colour=red", "unknown query parameter 'colour'"),
    ):
        status, html = page(explorer, bad)
        assert status == 400 and message in unescape(html), bad


def _synthetic_run(out: Path) -> Path:
    """Two rows on the real synthetic dataset, so the question page has texts, turns and sessions."""
    from memlab.run.job import cached_dataset

    dataset = cached_dataset("synthetic")
    predictions = []
    for question in dataset.questions[:6]:
        history = dataset.histories[question.context_id]
        evidence = [i for i, m in enumerate(history.messages[: question.end_index]) if m.role == "user"][-1:]
        for backend, chosen in (("rag", question.answer), ("none", (question.answer + 1) % 4)):
            predictions.append(
                Prediction(
                    backend=backend,
                    reader="embedding[minilm]",
                    question_id=question.id,
                    context_id=question.context_id,
                    question_type=question.type,
                    chosen=chosen,
                    answer=question.answer,
                    correct=chosen == question.answer,
                    scores=[0.1, 0.2, 0.3, 0.4],
                    retrieved_messages=None if backend == "none" else [*evidence, 0],
                    retrieved_items=0 if backend == "none" else 2,
                    evidence_messages=evidence,
                )
            )
    out.mkdir()
    (out / PREDICTIONS_FILE).write_text("".join(p.model_dump_json() + "\n" for p in predictions))
    RunSummary(name="syn", config={"dataset": "synthetic"}, rows=summarize_rows(predictions)).save(out)
    return out


def test_question_page_shows_options_picks_scores_and_retrieved_turns_with_provenance(tmp_path: Path) -> None:
    from memlab.run.job import cached_dataset

    run = _synthetic_run(tmp_path / "syn")
    explorer = RunsExplorer([run], wait_for_texts=30)
    question = cached_dataset("synthetic").questions[0]
    status, html = page(explorer, f"/questions/{question.id}")
    assert status == 200
    assert question.text in unescape(html)
    correct = question.options[question.answer]
    assert re.search(r'<li class="correct">.*?' + re.escape(correct[:20]), html)  # the correct option marked
    assert "<strong>0.400</strong>" not in html or "(d)" in html  # the chosen option's score in bold
    assert "R1 rag/embedding[minilm]" in html and "R2 none/embedding[minilm]" in html
    assert "Shown no memory." in html  # the control
    turn = re.search(
        r'<li class="turn evidence"><div class="where">#(\d+) · session (\d+) · user · ([\d,]+) messages back', html
    )
    assert turn is not None, "retrieved evidence turn with its session and distance back"
    assert int(turn.group(3).replace(",", "")) == question.end_index - int(turn.group(1))
    assert '<strong class="badge">evidence</strong>' in html
    assert page(explorer, "/questions/no-such-question")[0] == 404


def test_question_page_without_its_dataset_says_why_and_shows_indexes(tmp_path: Path) -> None:
    run = write_run_files(tmp_path / "run", questions=5, rows=2)
    explorer = RunsExplorer([run], wait_for_texts=10)
    status, html = page(explorer, "/questions/h0-q00000")
    assert status == 200
    assert "dataset synthetic-ui-test not available" in unescape(html)
    assert re.search(r"message #\d+", html)


def test_a_run_in_progress_shows_new_predictions_on_reload(tmp_path: Path) -> None:
    source = write_run_files(tmp_path / "full", questions=30, rows=2)
    lines = (source / PREDICTIONS_FILE).read_bytes().splitlines(keepends=True)
    live = tmp_path / "live"
    live.mkdir()
    predictions = live / PREDICTIONS_FILE
    predictions.write_bytes(b"".join(lines[:20]) + lines[20][:40])  # a torn last line: being written
    explorer = RunsExplorer([live])
    _, html = page(explorer, "/")
    assert "In progress" in html and "20 predictions so far" in html
    assert explorer.index.snapshot() is explorer.index.snapshot()  # nothing changed: nothing rebuilt

    with predictions.open("ab") as handle:
        handle.write(lines[20][40:] + b"".join(lines[21:50]))
    _, html = page(explorer, "/")
    assert "50 predictions so far" in html
    _, listing = page(explorer, "/questions")
    assert "25 of 25 questions match" in listing  # the question index takes new lines at once
    assert "Rows, tests and plots as of" in html  # the summary follows within a few seconds
    explorer.index.analysis_interval = 0.0
    page(explorer, "/")  # starts recomputing them in the background; requests do not wait
    explorer.index.wait_idle()
    _, html = page(explorer, "/")
    assert "Rows, tests and plots as of" not in html
    assert explorer.index.snapshot().comparison.rows[0].questions == 25

    predictions.write_bytes(b"".join(lines[:10]) + b"not json\n")  # rewritten shorter (a repair): read again
    _, html = page(explorer, "/")
    assert "10 predictions so far" in html and "line 11: not a valid prediction" in html

    predictions.write_bytes(b"".join(lines))
    (live / SUMMARY_FILE).write_bytes((source / SUMMARY_FILE).read_bytes())
    page(explorer, "/")
    explorer.index.wait_idle()
    _, html = page(explorer, "/")
    assert "Complete: 60 predictions" in html and "Rows, tests and plots as of" not in html


def test_server_over_http_serves_pages_static_files_and_timing(tmp_path: Path) -> None:
    run = write_run_files(tmp_path / "run", questions=10, rows=2)
    server = make_server([run], port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        base = url_of(server)
        with opener.open(base + "questions?type=recall_user_shared_facts") as response:
            assert response.status == 200
            assert response.headers["Server-Timing"].startswith("app;dur=")
            assert "default-src 'self'" in response.headers["Content-Security-Policy"]
            assert "Questions" in response.read().decode()
        with opener.open(base + "static/ui.css") as response:
            assert response.headers["Content-Type"].startswith("text/css")
        for missing in ("static/../server.py", "nowhere"):
            with pytest.raises(urllib.error.HTTPError) as failure:
                opener.open(base + missing)
            assert failure.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_cli_names_a_directory_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert memlab_main(["ui", str(tmp_path)]) == 2
    assert f"{tmp_path}: no summary.json or predictions.jsonl; is this a run directory?" in capsys.readouterr().err


def test_memlab_report_points_to_the_ui(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run_files(tmp_path / "run", questions=5, rows=2)
    assert memlab_main(["report", str(run), "--no-plots"]) == 0
    assert f"memlab ui {run}" in capsys.readouterr().out


def test_text_from_result_files_is_escaped_everywhere(tmp_path: Path) -> None:
    evil = '<script>alert("x")</script>'
    predictions = [
        Prediction(
            backend=f"b{evil}",
            reader="r",
            question_id=f"q{i}{evil}",
            context_id=evil,
            question_type=evil,
            topic=evil,
            chosen=0,
            answer=i % 2,
            correct=i % 2 == 0,
            scores=[1.0, 0.0, 0.0, 0.0],
            fields={evil: evil},
            error=None if i else evil,
        )
        for i in range(4)
    ]
    run = tmp_path / "run"
    run.mkdir()
    (run / PREDICTIONS_FILE).write_text("".join(p.model_dump_json() + "\n" for p in predictions))
    (run / "errors.log").write_text(evil)
    explorer = RunsExplorer([run])
    for target in ("/", "/questions", "/questions?type=" + quote(evil), f"/questions/{quote('q0' + evil, safe='')}"):
        status, html = page(explorer, target)
        assert status == 200, target
        assert "<script>alert" not in html, target
