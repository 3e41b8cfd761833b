"""Wall time of one evaluation under the local, process and ray executors, measured in one run.

The same run (``synthetic:personas=8`` by default: 8 histories; the rag backend plus the two blind
controls, so 3 jobs per history) is executed three times into fresh directories, each with its own
empty embedding cache so no executor profits from another's work. For each executor the table shows
the wall time of ``memlab.run.driver.run``, the speed-up over local, whether every prediction's
chosen answer equals the local executor's, and the largest difference in option scores (MiniLM
scores may differ in the last float32 bit: torch's thread count changes the summation order).

Process and Ray times include starting their worker processes (spawned interpreters import
memlab, torch and the embedder); starting the local Ray itself is timed apart (``ray start``
column), since on a real cluster it is already running.

    python benchmarks/bench_executors.py                        # MiniLM, 8 personas, workers = cores
    python benchmarks/bench_executors.py --embedder hashing --personas 16 --workers 4
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from result_files import ExecutorRow, ExecutorsResult  # benchmarks/ is on sys.path as a script


def run_once(out: Path, dataset: str, embedder: str, executor: Any) -> tuple[float, dict]:
    from memlab.results import read_predictions
    from memlab.run.driver import run
    from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig

    config = RunConfig(
        dataset=dataset,
        backends=[BackendSpec(name="rag", config={"embedder": embedder})],
        reader=ReaderSpec(name="embedding", config={"embedder": embedder}),
        out=out,
        cache_dir=out.parent / f"{out.name}-cache",
        progress=False,
    )
    started = time.perf_counter()
    summary = run(config, executor=executor)
    seconds = time.perf_counter() - started
    if summary.failed_jobs:
        raise SystemExit(f"{out.name}: failed jobs: {summary.failed_jobs}")
    return seconds, {p.key: (p.chosen, p.scores) for p in read_predictions(out)}


def describe(workers: dict[str, Any]) -> str:
    """Jobs and dataset loads per worker: heavy objects should load once per worker."""
    parts = [
        f"{name} ran {info.jobs_run} jobs, loaded the dataset {info.dataset_loads}x"
        for name, info in sorted(workers.items())
    ]
    return "workers: " + "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--personas", type=int, default=8, help="histories in the synthetic dataset (>= 8)")
    parser.add_argument("--embedder", default="minilm", choices=["minilm", "hashing"])
    parser.add_argument("--workers", type=int, default=None, help="process/ray workers (default: usable cores)")
    parser.add_argument("--skip-ray", action="store_true", help="only local and process")
    parser.add_argument("--json", type=Path, default=None, help="also write the table's result file here")
    args = parser.parse_args(argv)
    if args.personas < 8:
        parser.error("--personas must be at least 8")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from memlab.run.executors import LocalExecutor, make_executor
    from memlab.run.executors.process import usable_cores
    from memlab.run.job import cached_dataset

    workers = args.workers or usable_cores()
    dataset = f"synthetic:personas={args.personas}"
    loaded = cached_dataset(dataset)
    print(
        f"dataset {dataset}: {len(loaded.histories)} histories, {len(loaded.questions)} questions; "
        f"embedder {args.embedder}; {workers} workers on {usable_cores()} usable cores",
        flush=True,
    )

    rows: list[tuple[str, int, float, float | None, dict]] = []
    with tempfile.TemporaryDirectory(prefix="memlab-bench-executors-") as tmp:
        root = Path(tmp)
        seconds, local = run_once(root / "local", dataset, args.embedder, LocalExecutor())
        rows.append(("local", 1, seconds, None, local))
        print(f"local done in {seconds:.1f} s", flush=True)

        process = make_executor("process", workers=workers)
        seconds, result = run_once(root / "process", dataset, args.embedder, process)
        rows.append(("process", workers, seconds, None, result))
        print(f"process done in {seconds:.1f} s; {describe(process.workers)}", flush=True)

        if not args.skip_ray:
            import ray

            started = time.perf_counter()
            ray.init(num_cpus=workers, include_dashboard=False)
            ray_start = time.perf_counter() - started
            executor = make_executor("ray", workers=workers)
            seconds, result = run_once(root / "ray", dataset, args.embedder, executor)
            rows.append(("ray", workers, seconds, ray_start, result))
            print(f"ray done in {seconds:.1f} s; {describe(executor.workers)}", flush=True)
            ray.shutdown()

    base = rows[0][2]
    print()
    print(
        f"{'executor':<10}{'workers':>8}{'wall s':>10}{'speed-up':>10}{'ray start s':>13}"
        f"{'predictions':>13}{'same chosen':>13}{'max |score diff|':>18}"
    )
    same_everywhere = True
    table: list[ExecutorRow] = []
    for name, count, seconds, startup, result in rows:
        same = result.keys() == local.keys() and all(result[k][0] == local[k][0] for k in local)
        same_everywhere &= same
        table.append(
            ExecutorRow(
                executor=name,
                workers=count,
                seconds=seconds,
                ray_start_seconds=startup,
                predictions=len(result),
                same_chosen=same,
                max_score_diff=score_gap(local, result),
            )
        )
        start = f"{startup:.1f}" if startup is not None else "-"
        print(
            f"{name:<10}{count:>8}{seconds:>10.1f}{base / seconds:>9.2f}x{start:>13}{len(result):>13}"
            f"{'yes' if same else 'NO':>13}{score_gap(local, result):>18.1e}"
        )
    if args.json:
        ExecutorsResult(dataset=dataset, embedder=args.embedder, rows=table).save(args.json)
    return 0 if same_everywhere else 1


def score_gap(a: dict, b: dict) -> float:
    """Largest difference between two runs' option scores. MiniLM scores can differ in the last
    float32 bit between executors (torch's thread count changes summation order); chosen answers
    must not."""
    gaps = [abs(x - y) for k in a.keys() & b.keys() for x, y in zip(a[k][1], b[k][1])]
    return max(gaps, default=0.0)


if __name__ == "__main__":
    sys.exit(main())
