"""The floor: a plain script that encodes given texts with sentence-transformers, nothing else.

    python benchmarks/floor_encode.py TEXTS.json [--batch-size 64] [--device cpu|cuda:0] [--fp16]

TEXTS.json is ``{"model": path, "steps": {"ingest": [texts], "retrieve": [...], "answer": [...]}}``
(benchmarks/bench_floor.py and bench_gpu.py write it: the texts a memlab run had its model embed, by
the step that embedded them). Each step is one ``encode`` call, on ``--device`` (in fp16 with
``--fp16``, as memlab runs a sentence-transformers model on a GPU). Prints the seconds of the
imports, the model load and each step as one JSON line. It imports nothing of memlab, on purpose.
"""

from __future__ import annotations

import json
import sys
import time

started = time.perf_counter()
from sentence_transformers import SentenceTransformer  # noqa: E402

imported = time.perf_counter()


def _option(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> int:
    path = sys.argv[1]
    batch_size = int(_option("--batch-size", "64"))
    device = _option("--device", "cpu")
    with open(path, encoding="utf-8") as handle:
        spec = json.load(handle)
    load_start = time.perf_counter()
    model = SentenceTransformer(spec["model"], device=device)
    if "--fp16" in sys.argv:
        model.half()
    times = {"import": imported - started, "load": time.perf_counter() - load_start}
    for step, texts in spec["steps"].items():
        step_start = time.perf_counter()
        if texts:
            model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()  # the step's GPU work done, not only queued
        times[step] = time.perf_counter() - step_start
    print(json.dumps(times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
