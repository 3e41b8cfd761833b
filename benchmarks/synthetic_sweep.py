"""Where memory helps on the calibrated synthetic data: a seed sweep with paired significance tests.

    python benchmarks/synthetic_sweep.py [--seeds 101,202,303,404] [--personas 8]
                                         [--backends rag,full_context,profile,mem0]

Every backend replays each history exactly as the runner does (ingest up to the question's
``end_index``, retrieve with the question text) and the LLM-free embedding reader answers; the
blind controls are the ``none`` backend (empty retrieval) with the same reader, and the
longest-option reader. The table gives accuracy per question type; the checks below it are the
claims of issue 18, each with its exact McNemar test on the same questions:

- rag and full_context beat both blind controls on fact recall;
- no memory backend scores below the blind embedding control on "new ideas";
- profile beats rag on latest preference and on preference evolution.
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

from result_files import PairedCheck, SweepResult, SweepRow, score  # noqa: E402  (benchmarks/ on sys.path)

from memlab.datasets.question_types import (  # noqa: E402
    ACKNOWLEDGE_LATEST,
    CANONICAL_TYPES,
    RECALL_FACTS,
    SHORT_NAMES,
    SUGGEST_NEW,
    TRACK_EVOLUTION,
)
from memlab.datasets.synthetic import generate  # noqa: E402
from memlab.readers.controls import LongestOptionReader  # noqa: E402
from memlab.readers.embedding import EmbeddingReader  # noqa: E402
from memlab.registry import create_backend  # noqa: E402
from memlab.results import mcnemar_exact  # noqa: E402
from memlab.types import Retrieval  # noqa: E402


def short_label(qtype: str) -> str:
    return SHORT_NAMES.get(qtype, qtype)


BLIND = "none"
LONGEST = "longest_option"


def replay(
    backend: str, seeds: list[int], personas: int, reader: EmbeddingReader, work: Path
) -> dict[str, tuple[str, bool]]:
    """question id -> (type, correct) for one backend read by the embedding reader."""
    out: dict[str, tuple[str, bool]] = {}
    longest = LongestOptionReader()
    for seed in seeds:
        dataset = generate(personas=personas, seed=seed)
        for context_id, history in dataset.histories.items():
            memory = (
                None
                if backend in (BLIND, LONGEST)
                else create_backend(backend, data_dir=work / f"{backend}-{context_id}")
            )
            position = 0
            try:
                for question in dataset.questions_for(context_id):
                    if memory is not None:
                        for session, _ in history.slices(position, question.end_index):
                            memory.ingest(session, user_id="u")
                        position = max(position, question.end_index)
                        retrieval = memory.retrieve(question.text, user_id="u")
                    else:
                        retrieval = Retrieval()
                    answer = (longest if backend == LONGEST else reader).answer(question, retrieval)
                    out[question.id] = (question.type, answer.choice == question.answer)
            finally:
                if memory is not None:
                    memory.close()
    return out


def paired(
    a: dict[str, tuple[str, bool]], b: dict[str, tuple[str, bool]], qtype: str | None
) -> tuple[float, float, int, int, float]:
    """accuracy of a, of b, wins of a, losses of a, exact McNemar p on the questions of ``qtype``."""
    ids = [q for q in a if q in b and (qtype is None or a[q][0] == qtype)]
    wins = sum(a[q][1] and not b[q][1] for q in ids)
    losses = sum(b[q][1] and not a[q][1] for q in ids)
    return (
        sum(a[q][1] for q in ids) / len(ids),
        sum(b[q][1] for q in ids) / len(ids),
        wins,
        losses,
        mcnemar_exact(wins, losses),
    )


def table(rows: dict[str, dict[str, tuple[str, bool]]]) -> str:
    headers = ["row", "overall", *(short_label(t) for t in CANONICAL_TYPES)]
    lines = [headers]
    for name, hits in rows.items():
        cells = [name, f"{sum(c for _, c in hits.values()) / len(hits):.1%}"]
        for qtype in CANONICAL_TYPES:
            mine = [c for t, c in hits.values() if t == qtype]
            cells.append(f"{sum(mine) / len(mine):.1%}" if mine else "-")
        lines.append(cells)
    any_row = next(iter(rows.values()))
    counts = ["questions", str(len(any_row)), *(str(sum(t == q for t, _ in any_row.values())) for q in CANONICAL_TYPES)]
    lines.append(counts)
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))) for line in lines
    )


def check(
    label: str,
    a: dict[str, tuple[str, bool]],
    b: dict[str, tuple[str, bool]],
    qtype: str,
    *,
    better: bool,
    alpha: float = 0.05,
) -> PairedCheck:
    acc_a, acc_b, wins, losses, p = paired(a, b, qtype)
    ok = (acc_a > acc_b and p < alpha) if better else acc_a >= acc_b
    print(
        f"  [{'PASS' if ok else 'FAIL'}] {label}: {acc_a:.1%} vs {acc_b:.1%} "
        f"(wins {wins}, losses {losses}, McNemar p={p:.3g})"
    )
    return PairedCheck(label=label, accuracy=acc_a, against=acc_b, wins=wins, losses=losses, p_value=p, passed=ok)


def sweep_row(
    name: str, hits: dict[str, tuple[str, bool]], columns: dict[str, dict[str, tuple[str, bool]]]
) -> SweepRow:
    """A row of the result file: accuracy overall (``hits``) and per column (its own hits, by type)."""
    return SweepRow(
        name=name,
        overall=score([c for _, c in hits.values()]),
        columns={key: score([c for t, c in column.values() if t == key]) for key, column in columns.items()},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="101,202,303,404")
    parser.add_argument("--personas", type=int, default=8)
    parser.add_argument("--backends", default="rag,full_context,profile,mem0")
    parser.add_argument("--cache-dir", default=".memlab_cache", help="embedding cache (reruns cost nothing)")
    parser.add_argument("--json", type=Path, default=None, help="also write the table's result file here")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    backends = [b for b in args.backends.split(",") if b]
    from memlab.embedders import set_default_cache_dir

    set_default_cache_dir(Path(args.cache_dir))
    reader = EmbeddingReader()
    rows: dict[str, dict[str, tuple[str, bool]]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="memlab-sweep-") as work:
        for name in [*backends, BLIND, LONGEST]:
            started = time.perf_counter()
            rows[name] = replay(name, seeds, args.personas, reader, Path(work))
            seconds[name] = time.perf_counter() - started
    labels = {BLIND: "none (blind)", LONGEST: "none / longest_option (blind)"}
    shown = {labels.get(name, name): hits for name, hits in rows.items()}
    setting = f"synthetic seeds {seeds}, {args.personas} personas each; reader: embedding[minilm]"
    print(setting)
    print(table(shown))
    print("seconds: " + ", ".join(f"{name} {s:.0f}" for name, s in seconds.items()))
    print("checks (exact McNemar, paired on the same questions):")
    # (label, row, against, question type, must be significantly better; else: not worse)
    claims: list[tuple[str, str, str, str, bool]] = []
    for name in ("rag", "full_context"):
        claims += [(f"{name} > {labels[c]}", name, c, RECALL_FACTS, True) for c in (BLIND, LONGEST) if name in rows]
    claims += [(f"{name} >= {labels[BLIND]}", name, BLIND, SUGGEST_NEW, False) for name in backends]
    if "profile" in rows and "rag" in rows:
        claims += [("profile > rag", "profile", "rag", qtype, True) for qtype in (ACKNOWLEDGE_LATEST, TRACK_EVOLUTION)]
    checks = [
        check(f"{label} on {short_label(qtype)}", rows[name], rows[against], qtype, better=better)
        for label, name, against, qtype, better in claims
    ]
    if args.json:
        SweepResult(
            setting=setting,
            headers={t: short_label(t) for t in CANONICAL_TYPES},
            rows=[sweep_row(name, hits, dict.fromkeys(CANONICAL_TYPES, hits)) for name, hits in shown.items()],
            checks=checks,
            seconds=seconds,
        ).save(args.json)
    return 0 if all(c.passed for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
