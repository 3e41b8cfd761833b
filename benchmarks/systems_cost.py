"""What each third-party memory system costs per ingested message: LLM calls and tokens, measured
against memlab's scripted OpenAI-compatible server (``memlab.testing.scripted_llm``).

    python benchmarks/systems_cost.py [--dataset SPEC] [--embedder minilm|hashing]

Every system ingests the same synthetic histories session by session, as ``memlab run`` replays
them (one ``ingest`` call per session), through its real library: mem0 (``infer=true``: its
additive extraction, windows of 2 messages), Graphiti (one episode per session) and LangMem (one
memory-manager call per session). The server answers every request with valid structured output
and counts what was sent and answered with memlab's ``count_tokens``, so the numbers compare the
systems' own prompts and protocols, not a model's verbosity (a real model writes longer replies;
prompts grow with what a system already remembers, as here). docs/systems.md quotes the table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

from result_files import SystemCost, SystemsCostResult  # noqa: E402  (benchmarks/ is on sys.path as a script)

from memlab.datasets import load_dataset  # noqa: E402
from memlab.registry import create_backend  # noqa: E402
from memlab.testing.scripted_llm import ScriptedLLMServer  # noqa: E402

DEFAULT_DATASET = "synthetic:personas=2,seed=0,sessions=4,turns=10,aspects=4,questions=8"
SYSTEMS: dict[str, dict[str, Any]] = {
    "mem0": {"infer": True, "infer_window": 2},
    "graphiti": {},
    "langmem": {},
}


def measure(name: str, extra: dict[str, Any], dataset: Any, embedder: str, work: Path) -> SystemCost:
    with ScriptedLLMServer() as server:
        llm = server.llm_settings()
        embedder_key = {"embedder": "minilm" if embedder == "minilm" else "hashing"}
        if name == "mem0" and embedder == "minilm":
            embedder_key = {}  # mem0's own huggingface provider on the packaged MiniLM
        messages = prompt = completion = 0
        started = time.perf_counter()
        for context_id, history in dataset.histories.items():
            memory = create_backend(name, {"llm": llm, **embedder_key, **extra}, data_dir=work / f"{name}-{context_id}")
            try:
                for session, _ in history.slices(0, len(history.messages)):
                    report = memory.ingest(session, user_id="u")
                    messages += sum(1 for m in session.messages if m.role != "system")
                    prompt += report.prompt_tokens
                    completion += report.completion_tokens
            finally:
                memory.close()
        seconds = time.perf_counter() - started
        assert server.prompt_tokens == prompt, (name, server.prompt_tokens, prompt)  # ingest reports every call
        return SystemCost(
            system=name,
            messages=messages,
            calls=len(server.requests),
            prompt_tokens=prompt,
            completion_tokens=completion,
            seconds=seconds,
            requests=server.calls_by_kind(),
        )


def render(result: SystemsCostResult) -> str:
    heading = (
        f"dataset {result.dataset}; scripted server (memlab.testing.scripted_llm), tokens by memlab's count_tokens"
    )
    return heading + "\n" + result.markdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--json", type=Path, default=None, help="also write the table's result file here")
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memlab-systems-cost-") as tmp:
        for name in args.systems.split(","):
            rows.append(measure(name, SYSTEMS[name], dataset, args.embedder, Path(tmp)))
    result = SystemsCostResult(dataset=dataset.source, systems=rows)
    print(render(result))
    if args.json:
        result.save(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
