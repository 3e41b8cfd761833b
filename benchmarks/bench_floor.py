"""How close a memlab run comes to the floor: the embedding work it cannot avoid, done by a plain script.

    python benchmarks/bench_floor.py --dataset DATASET --backend NAME [--repeats N]

1. A recording run (not timed) of ``memlab run --backends NAME`` with the embedding reader and a
   cold cache notes every text memlab has its model embed, and the step that asked for it: ingest
   (the backend storing turns), retrieve (the backend's queries, computed ahead included) and answer
   (the reader: questions, options, retrieved items).
2. Then, interleaved ``--repeats`` times (the order alternates, so drifting load hits both sides):
   (a) ``memlab run`` in a fresh process with a cold cache, and (b) benchmarks/floor_encode.py, a
   plain script that loads the same model with sentence-transformers and encodes exactly those
   texts, one ``encode`` call per step, with the same batch size. Both are timed from outside,
   start-up and model load included.

Prints each pair's ratio (memlab wall / floor wall; also CPU seconds, less sensitive to a shared
machine's load) with the load average, memlab's own breakdown
(ingest, retrieve, answer from summary.json; start-up = the rest of the wall time) against the
matching floor step (start-up = imports + model load + process start), and, as the last line,
``ratio median X.XX (min A.AA, max B.BB) over N pairs``. The machine is shared: compare ratios, not
seconds, and quote the load averages with them.

DATASET is a PersonaMem folder (default ../shared/data/personamem/128k-dev) or ``locomo:<file>``.
The backend's embedder must be a sentence-transformers model (the default MiniLM).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "personamem" / "128k-dev"
FLOOR_SCRIPT = Path(__file__).resolve().parent / "floor_encode.py"
STEPS = ("ingest", "retrieve", "answer")


# --------------------------------------------------------------------------- 1. what memlab embeds
def _step_of_caller() -> str:
    """The run step that asked for an embedding: the innermost backend or reader method on the stack."""
    from memlab.memory import Memory
    from memlab.readers.base import Reader

    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        name = frame.f_code.co_name
        if isinstance(owner, Memory):
            if "ingest" in name:
                return "ingest"
            if name in ("_retrieve", "retrieve", "prepare"):
                return "retrieve"
        if isinstance(owner, Reader) and name in ("answer", "prepare"):
            return "answer"
        frame = frame.f_back  # type: ignore[assignment]
    return "answer"  # outside any step: counted with the reader


def record_texts(dataset: str, backend: str, where: Path, max_questions: int | None = None) -> dict[str, Any]:
    """Run memlab once in this process with every model call recorded; the texts by step."""
    import memlab.embedders as embedders
    from memlab.embedders.base import Embedder
    from memlab.embedders.sentence_transformer import SentenceTransformerEmbedder
    from memlab.run.driver import run
    from memlab.run.spec import BackendSpec, RunConfig

    steps: dict[str, list[str]] = defaultdict(list)
    models: list[SentenceTransformerEmbedder] = []

    class Recording(Embedder):
        def __init__(self, inner: Embedder) -> None:
            super().__init__()
            self.inner, self.name, self.dim = inner, inner.name, inner.dim

        def _embed(self, texts: list[str], *, query: bool) -> Any:
            steps[_step_of_caller()].extend(texts)
            return self.inner._embed(texts, query=query)

    build = embedders._build

    def recording_build(kind: str, model: str | None, options: dict[str, Any]) -> Embedder:
        built = build(kind, model, options)
        if isinstance(built, SentenceTransformerEmbedder):
            models.append(built)
            return Recording(built)
        return built

    embedders._build = recording_build  # type: ignore[assignment]
    try:
        run(
            RunConfig(
                dataset=dataset,
                backends=[BackendSpec(name=backend)],
                out=where / "run",
                cache_dir=where / "cache",
                controls=False,
                progress=False,
                max_questions=max_questions,
            )
        )
    finally:
        embedders._build = build  # type: ignore[assignment]
        embedders.clear_embedders()
    if not models:
        raise SystemExit(f"backend {backend!r} with the embedding reader used no sentence-transformers model")
    model = models[0]
    return {"model": model.model_ref, "batch_size": model.batch_size, "steps": {s: steps.get(s, []) for s in STEPS}}


# --------------------------------------------------------------------------- 2. the timed pairs
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def time_memlab(dataset: str, backend: str, where: Path) -> dict[str, float]:
    command = [
        sys.executable,
        "-m",
        "memlab.cli",
        "run",
        "--dataset",
        dataset,
        "--backends",
        backend,
        "--no-controls",
        "--out",
        str(where / "run"),
        "--no-progress",
        "--no-plots",
    ]
    done, wall, cpu = _timed(command)
    if done.returncode != 0:
        raise SystemExit(f"memlab run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    summary = json.loads((where / "run" / "summary.json").read_text(encoding="utf-8"))
    row = next(r for r in summary["rows"] if r["backend"] == backend or r["backend"].startswith(backend))
    parts = {step: float(row[f"{step}_seconds"]) for step in STEPS}
    return {"wall": wall, "cpu": cpu, **parts, "start-up": wall - sum(parts.values())}


def _timed(command: list[str]) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run ``command``: its result, wall seconds and CPU seconds (user + system, its threads together)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, wall, cpu


def time_floor(texts_file: Path, batch_size: int) -> dict[str, float]:
    done, wall, cpu = _timed([sys.executable, str(FLOOR_SCRIPT), str(texts_file), "--batch-size", str(batch_size)])
    if done.returncode != 0:
        raise SystemExit(f"floor script failed ({done.returncode}):\n{done.stderr[-2000:]}")
    steps = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall": wall, "cpu": cpu, **{s: steps[s] for s in STEPS}, "start-up": wall - sum(steps[s] for s in STEPS)}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(DEFAULT_DATA))
    parser.add_argument("--backend", default="rag")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved (memlab, floor) pairs")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    with tempfile.TemporaryDirectory(prefix="memlab-floor-") as tmp:
        root = Path(tmp)
        print(f"recording what memlab embeds ({args.backend} on {args.dataset}); load average {load()}", flush=True)
        spec = record_texts(args.dataset, args.backend, root / "record")
        texts_file = root / "texts.json"
        texts_file.write_text(json.dumps(spec), encoding="utf-8")
        counts = ", ".join(f"{step} {len(spec['steps'][step])}" for step in STEPS)
        print(f"texts the model embeds: {counts} (batch size {spec['batch_size']})", flush=True)
        ratios: list[float] = []
        cpu_ratios: list[float] = []
        for pair in range(args.repeats):
            before = load()
            sides: dict[str, dict[str, float]] = {}
            order = ("memlab", "floor") if pair % 2 == 0 else ("floor", "memlab")
            for side in order:
                if side == "memlab":
                    sides[side] = time_memlab(args.dataset, args.backend, root / f"pair{pair}")
                else:
                    sides[side] = time_floor(texts_file, spec["batch_size"])
            ours, floor = sides["memlab"], sides["floor"]
            ratio = ours["wall"] / floor["wall"]
            ratios.append(ratio)
            cpu_ratios.append(ours["cpu"] / floor["cpu"])
            print(
                f"pair {pair + 1}: memlab {ours['wall']:.1f} s, floor {floor['wall']:.1f} s, ratio {ratio:.2f} "
                f"(CPU {ours['cpu']:.1f} s / {floor['cpu']:.1f} s = {cpu_ratios[-1]:.2f}; "
                f"load average before {before}, after {load()})"
            )
            for step in (*STEPS, "start-up"):
                share = ours[step] / floor[step] if floor[step] > 0 else float("inf")
                print(f"  {step:9s} memlab {ours[step]:7.2f} s   floor {floor[step]:7.2f} s   {share:6.2f}x")
            sys.stdout.flush()
        print(
            f"CPU time ratio median {statistics.median(cpu_ratios):.2f} (min {min(cpu_ratios):.2f}, "
            f"max {max(cpu_ratios):.2f}); wall time (the ratio below) is what a user waits"
        )
        print(
            f"ratio median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f}) "
            f"over {len(ratios)} pairs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
