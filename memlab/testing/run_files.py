"""Synthetic run directories in the real result-file format, for the UI's tests and benchmark.

``write_run_files(out, questions=..., rows=...)`` writes ``predictions.jsonl`` (``Prediction`` lines,
as the runner appends them), ``summary.json`` (``summarize_rows`` of those, as the runner saves it)
and an ``errors.log``. Picks are drawn with a seed, so two calls write the same files; each row is
right with its own probability, and PersonaMem-v2-like breakdown fields and distances are set so
every filter of the question list has something to select.
"""

from __future__ import annotations

import random
from pathlib import Path

from memlab.datasets.question_types import CANONICAL_TYPES
from memlab.results import PREDICTIONS_FILE, Prediction, RunSummary, summarize_rows

FIELDS = {"who": ("self", "family", "friend"), "updated": ("true", "false"), "scenario": ("chat", "email", "review")}


def synthetic_predictions(
    questions: int, rows: int, seed: int = 0, dataset_hash: str = "0" * 64
) -> tuple[list[Prediction], dict[str, str]]:
    """``questions`` x (``rows`` - 1 memory rows + the blind control) predictions, and the row fingerprints."""
    rng = random.Random(seed)
    labels = [(f"backend{i}", "embedding[minilm]") for i in range(rows - 1)] + [("none", "embedding[minilm]")]
    skill = {label: 0.35 + 0.5 * i / max(1, rows - 1) for i, label in enumerate(labels[:-1])}
    skill[labels[-1]] = 0.3
    fingerprints = {f"{b}|{r}": f"fp{i:04d}" for i, (b, r) in enumerate(labels)}
    out = []
    for q in range(questions):
        history = q // 200
        answer = rng.randrange(4)
        distance = int(rng.expovariate(1 / 20_000))
        end = 2_000 + 10 * (q % 200)
        evidence = [rng.randrange(end)]
        fields = {name: rng.choice(values) for name, values in FIELDS.items()}
        for backend, reader in labels:
            right = rng.random() < skill[(backend, reader)]
            chosen = answer if right else rng.choice([i for i in range(4) if i != answer])
            scores = [round(rng.random(), 4) for _ in range(4)]
            scores[chosen] = 1.0 + round(rng.random(), 4)
            retrieved = None if backend == "none" else sorted(rng.sample(range(end), 10), reverse=True)
            if retrieved is not None and right:
                retrieved[rng.randrange(10)] = evidence[0]
            out.append(
                Prediction(
                    backend=backend,
                    reader=reader,
                    question_id=f"h{history}-q{q:05d}",
                    context_id=f"history-{history}",
                    question_type=CANONICAL_TYPES[q % len(CANONICAL_TYPES)],
                    distance_tokens=distance,
                    distance_blocks=distance // 1024,
                    chosen=chosen,
                    answer=answer,
                    correct=right,
                    scores=scores,
                    context_tokens=0 if backend == "none" else 800 + rng.randrange(400),
                    retrieved_items=0 if retrieved is None else len(retrieved),
                    retrieved_messages=retrieved,
                    evidence_messages=evidence,
                    retrieve_seconds=0.0 if backend == "none" else 0.005 + rng.random() / 100,
                    answer_seconds=0.01,
                    fields=fields,
                    fingerprint=fingerprints[f"{backend}|{reader}"],
                )
            )
    return out, fingerprints


def write_run_files(
    out: str | Path,
    questions: int = 40,
    rows: int = 3,
    seed: int = 0,
    summary: bool = True,
    dataset: str = "synthetic-ui-test",
) -> Path:
    """A run directory of ``questions`` x ``rows`` predictions (see the module docstring); with
    ``summary=False`` no summary.json, as a run still in progress."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    predictions, fingerprints = synthetic_predictions(questions, rows, seed)
    with (out / PREDICTIONS_FILE).open("w", encoding="utf-8") as handle:
        for prediction in predictions:
            handle.write(prediction.model_dump_json() + "\n")
    (out / "errors.log").write_text("no errors: a synthetic run\n", encoding="utf-8")
    if summary:
        summarized = summarize_rows(predictions)
        for row in summarized:
            row.settings = {"dataset": {"spec": dataset, "content_sha256": "0" * 64}}
            row.fingerprint = fingerprints[f"{row.backend}|{row.reader}"]
        RunSummary(
            name=out.name,
            config={"dataset": dataset},
            dataset={"spec": dataset},
            row_fingerprints=fingerprints,
            rows=summarized,
        ).save(out)
    return out


__all__ = ["write_run_files", "synthetic_predictions"]
