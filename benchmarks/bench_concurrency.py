"""Concurrent answering: the same run at ``--llm.max-concurrency 1`` and ``16`` against a local
OpenAI-compatible server that takes 0.5 s per request (a stand-in for a hosted model).

    python benchmarks/bench_concurrency.py [--dataset ../shared/data/personamem/128k-dev] [--delay 0.5]

Runs ``full_context`` + the ``llm`` reader (no controls, response cache off, so every question is a
request) and prints the wall time of each run, the speed-up and whether every chosen option is the
same. The server answers each prompt with a letter hashed from it, so choices do not depend on the
order or the concurrency of the requests. Target: ratio >= 8 with identical choices.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

from memlab.results import read_predictions  # noqa: E402
from memlab.run.driver import run  # noqa: E402
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig  # noqa: E402
from memlab.testing.fake_llm import served_in_subprocess  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "personamem" / "128k-dev"


def timed(dataset: str, base_url: str, concurrency: int, out: Path, max_questions: int | None) -> tuple[float, dict]:
    llm = {"base_url": base_url, "model": "fake-model", "cache": False, "max_concurrency": concurrency}
    config = RunConfig(
        dataset=dataset,
        backends=[BackendSpec(name="full_context")],
        controls=False,
        out=out,
        reader=ReaderSpec(name="llm", config={"llm": llm}),
        progress=False,
        max_questions=max_questions,
    )
    start = time.perf_counter()
    summary = run(config)
    wall = time.perf_counter() - start
    assert not summary.failed_jobs and not summary.rows[0].errors, summary.failed_jobs
    return wall, {p.key: p.chosen for p in read_predictions(out)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(DEFAULT_DATA))
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the server takes per request")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-questions", type=int, default=None, help="per history (default: all)")
    args = parser.parse_args()

    with served_in_subprocess(args.delay) as base_url, tempfile.TemporaryDirectory() as tmp:
        seq_wall, seq = timed(args.dataset, base_url, 1, Path(tmp) / "c1", args.max_questions)
        par_wall, par = timed(args.dataset, base_url, args.concurrency, Path(tmp) / "cN", args.max_questions)
    ratio = seq_wall / par_wall
    print(
        f"dataset {args.dataset}: full_context + llm, {len(seq)} questions, server {args.delay:.2f} s/request "
        "(in its own process)"
    )
    print(f"concurrency  1: wall {seq_wall:6.1f} s")
    print(f"concurrency {args.concurrency:2d}: wall {par_wall:6.1f} s")
    print(f"ratio {ratio:.1f}x (target >= 8)")
    print(f"chosen options identical: {seq == par} ({sum(seq[k] == par.get(k) for k in seq)}/{len(seq)})")


if __name__ == "__main__":
    main()
