"""Graphiti and LangMem driven by a real local model (SmolLM2-135M, served by memlab's own server
process) on a small synthetic history: what the tiny model could and could not extract is counted
by the backends, never fatal, and the stores read back whole. (``benchmarks/systems_cost.py``
measures the protocols against the scripted server; this shows a real model's failures.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_local_llm_e2e import harness  # benchmarks/local_llm.py: the local server and its settings

from memlab.datasets import load_dataset
from memlab.registry import create_backend

pytestmark = pytest.mark.slow
pytest.importorskip("graphiti_core", reason="memlab[graphiti] is not installed")
pytest.importorskip("langmem", reason="memlab[langmem] is not installed")

SMALL = "synthetic:personas=1,seed=3,sessions=3,turns=4,aspects=4,questions=2"


def test_graphiti_and_langmem_count_what_smollm2_could_not_extract(tmp_path: Path, smollm2_gguf: Path) -> None:
    bench = harness()
    dataset = load_dataset(SMALL)
    history = next(iter(dataset.histories.values()))
    # the first session only: on 2 cores SmolLM2 reads Graphiti's ~2,500-token prompts for about a minute each
    sessions = [session for session, _ in history.slices(0, len(history.messages))][:1]
    counted = {}
    with bench.local_server(smollm2_gguf, log_path=tmp_path / "server.log") as url:
        llm = bench.llm_config(url, None)  # no response cache: every call reaches the model
        for name in ("graphiti", "langmem"):
            memory = create_backend(name, {"llm": llm, "embedder": "hashing"}, data_dir=tmp_path / name)
            try:
                reports = [memory.ingest(session, user_id="u") for session in sessions]  # nothing raises
                stats = memory.extraction_stats()  # type: ignore[attr-defined]
                items = memory.list_memories(user_id="u")
                export = memory.export("u")
                retrieval = memory.retrieve(dataset.questions[0].text, user_id="u")
            finally:
                memory.close()
            counted[name] = {**stats, "stored": len(items)}
            assert stats["windows"] == len(sessions), stats  # every session really went to the library
            assert stats["llm_calls"] >= 1, stats  # and the library really asked the model
            # skipped parts (refused, or a reply the library could not read) are counted, never raised
            assert stats["unparsed_replies"] <= stats["failed_windows"] <= stats["windows"], stats
            assert sum(r.prompt_tokens for r in reports) > 0, "the model's tokens are the ingest cost"
            assert export["user_id"] == "u" and all(item.text.strip() for item in items)
            assert len(retrieval.items) <= len(items)
    print(counted)  # what SmolLM2 could (stored) and could not (failed, unparsed) extract
