"""What a full PersonaMem-v2 run costs: wall time per history and peak memory of each built-in
backend on the offline v2-style data, under the local and the process executor.

    python benchmarks/bench_v2_scale.py [--histories 200] [--tokens 32000] [--workers 2]
                                        [--backends full_context,rag,profile,mem0] [--executors local,process]

Each (backend, executor) pair is one ``memlab run`` in a fresh directory, as a child process
(``--no-controls``; the LLM-free embedding reader with the hashing embedder, and the hashing
embedder for every backend that embeds: ``--rag.embedder hashing`` and the same for profile and
mem0), timed from start to exit. Peak memory is the largest resident set of any single process of
the run (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` in a wrapper around it: the memlab process or its
biggest worker; the process executor's total is about that times workers + 1). The
projection multiplies the measured time per history by the release's 200 histories at 32k and,
for 128k, by 200 histories of four times the tokens (ingest is linear in the history's length for
these backends; retrieval is per question: the release has about 25 questions per history, the
v2-style data 8).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from result_files import ScaleResult, ScaleRow  # benchmarks/ is on sys.path as a script

HASHING = {"rag": "hashing", "profile": "hashing", "mem0": "hashing"}


# Runs a command and prints the largest resident set of its process tree (KiB) to stderr's last line:
# each measured run gets its own wrapper, so no run reports another's peak.
WRAPPER = (
    "import resource, subprocess, sys; code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)"
)


def run(backend: str, executor: str, workers: int, dataset: str, out: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB of the largest process of the run, exit status) of one memlab run."""
    command = [
        sys.executable,
        "-m",
        "memlab.cli",
        "run",
        "--dataset",
        dataset,
        "--backends",
        backend,
        "--reader",
        "embedding",
        "--reader.embedder",
        "hashing",
        "--no-controls",
        "--no-plots",
        "--no-progress",
        "--out",
        str(out),
        "--executor",
        executor,
    ]
    if executor != "local":
        command += ["--workers", str(workers)]
    if backend in HASHING:
        command += [f"--{backend}.embedder", HASHING[backend]]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WRAPPER, *command], stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    lines = done.stderr.strip().splitlines()
    if done.returncode != 0:
        print(f"  {backend}/{executor} exited {done.returncode}: {' | '.join(lines[-5:])}", file=sys.stderr)
    peak = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    return seconds, peak / 1024, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=32000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backends", default="full_context,rag,profile,mem0")
    parser.add_argument("--executors", default="local,process")
    parser.add_argument("--json", type=Path, default=None, help="also write the table's result file here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    dataset = f"synthetic:style=v2,personas={args.histories},seed=0,tokens={args.tokens}"
    print(f"dataset {dataset}; reader embedding[hashing]; cpu cores {os.cpu_count()}")
    header = f"{'backend':<13} {'executor':<12} {'wall s':>8} {'s/history':>10} {'peak MiB':>9} {'proj. 32k h':>11} {'proj. 128k h':>12}"
    print(header)
    print("-" * len(header))
    failures = 0
    rows: list[ScaleRow] = []
    with tempfile.TemporaryDirectory(prefix="memlab-v2-scale-") as work:
        for backend in [b for b in args.backends.split(",") if b]:
            for executor in [e for e in args.executors.split(",") if e]:
                label = executor if executor == "local" else f"{executor}x{args.workers}"
                out = Path(work) / f"{backend}-{executor}"
                seconds, peak, status = run(backend, executor, args.workers, dataset, out)
                failures += status != 0
                rows.append(
                    ScaleRow(
                        backend=backend,
                        executor="local" if executor == "local" else f"{executor} x{args.workers}",
                        histories=args.histories,
                        seconds=seconds,
                        peak_mib=peak,
                        exit_status=status,
                    )
                )
                per = seconds / args.histories
                print(
                    f"{backend:<13} {label:<12} {seconds:>8.1f} {per:>10.2f} {peak:>9.0f} "
                    f"{per * 200 / 3600:>11.2f} {per * 4 * 200 / 3600:>12.2f}"
                )
    if args.json:
        ScaleResult(dataset=dataset, cpu_cores=os.cpu_count(), rows=rows).save(args.json)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
