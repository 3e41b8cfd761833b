"""Compare the rag backend's scoring modes (dense, sparse, colbert, hybrid) on a PersonaMem history.

Each mode is one rag backend in one ``memlab.run`` run over the 128k dev history (default
``../shared/data/personamem/128k-dev``), answered by the LLM-free ``embedding`` reader, so the
modes differ only in what they retrieve. Two numbers per mode:

- accuracy: the reader's multiple-choice accuracy (Wilson 95% interval), from ``summary.json``;
- ref-hit@k: a label-free retrieval proxy. PersonaMem records for each question how far back its
  reference (the turn that states the preference) lies, as a share of the context
  (``distance_to_ref_proportion_in_context``). We place the reference at that relative position
  of the history, counted in memlab tokens (a proportion, so the tokenizer's scale cancels out),
  and count a hit when any retrieved message lies within +-WINDOW messages of it. The window
  absorbs the estimate's rounding and the user/assistant pair around the reference. A random
  retriever's expected hit rate is printed beside it as the floor.

``--model`` is a BGE-M3 directory (or hub id already in the local cache); ``minilm`` runs the
packaged MiniLM, which has no sparse or ColBERT heads, so only ``dense`` runs. Without ``--model``
the script builds the tiny random BGE-M3-layout test model: everything runs end to end, but its
numbers mean nothing, and the output says so.

    python benchmarks/bench_rag_scoring.py --model /path/to/bge-m3
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "personamem" / "128k-dev"
MODES = ("dense", "sparse", "colbert", "hybrid")


def estimated_reference(question, history) -> int | None:  # type: ignore[no-untyped-def]
    """Message index where the question's reference sits, from its relative distance."""
    from memlab.tokens import count_tokens

    share = question.metadata.get("distance_to_ref_proportion_in_context")
    if share is None or question.end_index <= 0:
        return None
    tokens = [count_tokens(m.content) for m in history.messages[: question.end_index]]
    target = (1.0 - share / 100.0) * sum(tokens)
    running = 0
    for index, count in enumerate(tokens):
        running += count
        if running >= target:
            return index
    return len(tokens) - 1


def random_hit_rate(n: int, window: int, k: int) -> float:
    """P(k messages drawn at random from n include one of ``window`` given ones)."""
    if k >= n:
        return 1.0
    return 1.0 - math.comb(n - window, k) / math.comb(n, k)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="BGE-M3 directory or id; 'minilm' = packaged MiniLM (dense only); default: tiny test model"
    )
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="PersonaMem folder (default: %(default)s)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated scoring modes (default: %(default)s)")
    parser.add_argument("--top-k", type=int, default=10, help="retrieved items per question (default: %(default)s)")
    parser.add_argument("--candidates", type=int, default=100, help="dense candidates re-ranked (default: %(default)s)")
    parser.add_argument("--chunking", default="turn", choices=["turn", "session", "window"])
    parser.add_argument(
        "--lexical",
        default="none",
        choices=["none", "bm25"],
        help="fuse BM25 with each mode (rag's default is bm25; none compares BGE-M3's scorings alone)",
    )
    parser.add_argument("--device", default="cpu", help="cpu (fp32) or e.g. cuda:0 (fp16)")
    parser.add_argument(
        "--reader", default="embedding", help="reader plugin answering the questions (default: %(default)s)"
    )
    parser.add_argument("--window", type=int, default=2, help="ref-hit tolerance in messages (default: %(default)s)")
    parser.add_argument("--max-questions", type=int, default=None, help="answer only this many questions")
    parser.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    args = parser.parse_args(argv)

    from memlab.results import read_predictions
    from memlab.run.driver import run
    from memlab.run.job import cached_dataset
    from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig

    data = Path(args.data)
    if not data.is_dir():
        print(f"PersonaMem folder not found: {data} (pass --data)", file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown scoring mode(s) {unknown}; choose from {', '.join(MODES)}")
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-rag-"))
    notes = []
    if args.model in ("minilm", "all-MiniLM-L6-v2"):
        embedder, model = "minilm", None
        if modes != ["dense"]:
            notes.append("MiniLM has no sparse or ColBERT heads: only 'dense' is run.")
        modes = ["dense"]
    else:
        embedder, model = "bge-m3", args.model
        if model is None:
            from memlab.testing.tiny_bge_m3 import cached_tiny_bge_m3

            model = str(cached_tiny_bge_m3(work))
            notes.append(
                "NOTE: no --model given, so this ran the TINY RANDOM test model: the pipeline runs end to end, "
                "but these numbers are MEANINGLESS. Pass --model /path/to/bge-m3 for real ones."
            )
    backends = [
        BackendSpec(
            name="rag",
            label=f"rag-{mode}",
            config={
                "embedder": embedder,
                "model": model,
                "scoring": mode,
                "candidates": args.candidates,
                "top_k": args.top_k,
                "chunking": args.chunking,
                "device": args.device,
                "lexical": args.lexical,
            },
        )
        for mode in modes
    ]
    config = RunConfig(
        dataset=str(data),
        backends=backends,
        reader=ReaderSpec(name=args.reader),
        out=work / "run",
        max_questions=args.max_questions,
        progress=False,
    )
    started = time.perf_counter()
    summary = run(config)
    seconds = time.perf_counter() - started

    dataset = cached_dataset(str(data))
    predictions = read_predictions(work / "run")
    questions = {q.id: q for q in dataset.questions}
    print(
        f"data: {data} ({len(dataset.questions)} questions); embedder: {embedder} {model or ''}; "
        f"top_k={args.top_k} candidates={args.candidates} chunking={args.chunking}; {seconds:.0f} s"
    )
    header = f"{'backend':<14} {'reader':<20} {'accuracy':>8} {'95% CI':>15} {'ref-hit@k':>9} {'random':>7} {'retrieve s':>10}"
    print(header)
    print("-" * len(header))
    results = []
    for row in summary.rows:
        hits, floor, n = 0, 0.0, 0
        for p in predictions:
            if (p.backend, p.reader) != (row.backend, row.reader) or p.retrieved_messages is None:
                continue
            question = questions[p.question_id]
            history = dataset.histories[p.context_id]
            ref = estimated_reference(question, history)
            if ref is None:
                continue
            near = set(range(ref - args.window, ref + args.window + 1))
            hits += bool(near & set(p.retrieved_messages))
            floor += random_hit_rate(question.end_index, len(near & set(range(question.end_index))), args.top_k)
            n += 1
        acc = row.accuracy
        proxy = f"{hits / n:.3f}" if n else "-"
        rand = f"{floor / n:.3f}" if n else "-"
        ci = f"[{acc.low:.3f}, {acc.high:.3f}]" if acc else "-"
        print(
            f"{row.backend:<14} {row.reader:<20} {acc.accuracy if acc else float('nan'):>8.3f} {ci:>15} "
            f"{proxy:>9} {rand:>7} {row.retrieve_seconds:>10.1f}"
        )
        results.append(
            {
                "backend": row.backend,
                "reader": row.reader,
                "accuracy": acc.model_dump() if acc else None,
                "ref_hit_at_k": hits / n if n else None,
                "random_ref_hit": floor / n if n else None,
                "retrieve_seconds": row.retrieve_seconds,
                "ingest_seconds": row.ingest_seconds,
            }
        )
    for note in notes:
        print(note)
    (work / "bench_rag_scoring.json").write_text(
        json.dumps({"model": model, "embedder": embedder, "modes": modes, "notes": notes, "rows": results}, indent=2)
    )
    print(f"results: {work / 'bench_rag_scoring.json'}; run directory: {work / 'run'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
