"""A real local LLM (SmolLM2-135M) served by memlab's own server process drives the three LLM
paths end to end on synthetic data: the ``llm`` reader, mem0 with ``infer=True``, and the profile
LLM extractor. The model is tiny and often replies badly; that must be counted, never crash a run
and never leave a store that cannot be read back.

The harness is ``benchmarks/local_llm.py`` (which reports the numbers in docs/llm.md).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import run_args

from memlab.datasets import load_dataset

pytestmark = pytest.mark.slow

HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "local_llm.py"
SMALL = "synthetic:personas=1,seed=3,sessions=3,turns=4,aspects=4,questions=7"


def harness():  # type: ignore[no-untyped-def]
    if str(HARNESS.parent) not in sys.path:  # as when run as a script: it imports benchmarks/result_files.py
        sys.path.insert(0, str(HARNESS.parent))
    spec = importlib.util.spec_from_file_location("local_llm_harness", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_three_llm_paths_against_a_local_server_process(tmp_path: Path, smollm2_gguf: Path) -> None:
    bench = harness()
    dataset = load_dataset(SMALL)
    with bench.local_server(smollm2_gguf, log_path=tmp_path / "server.log") as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        rows = {row.name: row for row in bench.evaluate(url, dataset, tmp_path)}  # an exception fails the test
        # The same mem0 extraction under `memlab run`: refused windows are counted, the run completes.
        out = tmp_path / "run"
        mem0_llm = json.dumps(bench.llm_config(url, None))
        run = subprocess.run(
            [sys.executable, "-m", "memlab.cli", *run_args(out, "--mem0.llm", mem0_llm, "--no-controls",
             dataset=SMALL, backends="mem0")],
            capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == len(dataset.questions) and not any(p["error"] for p in predictions)
    questions = len(dataset.questions)
    for row in rows.values():
        assert len(row.hits) == questions, row.name  # every question answered, none lost
        assert row.counters.get("store read errors", 0) == 0, (row.name, row.notes)
        assert row.counters.get("empty items", 0) == 0, row.name
    reader = rows["rag / llm"]
    # The llm reader either parsed a letter or counted a parse failure; transport errors are failures.
    assert reader.counters.get("answer errors", 0) == 0, reader.notes
    assert reader.counters.get("parse failures", 0) <= questions
    mem0 = rows["mem0 (infer=True) / embedding"]
    # mem0 really asked the server, window by window; each window's failure is counted, none raised
    # (mem0's own extraction prompt alone is about 8,850 tokens, over SmolLM2's 8,192-token window).
    windows = mem0.counters["extraction windows"]
    assert windows > 0, mem0.counters
    failed = mem0.counters.get("windows refused by the server", 0) + mem0.counters.get("unparsed extraction replies", 0)
    assert failed <= windows, mem0.counters
    profile = rows["profile (extractor=llm) / embedding"]
    assert profile.counters["extractor calls"] >= 3  # one per session at least: the server was really used
    # A rejected batch (invalid JSON twice) is counted once per ingest call and skipped, never raised.
    assert profile.counters.get("rejected operation batches", 0) <= profile.counters["extractor calls"]
    print(bench.render(list(rows.values()), dataset))
