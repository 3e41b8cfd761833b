"""A real local LLM (SmolLM2-135M) served by memlab's own server process drives the three LLM
paths end to end on synthetic data: the ``llm`` reader, mem0 with ``infer=True``, and the profile
LLM extractor. The model is tiny and often replies badly; that must be counted, never crash a run
and never leave a store that cannot be read back.

The harness is ``benchmarks/local_llm.py`` (which reports the numbers in docs/llm.md).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from memlab.datasets import load_dataset

pytestmark = pytest.mark.slow

HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "local_llm.py"
SMALL = "synthetic:personas=1,seed=3,sessions=3,turns=4,aspects=4,questions=7"


def harness():  # type: ignore[no-untyped-def]
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
        rows = {row.name: row for row in bench.evaluate(url, dataset, tmp_path)}
    questions = len(dataset.questions)
    for row in rows.values():
        assert len(row.hits) == questions, row.name  # every question answered or counted, none lost
        assert row.counters.get("store read errors", 0) == 0, (row.name, row.notes)
        assert row.counters.get("empty items", 0) == 0, row.name
    reader = rows["rag / llm"]
    # The llm reader either parsed a letter or counted a parse failure; transport errors are failures.
    assert reader.counters.get("answer errors", 0) == 0, reader.notes
    assert reader.counters.get("parse failures", 0) <= questions
    mem0 = rows["mem0 (infer=True) / embedding"]
    # mem0 really asked the server: facts were stored, or its failures were counted (mem0's own
    # extraction prompt alone is about 8,900 tokens, over SmolLM2's 8,192-token window).
    reached = (
        mem0.counters.get("stored items", 0)
        + mem0.counters.get("ingest errors", 0)
        + mem0.counters.get("unparsed extraction replies", 0)
    )
    assert reached > 0, mem0.counters
    profile = rows["profile (extractor=llm) / embedding"]
    assert profile.counters.get("ingest errors", 0) == 0, profile.notes
    assert profile.counters["extractor calls"] >= 3  # one per session at least: the server was really used
    # A rejected batch (invalid JSON twice) is counted once per ingest call and skipped, never raised.
    assert profile.counters.get("rejected operation batches", 0) <= profile.counters["extractor calls"]
    print(bench.render(list(rows.values()), dataset))
