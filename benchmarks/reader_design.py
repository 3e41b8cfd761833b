"""How the embedding reader's design choices were made: variants scored on the PersonaMem dev data.

    python benchmarks/reader_design.py [--dataset ../shared/data/personamem/128k-dev]

Only the dev history (and the synthetic data) may be used to design the reader. For every question
the memory is the rag backend's top-k (k=10 and 30) or the whole history, and each variant scores
the four options from the same MiniLM embeddings:

- ``max``: best option-item similarity;  ``top-m mean``: mean of the m best;
- ``centroid``: option minus the mean of the four options (what makes an option different);
- ``joint``: max over items of option-item + w * question-item similarity (the shipped default, w=0.5).

Then, on the questions whose wording asks for something new (the reader's ``novelty_cues``), the
novelty rule ``o·q - w * max over items of o·m`` for several w, against memory support and the
question alone (the shipped default: w=0.6).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memlab.datasets import load_dataset  # noqa: E402
from memlab.embedders import get_embedder  # noqa: E402
from memlab.readers.base import strip_option_label  # noqa: E402
from memlab.readers.embedding import EmbeddingReader  # noqa: E402
from memlab.registry import create_backend  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "personamem" / "128k-dev"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(DEFAULT_DATA))
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    embedder = get_embedder("minilm")
    records = []  # (question, option vectors, query vector, {memory name: item vectors})
    memo: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:  # each distinct text is embedded once
        new = [t for t in dict.fromkeys(texts) if t not in memo]
        memo.update(zip(new, embedder.embed(new)))
        return np.stack([memo[t] for t in texts]) if texts else np.zeros((0, embedder.dim), np.float32)

    for context_id, history in dataset.histories.items():
        memories = {k: create_backend("rag", {"top_k": k}) for k in (10, 30)}  # one memory per history
        position = 0
        for question in dataset.questions_for(context_id):
            for session, _ in history.slices(position, question.end_index):
                for memory in memories.values():
                    memory.ingest(session, user_id="u")
            position = max(position, question.end_index)
            turns = [m.content for m in history.messages[: question.end_index] if m.role != "system"]
            views = {
                f"rag@{k}": embed([i.text for i in m.retrieve(question.text, user_id="u").items])
                for k, m in memories.items()
            }
            views["all turns"] = embed(turns)
            records.append(
                (
                    question,
                    embed([strip_option_label(o) for o in question.options]),
                    embedder.embed([question.text], query=True)[0],
                    views,
                )
            )

    def variant(name: str, view: str, fn) -> None:  # type: ignore[no-untyped-def]
        hits: dict[str, list[bool]] = defaultdict(list)
        for question, options, query, views in records:
            choice = int(np.argmax(fn(options, views[view], query)))
            hits[question.type].append(choice == question.answer)
            hits["all"].append(choice == question.answer)
        per_type = " ".join(f"{t[:10]}={np.mean(v):.2f}" for t, v in sorted(hits.items()) if t != "all")
        print(f"{name:<22} {view:<10} {np.mean(hits['all']):.3f}  {per_type}")

    novelty_reader = EmbeddingReader(embedder=embedder)
    novel = [r for r in records if novelty_reader.asks_for_novelty(r[0])]

    def novelty(name: str, fn) -> None:  # type: ignore[no-untyped-def]
        hits: dict[str, list[bool]] = defaultdict(list)
        for question, options, query, views in novel:
            correct = int(np.argmax(fn(options, views["rag@10"], query))) == question.answer
            hits[question.type].append(correct)
            hits["all"].append(correct)
        per_type = " ".join(f"{t[:10]}={sum(v)}/{len(v)}" for t, v in sorted(hits.items()) if t != "all")
        print(f"{name:<22} rag@10     {sum(hits['all'])}/{len(hits['all'])}  {per_type}")

    blind = [np.mean([int(np.argmax(o @ q)) == qu.answer for qu, o, q, _ in records])]
    print(f"{'blind (question only)':<33} {blind[0]:.3f}")
    for view in ("rag@10", "rag@30", "all turns"):
        variant("max", view, lambda o, m, q: (o @ m.T).max(1))
        variant("top-3 mean", view, lambda o, m, q: np.sort(o @ m.T, 1)[:, -3:].mean(1))
        variant("centroid max", view, lambda o, m, q: ((o - o.mean(0)) @ m.T).max(1))
        for w in (0.25, 0.5, 1.0):
            variant(f"joint w={w}", view, lambda o, m, q, w=w: (o @ m.T + w * (m @ q)[None, :]).max(1))
    print(f"questions asking for something new (novelty_cues): {len(novel)}")
    if novel:
        novelty("memory support", lambda o, m, q: (o @ m.T + 0.5 * (m @ q)[None, :]).max(1))
        novelty("question only", lambda o, m, q: o @ q)
        for w in (0.3, 0.6, 1.0):
            novelty(f"novelty w={w}", lambda o, m, q, w=w: o @ q - w * (o @ m.T).max(1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
