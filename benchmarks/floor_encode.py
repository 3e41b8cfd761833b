"""The floor: a plain script that encodes given texts with sentence-transformers, nothing else.

    python benchmarks/floor_encode.py TEXTS.json [--batch-size 64]

TEXTS.json is ``{"model": path, "steps": {"ingest": [texts], "retrieve": [...], "answer": [...]}}``
(benchmarks/bench_floor.py writes it: the texts a memlab run had its model embed, by the step that
embedded them). Each step is one ``encode`` call. Prints the seconds of the imports, the model
load and each step as one JSON line. It imports nothing of memlab, on purpose.
"""

from __future__ import annotations

import json
import sys
import time

started = time.perf_counter()
from sentence_transformers import SentenceTransformer  # noqa: E402

imported = time.perf_counter()


def main() -> int:
    path = sys.argv[1]
    batch_size = int(sys.argv[sys.argv.index("--batch-size") + 1]) if "--batch-size" in sys.argv else 64
    with open(path, encoding="utf-8") as handle:
        spec = json.load(handle)
    load_start = time.perf_counter()
    model = SentenceTransformer(spec["model"], device="cpu")
    times = {"import": imported - started, "load": time.perf_counter() - load_start}
    for step, texts in spec["steps"].items():
        step_start = time.perf_counter()
        if texts:
            model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        times[step] = time.perf_counter() - step_start
    print(json.dumps(times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
