"""The real-data accuracy check: rag with the embedding reader (MiniLM) on all 135 questions of the
PersonaMem 128k dev history must beat both blind controls.

    python benchmarks/bench_e2e_personamem.py [--dataset ../shared/data/personamem/128k-dev]

Prints the table and each check; exits 1 if a check fails. (Moved out of the test suite, where it
took about 45 s; tests/test_e2e_personamem.py keeps checking that the run works and resumes.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

from memlab.cli import main as memlab  # noqa: E402
from memlab.results import RunSummary  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "personamem" / "128k-dev"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(DEFAULT_DATA))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memlab-bench-e2e-") as tmp:
        out = Path(tmp) / "dev"
        start = time.perf_counter()
        code = memlab(
            ["run", "--dataset", args.dataset, "--backends", "rag", "--out", str(out), "--no-progress", "--no-plots"]
        )
        wall = time.perf_counter() - start
        if code != 0:
            print(f"memlab run exited {code}")
            return 1
        summary = RunSummary.load(out)
    rag = summary.row("rag")
    blind_reader = summary.row("none", "embedding[minilm]")
    longest = summary.row("none", "longest_option")
    versus = {c.control: c for c in rag.vs_controls}
    checks = {
        "135 questions, no errors": rag.questions == 135 and rag.errors == 0,
        "rag > longest option + 5 points": rag.accuracy.accuracy > longest.accuracy.accuracy + 0.05,
        "rag > blind embedding reader + 10 points": rag.accuracy.accuracy > blind_reader.accuracy.accuracy + 0.10,
        "more wins than losses against longest option": versus["none / longest_option"].wins
        > versus["none / longest_option"].losses,
        "McNemar p < 0.01 against the blind reader": versus["none / embedding[minilm]"].p_value < 0.01,
    }
    print(
        f"wall {wall:.1f} s; rag {100 * rag.accuracy.accuracy:.1f} %, blind reader "
        f"{100 * blind_reader.accuracy.accuracy:.1f} %, longest option {100 * longest.accuracy.accuracy:.1f} %"
    )
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
