"""A memlab run on a device against the pure-encoding floor on that device, whole process and per phase.

    python benchmarks/bench_gpu.py [--dataset DATASET] [--backend rag] [--devices cuda,cpu]
                                   [--repeats N] [--max-questions N]

1. A recording run (in this process, not timed, CPU) notes every text memlab has its model embed and
   the step that asked for it (benchmarks/bench_floor.py's ``record_texts``).
2. For each device (default: ``cuda,cpu`` where torch sees a GPU, else ``cpu`` alone), interleaved
   ``--repeats`` times (the order alternates, so drifting load hits both sides):
   (a) ``memlab run --device DEVICE`` in a fresh process with a cold cache, timed from outside, its
       phases (ingest, retrieve, answer) from summary.json, start-up = the rest (imports, model
       load, dataset, result files), and the seconds rag's BM25 upkeep took inside its ingest;
   (b) the floor, benchmarks/floor_encode.py: a process that imports sentence-transformers, loads
       the same model on the same device (fp16 on a GPU, as memlab does) and encodes exactly those
       texts, one ``encode`` call per step.
3. Per device, the medians over the pairs, as the last lines::

       gpu run X s, floor Y s, ratio R
       gpu own phases (ingest + retrieve + answer) X s, pure encoding Y s, ratio R
       gpu answering X s = P % of the run; BM25 upkeep X s = P % of ingest

   (``cpu ...`` for the CPU device; where there is no GPU the script says so and the floor is CPU.)

It first times the commands that load no model (``memlab --help``, ``memlab backends``,
``memlab run --help``: median of 5 fresh processes each). With ``--dataset synthetic
--max-questions 20`` the start-up line is a short run's fixed cost
(imports + model load) beside the floor's. The script also says whether the model libraries are
byte-compiled (``.pyc`` next to their sources): an install that is not compiles their source at
every start, seconds of a short run. The machine may be shared: compare ratios, and quote the load
averages printed with them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

from bench_floor import DEFAULT_DATA, FLOOR_SCRIPT, STEPS, _timed, load, record_texts  # noqa: E402

CHILD_FLAG = "--memlab-child"
MODEL_LIBRARIES = ("torch", "transformers", "sentence_transformers", "faiss", "nltk")


# --------------------------------------------------------------------------- the memlab side (a child process)
def memlab_child(report: Path, argv: list[str]) -> int:
    """``memlab`` with ``argv``, timing rag's BM25 upkeep (``BM25Index.update``, called at ingest)."""
    from memlab.cli import main as memlab_main
    from memlab_plugins.rag.lexical import BM25Index

    spent = [0.0, 0]
    update = BM25Index.update

    def timed_update(self: BM25Index, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            update(self, *args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started
            spent[1] += 1

    BM25Index.update = timed_update  # type: ignore[method-assign]
    code = memlab_main(argv)
    report.write_text(json.dumps({"bm25_seconds": spent[0], "bm25_updates": spent[1]}), encoding="utf-8")
    return code


def time_memlab(args: argparse.Namespace, device: str, where: Path) -> dict[str, float]:
    command = [sys.executable, str(Path(__file__).resolve()), CHILD_FLAG, str(where / "bm25.json")]
    command += ["run", "--dataset", args.dataset, "--backends", args.backend, "--no-controls", "--device", device]
    command += ["--out", str(where / "run"), "--no-progress", "--no-plots"]
    if args.max_questions:
        command += ["--max-questions", str(args.max_questions)]
    done, wall, cpu = _timed(command)
    if done.returncode != 0:
        raise SystemExit(f"memlab run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    summary = json.loads((where / "run" / "summary.json").read_text(encoding="utf-8"))
    row = next(r for r in summary["rows"] if r["backend"] == args.backend or r["backend"].startswith(args.backend))
    parts = {step: float(row[f"{step}_seconds"]) for step in STEPS}
    bm25 = json.loads((where / "bm25.json").read_text(encoding="utf-8"))["bm25_seconds"]
    return {"wall": wall, "cpu": cpu, **parts, "start-up": wall - sum(parts.values()), "bm25": bm25}


def time_floor(texts_file: Path, batch_size: int, device: str) -> dict[str, float]:
    command = [sys.executable, str(FLOOR_SCRIPT), str(texts_file), "--batch-size", str(batch_size)]
    command += ["--device", device] + (["--fp16"] if device.startswith("cuda") else [])
    done, wall, cpu = _timed(command)
    if done.returncode != 0:
        raise SystemExit(f"floor script failed ({done.returncode}):\n{done.stderr[-2000:]}")
    steps = json.loads(done.stdout.strip().splitlines()[-1])
    encode = sum(steps[s] for s in STEPS)
    return {"wall": wall, "cpu": cpu, **steps, "encode": encode, "start-up": wall - encode}


# --------------------------------------------------------------------------- reporting helpers
def byte_compiled() -> str:
    """For each model library: whether its package's ``__init__`` has a current ``.pyc`` beside it."""
    out = []
    for name in MODEL_LIBRARIES:
        spec = importlib.util.find_spec(name)  # finds the package without importing it
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        compiled = Path(importlib.util.cache_from_source(spec.origin)).exists()
        out.append(f"{name} {'yes' if compiled else 'NO (compiled at every start)'}")
    return ", ".join(out)


CLI_COMMANDS = (["--help"], ["backends"], ["run", "--help"])


def cli_times(repeats: int = 5) -> str:
    """Median wall seconds of each command that loads no model, each in a fresh process (a
    hyperfine-like loop: one untimed warm-up, then ``repeats`` runs)."""
    out = []
    for argv in CLI_COMMANDS:
        command = [sys.executable, "-m", "memlab.cli", *argv]
        _timed(command)
        walls = [_timed(command)[1] for _ in range(repeats)]
        out.append(f"memlab {' '.join(argv)} {statistics.median(walls):.2f} s (max {max(walls):.2f})")
    return "; ".join(out)


def gpu_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == CHILD_FLAG:
        return memlab_child(Path(sys.argv[2]), sys.argv[3:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(DEFAULT_DATA))
    parser.add_argument("--backend", default="rag")
    parser.add_argument("--devices", help="comma-separated (default: cuda,cpu where there is a GPU, else cpu)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved (memlab, floor) pairs per device")
    parser.add_argument("--max-questions", type=int, help="at most N questions per history (a short run)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    has_gpu = gpu_present()
    devices = (
        [d.strip() for d in args.devices.split(",")] if args.devices else (["cuda", "cpu"] if has_gpu else ["cpu"])
    )
    if not has_gpu and any(d.startswith("cuda") for d in devices):
        parser.error("--devices names cuda, but torch sees no GPU here")
    if not has_gpu:
        print("no GPU here (torch.cuda.is_available() is False): only the cpu device runs; the floor is CPU")
    print(f"byte-compiled: {byte_compiled()}")
    print(f"cold start, median of 5 (load average {load()}): {cli_times()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="memlab-gpu-") as tmp:
        root = Path(tmp)
        print(f"recording what memlab embeds ({args.backend} on {args.dataset}); load average {load()}", flush=True)
        spec = record_texts(args.dataset, args.backend, root / "record", args.max_questions)
        texts_file = root / "texts.json"
        texts_file.write_text(json.dumps(spec), encoding="utf-8")
        counts = ", ".join(f"{step} {len(spec['steps'][step])}" for step in STEPS)
        print(f"texts the model embeds: {counts} (batch size {spec['batch_size']})", flush=True)
        finals: list[str] = []
        for device in devices:
            label = "gpu" if device.startswith("cuda") else "cpu"
            pairs: list[dict[str, dict[str, float]]] = []
            for pair in range(args.repeats):
                before = load()
                sides: dict[str, dict[str, float]] = {}
                for side in ("memlab", "floor") if pair % 2 == 0 else ("floor", "memlab"):
                    if side == "memlab":
                        sides[side] = time_memlab(args, device, root / f"{label}-pair{pair}")
                    else:
                        sides[side] = time_floor(texts_file, spec["batch_size"], device)
                pairs.append(sides)
                ours, floor = sides["memlab"], sides["floor"]
                print(
                    f"{device} pair {pair + 1}: memlab {ours['wall']:.1f} s, floor {floor['wall']:.1f} s, "
                    f"ratio {ours['wall'] / floor['wall']:.2f} (CPU {ours['cpu']:.1f} s / {floor['cpu']:.1f} s; "
                    f"load average before {before}, after {load()})"
                )
                for step in (*STEPS, "start-up"):
                    share = ours[step] / floor[step] if floor[step] > 0 else float("inf")
                    print(f"  {step:9s} memlab {ours[step]:7.2f} s   floor {floor[step]:7.2f} s   {share:6.2f}x")
                print(
                    f"  floor start-up: imports {floor['import']:.2f} s, model load {floor['load']:.2f} s; "
                    f"memlab BM25 upkeep {ours['bm25']:.2f} s of its {ours['ingest']:.2f} s ingest"
                )
                sys.stdout.flush()
            run = median([p["memlab"]["wall"] for p in pairs])
            floor_wall = median([p["floor"]["wall"] for p in pairs])
            own = median([sum(p["memlab"][s] for s in STEPS) for p in pairs])
            encode = median([p["floor"]["encode"] for p in pairs])
            answer = median([p["memlab"]["answer"] for p in pairs])
            bm25 = median([p["memlab"]["bm25"] for p in pairs])
            ingest = median([p["memlab"]["ingest"] for p in pairs])
            startup = median([p["memlab"]["start-up"] for p in pairs])
            floor_startup = median([p["floor"]["start-up"] for p in pairs])
            where = "" if has_gpu else " (no GPU here: the floor is CPU)"
            finals += [
                f"{label} run {run:.1f} s, floor {floor_wall:.1f} s, ratio {run / floor_wall:.2f}{where}",
                f"{label} own phases (ingest + retrieve + answer) {own:.2f} s, pure encoding {encode:.2f} s, "
                f"ratio {own / encode:.2f}",
                f"{label} start-up (imports, model load, dataset, files) {startup:.2f} s, floor's (imports, model "
                f"load) {floor_startup:.2f} s",
                f"{label} answering {answer:.2f} s = {100 * answer / run:.0f} % of the run; BM25 upkeep {bm25:.2f} s "
                f"= {100 * bm25 / ingest:.1f} % of ingest ({ingest:.2f} s)",
            ]
        print(f"medians over {args.repeats} pair(s) per device; load average now {load()}")
        print("\n".join(finals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
