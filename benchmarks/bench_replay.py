"""Time a PersonaMem run (ingestion vs answering) and count embedding calls against per-question re-ingest.

The upstream PersonaMem baselines rebuild memory for every question; memlab replays each history
once and answers questions on the way. This script measures both sides on the same data:

    python benchmarks/bench_replay.py [--dataset ../shared/data/personamem/128k-dev] [--backend rag]

1. a normal ``memlab run`` of the backend with the embedding reader (times from summary.json);
2. an instrumented replay with a private, uncached embedder that counts the texts the backend
   embeds while ingesting, and the count a per-question re-ingest would need (every indexed
   message before each question's end index, once per question).
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

from memlab.datasets import load_dataset  # noqa: E402
from memlab.embedders.sentence_transformer import SentenceTransformerEmbedder  # noqa: E402
from memlab.run.driver import run  # noqa: E402
from memlab.run.job import user_id_for  # noqa: E402
from memlab.run.spec import BackendSpec, RunConfig  # noqa: E402
from memlab_plugins.rag import RagMemory  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "personamem" / "128k-dev"


def timed_run(dataset: str, backend: str, out: Path) -> None:
    start = time.perf_counter()
    summary = run(
        RunConfig(dataset=dataset, backends=[BackendSpec(name=backend)], out=out, controls=False, progress=False)
    )
    wall = time.perf_counter() - start
    row = summary.rows[0]
    print(f"memlab run ({backend}, embedding reader, {row.questions} questions, wall {wall:.1f} s)")
    print(f"  ingest   {row.ingest_seconds:8.1f} s")
    print(f"  retrieve {row.retrieve_seconds:8.1f} s")
    print(f"  answer   {row.answer_seconds:8.1f} s")
    print(f"  accuracy {row.accuracy.accuracy:.3f}" if row.accuracy else "  accuracy n/a")


def count_embeddings(dataset_spec: str) -> None:
    dataset = load_dataset(dataset_spec)
    backend_embedder = SentenceTransformerEmbedder()
    memory = RagMemory(embedder=backend_embedder)
    replay_calls = per_question_calls = replayed_before_context = 0
    start = time.perf_counter()
    for context_id, history in dataset.histories.items():
        user, position = user_id_for(context_id), 0
        for question in dataset.questions_for(context_id):
            before = backend_embedder.texts_embedded
            for session, _ in history.slices(position, question.end_index):
                memory.ingest(session, user_id=user)
            replay_calls += backend_embedder.texts_embedded - before  # (queries are not counted)
            position = max(position, question.end_index)
            memory.retrieve(question.text, user_id=user)
            # A per-question rebuild embeds this history's whole prefix again, for every question.
            per_question_calls += replay_calls - replayed_before_context
        replayed_before_context = replay_calls
    print(f"instrumented replay: {time.perf_counter() - start:.1f} s")
    print(f"  texts embedded while ingesting (replay once):     {replay_calls:>8,}")
    print(f"  texts a per-question re-ingest would embed:       {per_question_calls:>8,}")
    print(
        f"  ratio replay / per-question re-ingest:            {replay_calls / per_question_calls:8.4f}"
        f"  (1/{per_question_calls / replay_calls:.0f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(DEFAULT_DATA))
    parser.add_argument("--backend", default="rag")
    args = parser.parse_args()
    if not Path(args.dataset).exists() and ":" not in args.dataset:
        print(f"dataset not found: {args.dataset}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        timed_run(args.dataset, args.backend, Path(tmp) / "run")
    count_embeddings(args.dataset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
