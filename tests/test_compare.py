"""Comparisons a paper can print (issue 23): rows with their own readers, `memlab compare` (table,
pairwise McNemar with Holm, exports, refusal across datasets), the per-question diff, stratified
sampling, answer runs, preflight, the reference-baseline presets and LoCoMo F1 shown n/a."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import run_helpers

from memlab.cli import main
from memlab.errors import MemlabError
from memlab.report import metrics_table
from memlab.report.compare import (
    ComparedRow,
    CompareError,
    Comparison,
    PairwiseTest,
    compare_runs,
    diff_rows,
    holm,
    latex_escape,
    render_comparison,
)
from memlab.report.document import render_report
from memlab.report.plots import legend_columns
from memlab.results import (
    Prediction,
    RowSummary,
    RunSummary,
    Score,
    mcnemar_exact,
    percentile,
    read_predictions,
    summarize_rows,
)
from memlab.run.job import select_questions
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig
from memlab.testing.recording_server import RecordingServer
from memlab.types import Question

HASHING = ["--reader", "embedding", "--reader.embedder", "hashing"]


def _run(out: Path, dataset: str = run_helpers.DATASET, backends: str = "rag,full_context", *more: str) -> Path:
    args = run_helpers.run_args(out, *HASHING, "--rag.embedder", "hashing", *more, dataset=dataset, backends=backends)
    if "rag" not in backends:
        args.remove("--rag.embedder")
        args.remove("hashing")
    assert main(args) == 0
    return out


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("compare")
    return _run(root / "a", backends="rag"), _run(root / "b", backends="full_context")


# --------------------------------------------------------------------------- statistics
def test_holm_adjustment_matches_hand_computation() -> None:
    # sorted p: 0.01 (x3), 0.02 (x2 -> 0.04), 0.04 (x1 -> 0.04, monotone); input order kept
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm([]) == []


def test_percentile_interpolates_like_numpy() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0], 95) == 10.0
    assert percentile(list(map(float, range(1, 101))), 95) == pytest.approx(95.05)


# --------------------------------------------------------------------------- memlab compare
def test_compare_one_table_and_pairwise_tests_across_runs(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_runs
    comparison = compare_runs([a, b])
    names = [r.name for r in comparison.rows]
    assert "a:rag/embedding[hashing]" in names and "b:full_context/embedding[hashing]" in names
    assert comparison.correction == "holm" and not comparison.refused
    # every pair of the 6 rows (3 per run) on the same synthetic questions
    assert len(comparison.pairwise) == 15
    predictions = {p.key: p for run in (a, b) for p in read_predictions(run)}
    test = next(t for t in comparison.pairwise if {t.row_a, t.row_b} == set(names[:1] + names[3:4]))
    rag = {q: p.correct for (bk, _, q), p in predictions.items() if bk == "rag"}
    full = {q: p.correct for (bk, _, q), p in predictions.items() if bk == "full_context"}
    a_only = sum(rag[q] and not full[q] for q in rag)
    b_only = sum(full[q] and not rag[q] for q in rag)
    assert (test.n, test.a_only, test.b_only) == (len(rag), a_only, b_only)
    assert test.p == mcnemar_exact(a_only, b_only)
    assert test.p_adjusted == pytest.approx(holm([t.p for t in comparison.pairwise])[comparison.pairwise.index(test)])
    rag_row = next(r for r in comparison.rows if r.backend == "rag")
    assert rag_row.retrieve_ms_p50 is not None and rag_row.retrieve_ms_p95 >= rag_row.retrieve_ms_p50

    out = tmp_path / "table.md"
    assert main(["compare", str(a), str(b), "--out", str(out), "--plot", str(tmp_path / "acc.png")]) == 0
    text = out.read_text()
    assert "| Row | Accuracy % [95% CI] |" in text and "Retrieve ms p95" in text and "Holm" in text
    record = json.loads((tmp_path / "table.json").read_text())
    assert set(record["pairwise"][0]) == {"row_a", "row_b", "n", "a_only", "b_only", "p", "p_adjusted"}
    assert (tmp_path / "acc.png").read_bytes().startswith(b"\x89PNG")

    # One CSV per table, each one rectangular frame with numbers in its numeric columns.
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "table.csv")]) == 0
    rows_csv = list(csv.DictReader(io.StringIO((tmp_path / "table.accuracy.csv").read_text())))
    pairs_csv = list(csv.DictReader(io.StringIO((tmp_path / "table.pairwise.csv").read_text())))
    assert not (tmp_path / "table.csv").exists()
    assert len(rows_csv) == 6 and all(float(r["accuracy_pct"]) <= float(r["ci_high_pct"]) for r in rows_csv)
    assert len(pairs_csv) == 15 and list(pairs_csv[0])[-1] == "p_adjusted_holm"
    assert {int(r["n"]) for r in pairs_csv} == {test.n}
    latex = render_comparison(comparison, "latex")
    assert latex.count(r"\begin{tabular}") == 2 and "embedding[hashing]" in latex
    assert r"95\% intervals" in latex and r"\textbackslash" not in latex
    assert r"\resizebox{\linewidth}{!}" in latex  # 13 columns: scaled to the page
    assert f"the same n = {test.n} questions" in render_comparison(comparison, "md")  # n per pair, in the legend


def test_rows_on_different_data_are_refused(two_runs: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    other = _run(tmp_path / "other", "synthetic:personas=2,seed=4", "rag")
    comparison = compare_runs([two_runs[0], other])
    assert comparison.refused and all("different datasets" in r.reason for r in comparison.refused)
    assert {(t.row_a.split(":")[0], t.row_b.split(":")[0]) for t in comparison.pairwise} == {
        ("a", "a"),
        ("other", "other"),
    }
    assert "not paired (9 pair(s)): different datasets: synthetic:personas=2,seed=3" in render_comparison(
        comparison, "plain"
    )
    with pytest.raises(CompareError, match="different datasets"):
        diff_rows([two_runs[0], other], "a:rag/embedding[hashing]", "other:rag/embedding[hashing]")
    code = main(["compare", str(two_runs[0]), str(other), "--diff", "a:rag", "other:rag/embedding[hashing]"])
    assert code == 2 and "content sha256" in capsys.readouterr().err


def test_diff_lists_exactly_the_questions_the_rows_answer_differently(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run_dir = two_runs[0]
    diff = diff_rows([run_dir], "rag", "none / embedding[hashing]")
    predictions = read_predictions(run_dir)
    rag = {p.question_id: p for p in predictions if p.backend == "rag"}
    blind = {p.question_id: p for p in predictions if p.backend == "none" and p.reader.startswith("embedding")}
    expected = {q for q in rag if (rag[q].chosen, rag[q].correct) != (blind[q].chosen, blind[q].correct)}
    assert {d.question_id for d in diff.lines} == expected and expected
    assert diff.a_only == sum(rag[q].correct and not blind[q].correct for q in rag)
    first = diff.lines[0]
    assert first.a_retrieved and first.b_retrieved == []  # the blind control retrieves nothing
    out = tmp_path / "diff.csv"
    assert main(["compare", str(run_dir), "--diff", "rag", "none/embedding[hashing]", "--out", str(out)]) == 0
    assert len(list(csv.reader(io.StringIO(out.read_text())))) == len(expected) + 1
    with pytest.raises(CompareError, match="no row 'nope'"):
        diff_rows([run_dir], "nope", "rag")


def test_compare_refuses_an_out_file_in_a_missing_directory(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    assert main(["compare", str(two_runs[0]), "--out", str(tmp_path / "missing" / "t.md")]) == 2


# --------------------------------------------------------------------------- rows with their own readers
def test_rows_carry_their_own_reader_and_llm() -> None:
    llm = {"base_url": "http://127.0.0.1:1/v1", "model": "m"}
    config = RunConfig(
        backends=[
            BackendSpec(name="full_context", reader="personamem"),
            BackendSpec(name="rag", reader="personamem_baseline", llm={"model": "other"}),
            BackendSpec(name="profile"),
        ],
        reader=ReaderSpec(name="embedding", config={"llm": llm}),
    )
    pairs = [(b.display, r.name, r.config.get("llm")) for b, r in config.all_jobs_specs()]
    assert ("full_context", "personamem", llm) in pairs
    assert ("rag", "personamem_baseline", {**llm, "model": "other"}) in pairs
    assert ("profile", "embedding", None) in pairs  # the embedding reader takes no LLM
    # a blind control per reader, and the longest-option control once
    assert {(b, r) for b, r, _ in pairs if b == "none"} == {
        ("none", "personamem"),
        ("none", "personamem_baseline"),
        ("none", "embedding"),
        ("none", "longest_option"),
    }
    with pytest.raises(MemlabError, match="takes no LLM"):
        RunConfig(backends=[BackendSpec(name="rag", reader="embedding", llm={"model": "m"})]).all_jobs_specs()


def test_readers_flag_runs_every_backend_with_each_reader(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = run_helpers.run_args(out, "--readers", "embedding,longest_option", "--reader.embedder", "hashing")
    assert main([*args, "--backends", "full_context", "--max-questions", "3"]) == 0
    rows = {(r.backend, r.reader) for r in RunSummary.load(out).rows}
    # one backend: the blind reader stays on it (the run exercises that backend), the controls beside it
    assert rows == {
        ("full_context", "embedding[hashing]"),
        ("full_context", "longest_option"),
        ("none", "embedding[hashing]"),
        ("none", "longest_option"),
    }
    fingerprints = {r.fingerprint for r in RunSummary.load(out).rows}
    assert len(fingerprints) == 4  # one fingerprint per row


def test_a_blind_run_reader_gives_one_row_not_one_per_backend() -> None:
    config = RunConfig(
        backends=[BackendSpec(name="rag"), BackendSpec(name="profile")],
        readers=["embedding", "longest_option"],
        controls=False,
    )
    rows = [(b.display, r.name) for b, r in config.all_jobs_specs()]
    assert rows == [("rag", "embedding"), ("profile", "embedding"), ("none", "longest_option")]


# --------------------------------------------------------------------------- sampling
def _questions(counts: dict[str, int]) -> list[Question]:
    out = []
    for t, n in counts.items():
        out += [
            Question(
                id=f"{t}-{i}", context_id="c", text="q", options=["a", "b", "c", "d"], answer=0, type=t, end_index=0
            )
            for i in range(n)
        ]
    return sorted(out, key=lambda q: q.id)


def test_stratified_sampling_keeps_every_type_in_proportion() -> None:
    questions = _questions({"facts": 35, "prefs": 35, "recs": 35, "new": 16, "past": 10, "reasons": 4})
    first = select_questions(questions, 20, "first")
    assert first == questions[:20] and set(Counter(q.type for q in first)) == {"facts"}
    sample = select_questions(questions, 20, "stratified", seed=1)
    counts = Counter(q.type for q in sample)
    assert len(sample) == 20 and set(counts) == {"facts", "prefs", "recs", "new", "past", "reasons"}
    assert counts["facts"] >= counts["new"] >= counts["reasons"] == 1
    assert [q for q in questions if q in sample] == sample  # history order kept
    assert select_questions(questions, 20, "stratified", seed=1) == sample
    assert select_questions(questions, 20, "stratified", seed=2) != sample
    assert select_questions(questions, 500, "stratified") == questions


# --------------------------------------------------------------------------- answer runs
def test_answer_runs_answer_each_question_n_times_and_report_std(tmp_path: Path) -> None:
    calls = Counter()

    def reply(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        calls[text] += 1
        return f"({'abcd'[calls[text] % 4]})"  # a different letter each time the same prompt comes

    out = tmp_path / "run"
    with RecordingServer(reply) as server:
        args = run_helpers.run_args(out, *run_helpers.llm_reader_args(server.base_url, "m"), "--no-controls")
        assert main([*args, "--max-questions", "4", "--answer-runs", "3"]) == 0
        assert len(server.requests) == 3 * 8 and set(calls.values()) == {3}  # run 2 and 3 were not cache hits
    row = RunSummary.load(out).row("none")
    assert len(row.accuracy_runs) == 3 and row.accuracy_runs[0] == row.accuracy.accuracy
    assert row.accuracy_mean == pytest.approx(statistics.fmean(row.accuracy_runs))
    assert row.accuracy_std == pytest.approx(statistics.pstdev(row.accuracy_runs))
    predictions = read_predictions(out)
    assert all(len(p.run_choices) == 2 for p in predictions)
    # Every request of every run is counted: the rows' tokens are what the server was asked.
    sent = sum(len(str(m["content"])) // 4 for body in server.requests for m in body["messages"])
    assert sum(p.prompt_tokens for p in predictions) == sent
    assert sum(p.completion_tokens for p in predictions) == 5 * 3 * 8  # the recording server's 5 a reply
    report = render_report(RunSummary.load(out))
    assert "answer runs: 3" in report and "at most 4 questions per history, first" in report
    assert f"{100 * row.accuracy_mean:.1f} ± {100 * row.accuracy_std:.1f} (3 runs)" in report
    assert RunSummary.load(out).rows[0].settings["answer_runs"] == 3  # part of the fingerprint


# --------------------------------------------------------------------------- preflight
def test_preflight_refuses_an_incompatible_reader_before_any_ingest(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "run"
    code = main(
        run_helpers.run_args(out, "--reader", "personamem", "--llm.base-url", "http://127.0.0.1:9/v1", backends="rag")
    )
    err = capsys.readouterr().err
    assert code == 2 and "needs the full_context backend, not 'rag'" in err and not out.exists()


def test_preflight_refuses_missing_parent_model_file_and_replay(tmp_path: Path, capsys: Any) -> None:
    code = main(run_helpers.run_args(tmp_path / "no" / "such" / "run", *HASHING))
    assert code == 2 and "create the parent directory first" in capsys.readouterr().err
    gguf = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    code = main(run_helpers.run_args(tmp_path / "r", "--reader", "logprob", "--llm.model", str(gguf)))
    assert code == 2 and f"{gguf}': no such file or directory" in capsys.readouterr().err
    preset = ["--mem0.preset", "personamem-baseline", "--mem0.llm", '{"base_url": "http://127.0.0.1:9/v1"}']
    code = main(run_helpers.run_args(tmp_path / "m", *HASHING, *preset, backends="mem0"))
    err = capsys.readouterr().err
    assert code == 2 and "needs --replay rebuild" in err and not (tmp_path / "m").exists()


def test_served_model_and_endpoint_are_recorded_in_each_row(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with RecordingServer(lambda body: "(a)", model_id="served-7b") as server:
        args = run_helpers.run_args(out, "--reader", "llm", "--llm.base-url", server.base_url, "--llm.api-key", "k")
        assert main([*args, "--max-questions", "2"]) == 0
    summary = RunSummary.load(out)
    row = summary.row("none", "llm:openai:served-model:lenient")
    assert (row.llm_endpoint, row.llm_model) == (server.base_url, "served-7b")
    assert summary.row("none", "longest_option").llm_model is None


# --------------------------------------------------------------------------- presets
def test_rag_personamem_baseline_preset() -> None:
    from memlab_plugins.rag.backend import RagConfig

    config = RagConfig.model_validate({"preset": "personamem-baseline"})
    assert (config.embedder, config.scoring, config.lexical, config.top_k) == ("bge-m3", "dense", "none", 5)
    assert config.roles == ["user", "assistant", "system"] and config.max_chunk_chars is None
    assert config.max_length == 8192 and config.chunking == "turn" and config.embed_text == "message_json"
    offline = RagConfig.model_validate({"preset": "personamem-baseline", "embedder": "minilm"})
    assert offline.embedder == "minilm" and offline.max_length == 512 and offline.lexical == "none"
    assert "preset" not in json.loads(offline.model_dump_json())  # the values it filled are the record


def test_rag_embeds_each_message_as_its_json_like_the_reference(tmp_path: Path) -> None:
    """The reference RAG embeds ``json.dumps(message)`` (baselines/run.py over data_loader's dumps);
    with ``embed_text: message_json`` rag embeds exactly that string, the chunk keeps its text."""
    from memlab.embedders.hashing import HashingEmbedder
    from memlab.testing import session
    from memlab_plugins.rag.backend import RagConfig, RagMemory

    seen: list[str] = []

    class Recording(HashingEmbedder):
        def _embed(self, texts: list[str], *, query: bool = False) -> Any:
            seen.extend(texts)
            return super()._embed(texts, query=query)

    with pytest.raises(ValueError, match="chunking 'turn'"):
        RagConfig.model_validate({"embed_text": "message_json", "chunking": "session"})
    for embed_text, expected in (
        (
            "message_json",
            ['{"role": "system", "content": "Persona: caf\\u00e9 owner"}', '{"role": "user", "content": "I like tea"}'],
        ),
        ("content", ["I like tea"]),
    ):
        seen.clear()
        extra = {"roles": ["user", "assistant", "system"]} if embed_text == "message_json" else {}
        config = {"embedder": "hashing", "lexical": "none", "embed_text": embed_text, **extra}
        memory = RagMemory(config, data_dir=tmp_path / embed_text, embedder=Recording())
        memory.ingest(session("s", ("system", "Persona: café owner"), ("user", "I like tea")), user_id="u")
        assert seen == expected
        found = memory.retrieve("tea", user_id="u", k=1)
        assert found.items[0].text == "I like tea"
        memory.close()


def test_mem0_personamem_baseline_preset() -> None:
    from memlab_plugins.mem0_backend.config import Mem0Config

    with pytest.raises(ValueError, match="extracts facts with an LLM"):
        Mem0Config.model_validate({"preset": "personamem-baseline"})
    config = Mem0Config.model_validate({"preset": "personamem-baseline", "llm": {"model": "m"}})
    assert config.top_k == 5 and config.infer_window >= 1_000_000 and config.uses_llm
    assert config.required_replay == "rebuild" and not config.speaker_perspectives
    assert Mem0Config.model_validate({"preset": "locomo-eval"}).speaker_perspectives


# --------------------------------------------------------------------------- LoCoMo F1 n/a, plots
def test_locomo_f1_is_na_for_the_embedding_reader(tmp_path: Path) -> None:
    from test_judge_stage import locomo_file

    out = tmp_path / "run"
    args = run_helpers.run_args(out, *HASHING, dataset=f"locomo:{locomo_file(tmp_path)}", backends="full_context")
    assert main(args) == 0
    predictions = read_predictions(out)
    assert predictions and all("f1" not in p.metrics and "bleu1" not in p.metrics for p in predictions)
    assert all(p.predicted_text is not None for p in predictions)  # the extracted turn is kept
    table = metrics_table(RunSummary.load(out))
    assert "| n/a |" in table and "F1 / BLEU n/a: the reader (embedding[hashing]) writes no answers" in table


def test_legend_columns_fit_long_reader_names() -> None:
    short = ["rag / embedding[minilm]"] * 6
    long = ["rag / personamem_baseline:openai:Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4"] * 6
    assert legend_columns(short, 9.0) == 3
    assert legend_columns(long, 9.0) == 1
    assert legend_columns(["x"], 9.0) == 1


def test_summary_rows_of_predictions_without_runs_have_no_std() -> None:
    p = Prediction(
        backend="b", reader="r", question_id="q", context_id="c", question_type="t", answer=0, chosen=0, correct=True
    )
    row: RowSummary = summarize_rows([p])[0]
    assert row.accuracy_runs == [] and row.accuracy_std is None and row.retrieve_ms_p50 == 0.0


@pytest.mark.slow
def test_paper_protocols_script_puts_both_protocols_in_one_run(tmp_path: Path, capsys: Any) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "paper_protocols.py"
    spec = importlib.util.spec_from_file_location("paper_protocols", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "paper"
    assert script.main_cli([str(out), "--dataset", "synthetic:personas=1,questions=4"]) == 0
    summary = RunSummary.load(out)
    rows = {(r.backend, r.reader.split(":")[0]): r for r in summary.rows}
    assert {("full_context", "personamem"), ("rag", "personamem_baseline")} <= rows.keys()
    assert rows[("rag", "personamem_baseline")].settings["backend"]["config"]["lexical"] == "none"
    assert rows[("full_context", "personamem")].llm_model == "scripted-4o-mini"
    assert len({r.fingerprint for r in summary.rows}) == len(summary.rows)
    assert "adjusted by Holm" in capsys.readouterr().out


# --------------------------------------------------------------------------- LaTeX export
def test_latex_escape_writes_each_special_character_once() -> None:
    assert latex_escape(r"95% of a_b & c #1 \ {x} ~^") == (
        r"95\% of a\_b \& c \#1 \textbackslash{} \{x\} \textasciitilde{}\textasciicircum{}"
    )
    assert latex_escape("68.1 ± 2.0 – · <4k") == r"68.1 $\pm$ 2.0 --  \textless{}4k"


def _odd_comparison() -> Any:
    """Six rows with long names holding every LaTeX special character, 9 question types: both tables are
    too wide for a page unless scaled (the matrix has only 7 columns, but long row names)."""
    score = Score(n=10, correct=5, accuracy=0.5, low=0.2, high=0.8)
    types = {f"type_{i}%&#": score for i in range(9)}
    names = [rf"run-{i}:full_context/embedding[minilm] a_b&c#1\d%" for i in range(5)] + ["plain {row} ~^"]
    rows = [
        ComparedRow(name=n, run="r", backend=n, reader="x", accuracy=score, per_type=types, questions=10) for n in names
    ]
    pairs = [
        PairwiseTest(row_a=a.name, row_b=b.name, n=10, a_only=12, b_only=10, p=0.0123, p_adjusted=1.0)
        for i, a in enumerate(rows)
        for b in rows[i + 1 :]
    ]
    return Comparison(runs=["r"], rows=rows, pairwise=pairs)


@pytest.mark.slow  # pdflatex: about 5 s
def test_latex_export_compiles(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (apt-get install texlive-latex-base)")
    body = render_comparison(_odd_comparison(), "latex")
    assert body.count(r"\resizebox{") == 2  # both tables scaled to the page
    document = "\\documentclass{article}\n\\usepackage{graphicx}\n\\begin{document}\n" + body + "\\end{document}\n"
    (tmp_path / "t.tex").write_text(document, encoding="utf-8")
    result = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and (tmp_path / "t.pdf").is_file(), result.stdout[-2000:]
    assert "Overfull \\hbox" not in result.stdout, result.stdout[-2000:]


def test_compare_says_so_when_a_run_ships_no_predictions(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: Any
) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "summary.json").write_bytes((two_runs[0] / "summary.json").read_bytes())  # as docs/results holds
    assert main(["compare", str(shipped)]) == 0
    out = capsys.readouterr().out
    assert "No paired tests:" in out and "no predictions.jsonl" in out and "n/a" not in out
    assert "rag/embedding[hashing]" in out  # the accuracy table stands


def test_plot_labels_of_close_points_do_not_overlap() -> None:
    from matplotlib.figure import Figure

    from memlab.report.compare import _label_offsets

    ax = Figure(figsize=(6, 4)).add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 100)
    points = [(f"R{i + 1}", 5.0, 50.0 + 0.3 * i) for i in range(6)]  # six rows within two points of accuracy
    offsets = _label_offsets(ax, points)
    assert len(set(offsets)) == 6  # each label in a place of its own
