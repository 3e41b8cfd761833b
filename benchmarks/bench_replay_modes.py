"""``--replay once`` against ``--replay rebuild`` for rag's turn, session and window chunking on the
PersonaMem dev history: how many questions get a different retrieved context, and the wall time of
each mode.

    python benchmarks/bench_replay_modes.py [--dataset SPEC ...] [--embedder minilm]

By default it runs the dev history and a synthetic dataset. All 135 questions of the dev history are
asked at one position (message 697 of 698), so there the two modes must agree; the synthetic
histories ask questions between sessions and inside them, where session and window chunking differ.

Each (chunking, mode) is one ``memlab run`` of rag with the embedding reader (no controls) into a
fresh directory; the embedding cache is shared, so texts embedded once are not embedded again (the
wall times include that warm cache for the second mode of each chunking, as a user rerunning would).
The retrieved context of a question is compared by the history messages behind its retrieved items,
in rank order.
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

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "personamem" / "128k-dev"


def one(
    dataset: str, chunking: str, replay: str, embedder: str, root: Path, max_questions: int | None
) -> tuple[float, dict, float]:
    config = RunConfig(
        dataset=dataset,
        out=root / f"{chunking}-{replay}",
        controls=False,
        progress=False,
        backends=[BackendSpec(name="rag", config={"chunking": chunking, "embedder": embedder})],
        reader=ReaderSpec(name="embedding", config={"embedder": embedder}),
        replay=replay,
        cache_dir=root / "cache",
        max_questions=max_questions,
    )  # type: ignore[arg-type]
    start = time.perf_counter()
    summary = run(config)
    wall = time.perf_counter() - start
    assert not summary.failed_jobs, summary.failed_jobs
    row = summary.rows[0]
    contexts = {p.question_id: tuple(p.retrieved_messages or ()) for p in read_predictions(config.out)}
    return wall, contexts, row.accuracy.accuracy if row.accuracy else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", action="append", help="dataset spec (repeatable); default: dev + synthetic")
    parser.add_argument("--embedder", default="minilm", choices=["minilm", "hashing"])
    parser.add_argument("--chunking", default="turn,session,window")
    parser.add_argument("--max-questions", type=int, default=None)
    args = parser.parse_args()
    datasets = args.dataset or [str(DEFAULT_DATA), "synthetic:personas=4,seed=1"]
    for dataset in datasets:
        print(f"\ndataset {dataset}, rag + embedding reader, embedder {args.embedder}")
        print(
            f"{'chunking':<9}{'questions':>10}{'differ':>8}{'once s':>9}{'rebuild s':>11}{'acc once':>10}"
            f"{'acc rebuild':>13}"
        )
        with tempfile.TemporaryDirectory(prefix="memlab-bench-replay-") as tmp:
            for chunking in args.chunking.split(","):
                once_s, once, once_acc = one(dataset, chunking, "once", args.embedder, Path(tmp), args.max_questions)
                rebuild_s, rebuild, rebuild_acc = one(
                    dataset, chunking, "rebuild", args.embedder, Path(tmp), args.max_questions
                )
                differ = sum(once[q] != rebuild.get(q) for q in once)
                print(
                    f"{chunking:<9}{len(once):>10}{differ:>8}{once_s:>9.1f}{rebuild_s:>11.1f}"
                    f"{100 * once_acc:>9.1f}%{100 * rebuild_acc:>12.1f}%",
                    flush=True,
                )


if __name__ == "__main__":
    main()
