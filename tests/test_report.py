"""Report tables, plots and report.md, built from fake run directories with known answers."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from memlab.report import (
    DISTANCE_PLOT,
    TYPE_PLOT,
    ReportError,
    distance_table,
    load_run,
    markdown_table,
    metrics_table,
    ordered_rows,
    plot_run,
    terminal_table,
    type_labels,
    write_report,
)
from memlab.results import (
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    Prediction,
    PredictionWriter,
    RowSummary,
    RunSummary,
    read_predictions,
    summarize_rows,
    wilson,
)

FACTS, IDEAS = "recall_user_shared_facts", "suggest_new_ideas"


def pred(backend: str, reader: str, qid: str, qtype: str, correct: bool | None, **extra) -> Prediction:
    return Prediction(
        backend=backend,
        reader=reader,
        question_id=qid,
        context_id="ctx",
        question_type=qtype,
        answer=0,
        chosen=0 if correct else 1,
        correct=correct,
        **extra,
    )


def fake_predictions() -> list[Prediction]:
    """rag/embedding: facts 3 of 4, ideas 1 of 2, one error; controls: none 1 of 3, longest 0 of 2."""
    rag = [
        pred("rag", "embedding", "q0", FACTS, True, distance_tokens=1_000),
        pred("rag", "embedding", "q1", FACTS, True, distance_tokens=2_000),
        pred("rag", "embedding", "q2", FACTS, True, distance_tokens=5_000),
        pred("rag", "embedding", "q3", FACTS, False, distance_tokens=20_000),
        pred("rag", "embedding", "q4", IDEAS, True, distance_tokens=70_000),
        pred("rag", "embedding", "q5", IDEAS, False, distance_tokens=70_000),
        pred("rag", "embedding", "q6", IDEAS, None, distance_tokens=70_000, error="reader timed out"),
    ]
    for p in rag:
        p.context_tokens = 1_500
    none = [pred("none", "embedding", f"q{i}", FACTS, i == 0, distance_tokens=1_000) for i in range(3)]
    blind = [pred("full_context", "longest_option", f"q{i}", FACTS, False, distance_tokens=1_000) for i in range(2)]
    return rag + none + blind


def write_run(run_dir: Path, predictions: list[Prediction]) -> Path:
    writer = PredictionWriter(run_dir)
    for p in predictions:
        writer.write(p)
    writer.close()
    return run_dir


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", fake_predictions())


def assert_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert 600 <= width <= 4000 and 300 <= height <= 2000, (width, height)
    assert len(data) > 10_000  # a real plot, not an empty canvas
    return width, height


# --------------------------------------------------------------------------- loading
def test_load_run_rebuilds_summary_from_predictions_when_missing(run_dir: Path) -> None:
    assert not (run_dir / SUMMARY_FILE).exists()
    summary = load_run(run_dir)
    assert summary.name == "run"
    rag = summary.row("rag", "embedding")
    assert (rag.accuracy.correct, rag.accuracy.n) == (4, 6)
    assert (rag.questions, rag.errors) == (7, 1)
    assert rag.per_type[FACTS].accuracy == 0.75
    # controls come from the rule (backend none or reader longest_option)
    assert {(r.backend, r.reader) for r in summary.rows if r.control} == {
        ("none", "embedding"),
        ("full_context", "longest_option"),
    }
    assert not rag.control


def test_load_run_uses_fresh_summary_and_rebuilds_stale_one(run_dir: Path) -> None:
    kept = RunSummary(name="from-runner", config={"k": 5}, rows=[RowSummary(backend="x", reader="y")])
    path = kept.save(run_dir)
    preds_path = run_dir / PREDICTIONS_FILE
    os.utime(preds_path, ns=(1_000_000_000, 1_000_000_000))
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    fresh = load_run(run_dir)
    assert fresh.name == "from-runner" and [r.backend for r in fresh.rows] == ["x"]

    # Predictions written after the summary (a resumed run): rows rebuilt, metadata kept.
    os.utime(preds_path, ns=(3_000_000_000, 3_000_000_000))
    stale = load_run(run_dir)
    assert stale.name == "from-runner" and stale.config == {"k": 5}
    assert sorted(r.backend for r in stale.rows) == ["full_context", "none", "rag"]


def test_torn_last_line_is_tolerated(run_dir: Path) -> None:
    with (run_dir / PREDICTIONS_FILE).open("a", encoding="utf-8") as f:
        f.write('{"backend": "rag", "reader": "embedding", "question_id": "q9", "cont')
    summary = load_run(run_dir)
    assert summary.row("rag", "embedding").questions == 7
    assert "66.7 [30.0, 90.3]" in markdown_table(summary)


def test_schema_version_mismatch_is_refused_with_clear_error(run_dir: Path) -> None:
    data = json.loads(RunSummary(name="old").model_dump_json())
    data["schema_version"] = 99
    (run_dir / SUMMARY_FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ReportError) as info:
        load_run(run_dir)
    message = str(info.value)
    assert str(run_dir / SUMMARY_FILE) in message and "99" in message and "version 1" in message
    assert isinstance(info.value, ValueError)


def test_unreadable_and_missing_runs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no summary.json or predictions.jsonl"):
        load_run(tmp_path)
    (tmp_path / SUMMARY_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(ReportError, match="cannot read the run summary"):
        load_run(tmp_path)


def test_bad_middle_line_names_file_and_line(run_dir: Path) -> None:
    path = run_dir / PREDICTIONS_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(2, '{"backend": "rag"}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ReportError, match=r"predictions.jsonl, line 3"):
        load_run(run_dir)


# --------------------------------------------------------------------------- tables
def test_markdown_table_exact_numbers_and_controls_last(run_dir: Path) -> None:
    table = markdown_table(load_run(run_dir))
    lines = table.splitlines()
    assert lines[0] == (
        "| Backend | Reader | Accuracy % [95% CI] | Recall facts | New ideas | n | Ctx tokens | Errors |"
    )
    assert lines[1] == "|---|---|---:|---:|---:|---:|---:|---:|"
    assert lines[2] == "| rag | embedding | 66.7 [30.0, 90.3] | 75.0 | 50.0 | 7 | 1,500 | 1 |"
    assert lines[3] == "| full_context (control) | longest_option | 0.0 [0.0, 65.8] | 0.0 | – | 2 | 0 | 0 |"
    assert lines[4] == "| none (control) | embedding | 33.3 [6.1, 79.2] | 33.3 | – | 3 | 0 | 0 |"
    # only types that are present get a column; the legend maps headers back to type names
    assert "Preference evolution" not in table
    assert "Recall facts = recall_user_shared_facts" in table


def test_controls_listed_last_whatever_the_summary_order() -> None:
    summary = RunSummary(
        rows=[
            RowSummary(backend="none", reader="llm", accuracy=wilson(1, 2)),
            RowSummary(backend="mem0", reader="llm", accuracy=wilson(2, 2)),
            RowSummary(backend="rag", reader="longest_option", accuracy=wilson(0, 2)),
        ]
    )
    assert [r.backend for r in ordered_rows(summary)] == ["mem0", "none", "rag"]
    body = markdown_table(summary).splitlines()[2:]
    assert body[0].startswith("| mem0 | llm | 100.0 [34.2, 100.0] |")
    assert body[1].startswith("| none (control) |") and body[2].startswith("| rag (control) |")


def test_terminal_table_has_same_content_aligned(run_dir: Path) -> None:
    text = terminal_table(load_run(run_dir))
    lines = text.splitlines()
    header, rule, *body = lines
    assert "|" not in text
    assert header.split() == [
        "Backend",
        "Reader",
        "Accuracy",
        "%",
        "[95%",
        "CI]",
        "Recall",
        "facts",
        "New",
        "ideas",
        "n",
        "Ctx",
        "tokens",
        "Errors",
    ]
    assert set(rule.replace(" ", "")) == {"-"}
    assert body[0].split() == ["rag", "embedding", "66.7", "[30.0,", "90.3]", "75.0", "50.0", "7", "1,500", "1"]
    assert body[1].split()[:3] == ["full_context", "(control)", "longest_option"]
    # right-aligned numbers: the last column ends at the same position in every row
    assert len({len(line) for line in [header, *body[:3]]}) == 1


def test_all_error_row_shows_no_accuracy(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [pred("rag", "llm", "q0", FACTS, None, error="boom")])
    assert markdown_table(load_run(run)).splitlines()[2] == "| rag | llm | – | 1 | 0 | 1 |"


def test_distance_table_buckets_in_order(run_dir: Path) -> None:
    lines = distance_table(load_run(run_dir)).splitlines()
    assert lines[0] == "| Backend | Reader | <4k | 4k-16k | 16k-32k | 64k-128k |"
    assert lines[2] == "| rag | embedding | 100.0 (n=2) | 100.0 (n=1) | 0.0 (n=1) | 50.0 (n=2) |"
    assert lines[4] == "| none (control) | embedding | 33.3 (n=3) | – | – | – |"


def test_distance_table_empty_without_distances(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [pred("rag", "llm", "q0", "single_hop", True)])
    assert distance_table(load_run(run)) == ""


def test_metrics_table(tmp_path: Path) -> None:
    assert metrics_table(load_run(write_run(tmp_path / "plain", fake_predictions()))) == ""
    preds = [
        pred("rag", "llm", "q0", "single-hop", True, metrics={"recall@10": 1.0, "recall@2": 0.0, "mrr": 0.25}),
        pred("rag", "llm", "q1", "multi-hop", False, metrics={"recall@10": 1.0, "recall@2": 1.0, "mrr": 1.0}),
        pred("none", "llm", "q0", "single-hop", False),
    ]
    summary = load_run(write_run(tmp_path / "metrics", preds))
    lines = metrics_table(summary).splitlines()
    assert lines[0] == "| Backend | Reader | Type | mrr | recall@2 | recall@10 |"
    assert lines[2] == "| rag | llm | all | 0.625 | 0.500 | 1.000 |"
    assert lines[3] == "| rag | llm | Single-hop | 0.250 | 0.000 | 1.000 |"  # LoCoMo paper order
    assert lines[4] == "| rag | llm | Multi-hop | 1.000 | 1.000 | 1.000 |"
    assert len(lines) == 5  # the none row has no metrics
    flat = metrics_table(summary, per_type=False).splitlines()
    assert flat[0] == "| Backend | Reader | mrr | recall@2 | recall@10 |" and len(flat) == 3


def test_type_labels_short_unique_and_readable() -> None:
    labels = type_labels(["track_full_preference_evolution", "recalling_the_latest_user_preferences", "category_3"])
    assert labels == {
        "track_full_preference_evolution": "Preference evolution",
        "recalling_the_latest_user_preferences": "Latest prefs",
        "category_3": "Category 3",
    }
    # an unknown name that would print like a known one falls back to the raw names
    assert type_labels(["suggest_new_ideas", "new_ideas"]) == {
        "suggest_new_ideas": "suggest_new_ideas",
        "new_ideas": "new_ideas",
    }


def test_rebuilt_rows_match_results_module(run_dir: Path) -> None:
    rebuilt = load_run(run_dir).rows
    direct = summarize_rows(read_predictions(run_dir))
    assert [r.model_dump() for r in rebuilt] == [r.model_dump() for r in direct]


# --------------------------------------------------------------------------- plots and report.md
def test_plot_run_writes_both_pngs(run_dir: Path, tmp_path: Path) -> None:
    paths = plot_run(run_dir, tmp_path / "plots")
    assert [p.name for p in paths] == [TYPE_PLOT, DISTANCE_PLOT]
    for p in paths:
        assert_png(p)
    # also from a summary object
    assert len(plot_run(load_run(run_dir), tmp_path / "again")) == 2


def test_plot_run_skips_distance_plot_without_distances(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [pred("rag", "llm", f"q{i}", "single_hop", i % 2 == 0) for i in range(4)])
    paths = plot_run(run, tmp_path / "plots")
    assert [p.name for p in paths] == [TYPE_PLOT]
    assert_png(paths[0])


def test_write_report(run_dir: Path) -> None:
    summary = load_run(run_dir).model_copy(update={"data_issues": ["questions.csv, row 4: bad answer"]})
    summary.save(run_dir)
    path = write_report(run_dir)
    assert path == run_dir / "report.md"
    text = path.read_text(encoding="utf-8")
    assert "| rag | embedding | 66.7 [30.0, 90.3] | 75.0 | 50.0 | 7 | 1,500 | 1 |" in text
    assert "## Accuracy by distance to the evidence" in text
    assert "## Metrics" not in text  # no row has metrics
    assert f"]({TYPE_PLOT})" in text and f"]({DISTANCE_PLOT})" in text
    assert "questions.csv, row 4: bad answer" in text
    for name in (TYPE_PLOT, DISTANCE_PLOT):
        assert_png(run_dir / name)


def test_plots_survive_wilson_rounding_at_100_and_0_percent(tmp_path: Path) -> None:
    # wilson(6, 6).high is a rounding error below 1.0 (and the low bound of 0 of 11 above 0.0).
    assert wilson(6, 6).high < 1.0 and wilson(0, 11).low > 0.0
    preds = [pred("rag", "llm", f"q{i}", FACTS, True, distance_tokens=1_000) for i in range(6)]
    preds += [pred("none", "llm", f"q{i}", FACTS, False, distance_tokens=1_000) for i in range(11)]
    paths = plot_run(write_run(tmp_path / "r", preds), tmp_path / "plots")
    assert len(paths) == 2


@pytest.mark.data
def test_report_on_real_personamem_questions(personamem_dev: Path, tmp_path: Path) -> None:
    """The blind longest-option control on the real 128k dev questions: real type names and distances."""
    import ast
    import csv

    from memlab.datasets.question_types import type_mapping
    from memlab.readers.controls import LongestOptionReader
    from memlab.types import Question, Retrieval

    reader, preds = LongestOptionReader(), []
    with (personamem_dev / "questions.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    canonical = type_mapping(r["question_type"] for r in rows)  # as the PersonaMem loader names them
    for row in rows:
        answer = "abcd".index(row["correct_answer"].strip()[1])
        question = Question(
            id=row["question_id"],
            type=row["question_type"],
            text=row["question"],
            answer=answer,
            options=ast.literal_eval(row["all_options"]),
            context_id=row["shared_context_id"],
            end_index=int(row["end_index_in_shared_context"]),
        )
        chosen = reader.answer(question, Retrieval()).choice
        preds.append(
            Prediction(
                backend="none",
                reader="longest_option",
                question_id=question.id,
                context_id=question.context_id,
                question_type=canonical[question.type],
                distance_tokens=int(row["distance_to_ref_in_tokens"]),
                answer=answer,
                chosen=chosen,
                correct=chosen == answer,
            )
        )
    run = write_run(tmp_path / "real", preds)
    text = write_report(run).read_text(encoding="utf-8")
    # blind accuracy above chance (25%): the longest option is often the right one
    assert (
        "| Backend | Reader | Accuracy % [95% CI] | Recall facts | Latest preference | Reasons for updates | "
        "Aligned recommendation | New ideas | Generalize | n | Ctx tokens | Errors |\n"
    ) in text
    line = "| none (control) | longest_option | 55.6 [47.1, 63.7] | 88.6 | 34.3 | 100.0 | 51.4 | 0.0 | 100.0 | 135 |"
    assert line in text
    assert "| Backend | Reader | 4k-16k | 16k-32k | 32k-64k | 64k-128k |" in text
    assert "| none (control) | longest_option | 52.6 (n=19) | 71.4 (n=14) | 52.6 (n=38) | 54.7 (n=64) |" in text
    for name in (TYPE_PLOT, DISTANCE_PLOT):
        assert_png(run / name)
