"""Golden predictions: what every built-in backend answers and retrieves on the real dev files.

Speed work (batching what is known before the replay, incremental BM25, bulk ingest, indexes in
place of per-query scans) must not change a single answer or ranking. The golden files under
``tests/data/golden/`` were made with the code before that work (main at commit 5ca34c8) by

    PYTHONPATH=. python tests/golden_predictions.py personamem locomo

``tests/test_golden_predictions.py`` runs the same evaluation with the current code and compares
(the PersonaMem dev history whole, LoCoMo's first conversation);
``python tests/golden_predictions.py --check [personamem] [locomo]`` compares the whole files.

Recorded embeddings: ``tests/data/golden/personamem-embeddings.sqlite.gz`` is (gzipped) the run's embedding cache
(MiniLM vectors of the dev history's chunks, statements, questions and options, keyed by model name
and text hash) from a cold run whose predictions all matched the golden file. The test starts from a
copy of it, so rag, profile and the readers embed nothing and the test takes minutes instead of half
an hour; a text the code now embeds differently misses the cache and is embedded by the model, so a
change in what is embedded still shows. mem0 embeds with its own model wrapper (no memlab cache) and
is checked on freshly computed vectors. ``--record-embeddings`` makes the file again:

    PYTHONPATH=. python tests/golden_predictions.py --record-embeddings personamem
Each prediction is kept small: the chosen option or a digest of the open answer, and a digest of
the ranked retrieved messages.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
GOLDEN_DIR = REPO / "tests" / "data" / "golden"
SHARED = Path(os.environ.get("MEMLAB_SHARED_DATA", REPO.parent / "shared" / "data"))
# Every built-in backend (the blind controls add ``none`` with both readers).
BACKENDS = ["rag", "profile", "full_context", "mem0"]
DATASETS = {
    "personamem": SHARED / "personamem" / "128k-dev",
    "locomo": SHARED / "locomo" / "locomo10-dev.json",
}


def recorded_embeddings(name: str) -> Path:
    return GOLDEN_DIR / f"{name}-embeddings.sqlite.gz"


def dataset_spec(name: str) -> str:
    path = DATASETS[name]
    return f"locomo:{path}" if name == "locomo" else str(path)


def _digest(value: Any) -> str:
    return hashlib.sha1(json.dumps(value).encode()).hexdigest()[:10]


def compact(predictions: list[Any]) -> dict[str, dict[str, Any]]:
    """``backend|reader|question id`` -> what must not change (empty fields left out)."""
    out = {}
    for p in predictions:
        kept = {
            "chosen": p.chosen,
            "text": None if p.predicted_text is None else _digest(p.predicted_text),
            "retrieved": None if p.retrieved_messages is None else _digest(p.retrieved_messages),
            "error": p.error,
        }
        out[f"{p.backend}|{p.reader}|{p.question_id}"] = {k: v for k, v in kept.items() if v is not None}
    return dict(sorted(out.items()))


def predict(name: str, out: Path, contexts: list[str] | None = None, warm: bool = False) -> dict[str, dict[str, Any]]:
    """Run every built-in backend (and the controls) on dev file ``name`` into ``out``, cold cache, or
    (``warm``) starting from the recorded embeddings when there are some (``contexts``: only those
    histories; a question's prediction never depends on other histories)."""
    from memlab.results import read_predictions
    from memlab.run.driver import run
    from memlab.run.spec import BackendSpec, RunConfig

    if warm and recorded_embeddings(name).is_file():
        (out / "cache").mkdir(parents=True, exist_ok=True)
        with gzip.open(recorded_embeddings(name)) as src, (out / "cache" / "embeddings.sqlite").open("wb") as dst:
            shutil.copyfileobj(src, dst)

    config = RunConfig(
        dataset=dataset_spec(name),
        backends=[BackendSpec(name=b) for b in BACKENDS],
        out=out,
        cache_dir=out / "cache",
        contexts=contexts,
        progress=False,
    )
    run(config)
    return compact(read_predictions(out))


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def write_golden(path: Path, golden: dict[str, dict[str, Any]]) -> None:
    """One prediction a line, so a change shows as a readable diff."""
    lines = [f"{json.dumps(key)}: {json.dumps(value, sort_keys=True)}" for key, value in sorted(golden.items())]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def differences(name: str, out: Path, contexts: list[str] | None = None, warm: bool = False) -> tuple[int, list[str]]:
    """(golden predictions compared, what differs) for dev file ``name`` run now into ``out``
    (``warm``: from the recorded embeddings)."""
    golden = json.loads(golden_path(name).read_text(encoding="utf-8"))
    if contexts is not None:
        golden = {k: v for k, v in golden.items() if any(f"|{c}:" in k for c in contexts)}
    now = predict(name, out, contexts, warm)
    problems = [f"missing or new: {key}" for key in sorted(set(golden) ^ set(now))]
    problems += [
        f"{key}: was {golden[key]}, now {now[key]}" for key in sorted(golden) if key in now and golden[key] != now[key]
    ]
    return len(golden), problems


def record_embeddings(name: str) -> int:
    """Run ``name`` cold; if every prediction matches the golden file, keep its embedding cache."""
    with tempfile.TemporaryDirectory(prefix="memlab-golden-") as tmp:
        total, problems = differences(name, Path(tmp) / "run")
        if problems:
            print(f"{name}: {len(problems)} of {total} predictions differ; nothing recorded", *problems[:20], sep="\n")
            return 1
        target, compact = recorded_embeddings(name), Path(tmp) / "compact.sqlite"
        with sqlite3.connect(Path(tmp) / "run" / "cache" / "embeddings.sqlite") as cache:
            cache.execute("VACUUM INTO ?", (str(compact),))  # one compact file, no WAL beside it
        with compact.open("rb") as src, gzip.GzipFile(target, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    print(f"{target}: {target.stat().st_size / 1e6:.1f} MB, from a run matching all {total} golden predictions")
    return 0


def main(names: list[str]) -> int:
    if names[:1] == ["--record-embeddings"]:
        return max((record_embeddings(name) for name in names[1:] or ["personamem"]), default=0)
    if names[:1] == ["--check"]:  # compare the whole dev files (the test runs a part of LoCoMo)
        failed = 0
        for name in names[1:] or list(DATASETS):
            with tempfile.TemporaryDirectory(prefix="memlab-golden-") as tmp:
                total, problems = differences(name, Path(tmp) / "run")
            print(f"{name}: {total} golden predictions, {len(problems)} differ", *problems[:20], sep="\n")
            failed += bool(problems)
        return 1 if failed else 0
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for name in names or list(DATASETS):
        with tempfile.TemporaryDirectory(prefix="memlab-golden-") as tmp:
            golden = predict(name, Path(tmp) / "run")
        write_golden(golden_path(name), golden)
        print(f"{golden_path(name)}: {len(golden)} predictions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
