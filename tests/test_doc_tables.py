"""The measured tables of README.md and docs/ come from result files kept in docs/results/
(benchmarks/doc_tables.py): the repository's tables match their sources, and an edited number fails."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _doc_tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_tables", ROOT / "benchmarks" / "doc_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_tables"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_every_generated_table_matches_its_source() -> None:
    tables = _doc_tables()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("<!-- memlab:table ") >= 2  # the 128k accuracy table and the pairwise matrix
    assert tables.check() == []


def test_an_edited_number_fails_the_check(tmp_path: Path) -> None:
    tables = _doc_tables()
    shutil.copytree(ROOT / "docs" / "results", tmp_path / "docs" / "results")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- memlab:table docs/results/pm128k-embedding accuracy -->")
    block_end = readme.index("<!-- memlab:end -->", start)
    block = readme[start:block_end]
    assert "| full_context | 68.1 [59.9, 75.4] |" in block
    edited = readme[:start] + block.replace("68.1 [59.9", "69.1 [59.9") + readme[block_end:]
    (tmp_path / "README.md").write_text(edited, encoding="utf-8")
    assert tables.check(tmp_path) == ["README.md: docs/results/pm128k-embedding accuracy"]
    regenerated, changed = tables.regenerate(edited, tmp_path)
    assert changed and regenerated == readme


def test_a_missing_source_is_named(tmp_path: Path) -> None:
    tables = _doc_tables()
    (tmp_path / "README.md").write_text("<!-- memlab:table docs/results/nope accuracy -->\n<!-- memlab:end -->\n")
    with pytest.raises(tables.TableSourceError, match="docs/results/nope"):
        tables.check(tmp_path)


def _result_files() -> ModuleType:
    _doc_tables()  # puts benchmarks/ on sys.path, as when the scripts run
    import result_files

    return result_files


def _sources(repo: Path) -> dict[str, str]:
    """kind -> a small source of that kind written under ``repo`` (run kinds: a kept run summary)."""
    files = _result_files()
    results = repo / "docs" / "results"
    shutil.copytree(ROOT / "docs" / "results" / "pm128k-embedding", results / "run")
    shutil.copytree(ROOT / "docs" / "results" / "locomo-dev", results / "locomo")  # a run with metrics
    score = files.score([True, False, True])
    sweep = files.SweepResult(
        setting="seeds [1]",
        headers={"a": "type a", "b": "type b"},
        rows=[
            files.SweepRow(name="rag", overall=score, columns={"a": score, "b": files.score([False])}),
            files.SweepRow(name="none (blind)", overall=score, columns={"a": score, "b": files.score([True])}),
        ],
        checks=[
            files.PairedCheck(
                label="rag > none", accuracy=0.75, against=0.25, wins=9, losses=1, p_value=0.02, passed=True
            )
        ],
    )
    written = {
        "sweep": sweep,
        "systems-cost": files.SystemsCostResult(
            dataset="synthetic",
            systems=[
                files.SystemCost(
                    system="mem0",
                    messages=122,
                    calls=69,
                    prompt_tokens=697_840,
                    completion_tokens=3_636,
                    seconds=26.2,
                    requests={"mem0": 69},
                )
            ],
        ),
        "v2-scale": files.ScaleResult(
            dataset="synthetic:style=v2",
            rows=[files.ScaleRow(backend="rag", executor="local", histories=4, seconds=12.5, peak_mib=321.7)],
        ),
        "local-llm": files.LocalLLMResult(
            dataset="synthetic",
            models="SmolLM2",
            rows=[files.LocalLLMRow(name="rag / llm", correct=3, questions=14, seconds=31.6, counted={"x": 2})],
        ),
        "service": files.ServiceResult.load(ROOT / "docs" / "results" / "bench-service" / "result.json"),
        "extractor": files.ExtractorResult(
            labelled_set="ops.jsonl",
            conversations=9,
            statements=17,
            expected=15,
            predicted=14,
            matched=13,
            precision=0.929,
            recall=0.867,
        ),
        "retrieve-scaling": files.RetrieveScalingResult(
            backend="rag",
            embedder="hashing",
            points=[
                files.ScalingPoint(
                    messages=m, queries=147, mean_ms=t, full_history_ms=2 * t, load_before=1.2, load_after=1.3
                )
                for m, t in ((5000, 1.5), (20000, 2.7))
            ],
        ),
        "executors": files.ExecutorsResult(
            dataset="synthetic:personas=8",
            embedder="minilm",
            rows=[
                files.ExecutorRow(
                    executor="local", workers=1, seconds=29.5, predictions=576, same_chosen=True, max_score_diff=0.0
                ),
                files.ExecutorRow(
                    executor="ray",
                    workers=2,
                    seconds=19.6,
                    ray_start_seconds=3.8,
                    predictions=576,
                    same_chosen=True,
                    max_score_diff=1.8e-7,
                ),
            ],
        ),
    }
    sources = {kind: "docs/results/run" for kind in tables_kinds() if kind not in written}
    for kind, result in written.items():
        result.save(results / kind / "result.json")
        sources[kind] = f"docs/results/{kind}/result.json"
    sources["sweep-checks"] = sources["sweep-blind"] = sources["sweep"]
    sources["metrics"] = sources["retrieval"] = "docs/results/locomo"
    return sources


def tables_kinds() -> list[str]:
    return list(_doc_tables().KINDS)


@pytest.mark.parametrize("kind", tables_kinds())
def test_every_kind_renders_and_an_edited_number_fails(tmp_path: Path, kind: str) -> None:
    tables = _doc_tables()
    source = _sources(tmp_path)[kind]
    empty = f"intro\n\n<!-- memlab:table {source} {kind} -->\n<!-- memlab:end -->\n"
    text, changed = tables.regenerate(empty, tmp_path)
    assert changed == [f"{source} {kind}"]
    doc = tmp_path / "docs" / "page.md"
    doc.write_text(text, encoding="utf-8")
    assert tables.check(tmp_path) == []
    body = text[text.index("-->\n") + 4 : text.index("<!-- memlab:end -->")]
    digit = next(i for i, c in enumerate(body) if c.isdigit() and i > body.index("\n|---"))
    edited = body[:digit] + str((int(body[digit]) + 1) % 10) + body[digit + 1 :]
    doc.write_text(text.replace(body, edited), encoding="utf-8")
    assert tables.check(tmp_path) == [f"docs/page.md: {source} {kind}"]


@pytest.mark.parametrize(
    "kind", ["sweep", "systems-cost", "v2-scale", "local-llm", "service", "extractor", "retrieve-scaling", "executors"]
)
def test_a_missing_or_invalid_result_file_is_named(tmp_path: Path, kind: str) -> None:
    tables = _doc_tables()
    source = f"docs/results/{kind}/result.json"
    (tmp_path / "README.md").write_text(f"<!-- memlab:table {source} {kind} -->\n<!-- memlab:end -->\n")
    with pytest.raises(tables.TableSourceError, match=f"{source}: .*cannot read"):
        tables.check(tmp_path)
    (tmp_path / source).parent.mkdir(parents=True)
    (tmp_path / source).write_text('{"version": 1, "rows": "none"}')
    with pytest.raises(tables.TableSourceError, match=f"{source}: .*not a valid"):
        tables.check(tmp_path)
    (tmp_path / source).write_text('{"version": 99}')
    with pytest.raises(tables.TableSourceError, match=f"{source}: .*version 99"):
        tables.check(tmp_path)


def test_the_service_table_reads_the_benchmarks_phases(tmp_path: Path) -> None:
    files = _result_files()
    phase = files.ServicePhase
    result = files.ServiceResult(
        users=2,
        clients=[1, 8],
        ingest_messages=300,
        ingest_window=10.0,
        backends={
            "mem0": [
                phase(phase="search, 1 client", requests=4, errors=0, seconds=1.0, rps=100.0, p99_ms=9.0),
                phase(phase="search, 8 clients", requests=4, errors=0, seconds=1.0, rps=150.0, p99_ms=40.0),
                phase(phase="ingest 300 msgs (1 req)", requests=3, errors=0, seconds=10.0, rps=90.0),
                phase(phase="other user's search meanwhile", requests=7, errors=0, seconds=10.0, rps=0.7, p99_ms=None),
            ]
        },
    )
    assert "| mem0 | 100.0 | 150.0 | 1.50x | – | 7 / 3 |" in result.markdown()  # no timed search: a dash


def test_the_scaling_table_ends_with_the_ratio_of_the_sizes(tmp_path: Path) -> None:
    files = _result_files()
    points = [
        files.ScalingPoint(messages=m, queries=7, mean_ms=t, full_history_ms=t, load_before=1, load_after=1)
        for m, t in ((5000, 2.0), (20000, 3.0))
    ]
    table = files.RetrieveScalingResult(backend="rag", embedder="hashing", points=points).markdown()
    assert table.splitlines()[-1].startswith("| ratio 20,000 / 5,000 |  | 1.50x | 1.50x |")


def test_an_unknown_kind_is_named(tmp_path: Path) -> None:
    tables = _doc_tables()
    (tmp_path / "README.md").write_text("<!-- memlab:table docs/results/demo nonsense -->\n<!-- memlab:end -->\n")
    with pytest.raises(tables.TableSourceError, match="unknown table kind 'nonsense'"):
        tables.check(tmp_path)


def test_the_blind_kind_keeps_only_the_blind_controls(tmp_path: Path) -> None:
    tables = _doc_tables()
    source = _sources(tmp_path)["sweep-blind"]
    body = tables.render_block(source, "sweep-blind", tmp_path)
    assert "| none (blind) | 66.7 |" in body and "| rag |" not in body
    assert "| rag | 66.7 |" in tables.render_block(source, "sweep", tmp_path)
