"""Which memory designs win which PersonaMem-v2 types, on the offline v2-style data (``synthetic:style=v2``).

    python benchmarks/synthetic_sweep_v2.py [--seeds 11,22,33,44] [--personas 10] [--tokens 3000]
                                            [--backends rag,full_context,profile,mem0] [--embedder hashing]

Every backend replays each history as the runner does (the whole history, then one retrieval per
question with the question text), twice: as configured, and with ``forget_requests`` on (the
backend honours "please forget that I ..."). The LLM-free embedding reader answers (``--reader-embedder``,
default minilm); the blind controls are the ``none`` backend (empty retrieval) with the same reader
and the longest-option reader. The table gives accuracy per ``pref_type`` (and ``who=others``); the
checks under it, each an exact McNemar test on the same questions:

- every backend beats the blind embedding control on the self-preference types (stereotypical,
  anti-stereotypical, neutral, therapy, health);
- with ``forget_requests`` each backend does better on ``ask_to_forget`` than without it;
- full_context does not fall below the blind control on ``who=others``.
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

from result_files import SweepResult  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from synthetic_sweep import check, sweep_row  # noqa: E402

from memlab.datasets.personamem_v2 import PREF_TYPES  # noqa: E402
from memlab.datasets.synthetic.v2 import generate_v2  # noqa: E402
from memlab.readers.controls import LongestOptionReader  # noqa: E402
from memlab.readers.embedding import EmbeddingReader  # noqa: E402
from memlab.registry import create_backend  # noqa: E402
from memlab.types import Retrieval  # noqa: E402

TYPES = PREF_TYPES
SHORT = {
    "stereotypical_pref": "stereo",
    "anti_stereotypical_pref": "anti",
    "neutral_preferences": "neutral",
    "therapy_background": "therapy",
    "health_and_medical_conditions": "health",
    "ask_to_forget": "forget",
    "sensitive_info": "sensitive",
    "others": "who=others",
}
SELF_TYPES = TYPES[:5]
BLIND, LONGEST = "none", "longest_option"
FORGET = "+forget"

Hits = dict[str, tuple[str, bool]]  # question id -> (type, correct); who=others questions typed "others" too


def backend_config(name: str, embedder: str, forget: bool) -> dict[str, object]:
    config: dict[str, object] = {"forget_requests": forget}
    if name in ("rag", "profile", "mem0"):
        config["embedder"] = embedder
    return config


def replay(
    row: str, seeds: list[int], personas: int, tokens: int, reader: EmbeddingReader, embedder: str, work: Path
) -> tuple[Hits, Hits]:
    """(hits by pref_type, hits of who=others questions) for one row."""
    by_type: Hits = {}
    others: Hits = {}
    longest = LongestOptionReader()
    name, forget = row.removesuffix(FORGET), row.endswith(FORGET)
    for seed in seeds:
        dataset = generate_v2(personas=personas, seed=seed, tokens=tokens)
        for context_id, history in dataset.histories.items():
            memory = None
            if name not in (BLIND, LONGEST):
                memory = create_backend(
                    name, backend_config(name, embedder, forget), data_dir=work / f"{row}-{context_id}"
                )
            try:
                if memory is not None:
                    for session, _ in history.slices(0, len(history.messages)):
                        memory.ingest(session, user_id="u")
                for question in dataset.questions_for(context_id):
                    retrieval = memory.retrieve(question.text, user_id="u") if memory is not None else Retrieval()
                    answer = (longest if name == LONGEST else reader).answer(question, retrieval)
                    correct = answer.choice == question.answer
                    by_type[question.id] = (question.type, correct)
                    if question.metadata["who"] == "others":
                        others[question.id] = ("others", correct)
            finally:
                if memory is not None:
                    memory.close()
    return by_type, others


def table(rows: dict[str, tuple[Hits, Hits]]) -> str:
    columns = [*TYPES, "others"]
    headers = ["row", "overall", *(SHORT[t] for t in columns)]
    lines = [headers]
    for name, (hits, others) in rows.items():
        cells = [name, f"{sum(c for _, c in hits.values()) / len(hits):.1%}"]
        for qtype in columns:
            mine = [c for t, c in (others if qtype == "others" else hits).values() if t == qtype]
            cells.append(f"{sum(mine) / len(mine):.1%}" if mine else "-")
        lines.append(cells)
    hits, others = next(iter(rows.values()))
    lines.append(
        ["questions", str(len(hits)), *(str(sum(t == q for t, _ in hits.values())) for q in TYPES), str(len(others))]
    )
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))) for line in lines
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="11,22,33,44")
    parser.add_argument("--personas", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=3000, help="tokens per history")
    parser.add_argument("--backends", default="rag,full_context,profile,mem0")
    parser.add_argument("--embedder", default="hashing", help="the backends' embedder (rag, profile, mem0)")
    parser.add_argument("--reader-embedder", default="minilm", help="the embedding reader's embedder")
    parser.add_argument("--cache-dir", default=".memlab_cache", help="embedding cache (reruns cost nothing)")
    parser.add_argument("--json", type=Path, default=None, help="also write the table's result file here")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    backends = [b for b in args.backends.split(",") if b]
    from memlab.embedders import set_default_cache_dir

    set_default_cache_dir(Path(args.cache_dir))
    reader = EmbeddingReader({"embedder": args.reader_embedder})
    rows: dict[str, tuple[Hits, Hits]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="memlab-sweep-v2-") as work:
        for name in [*(r for b in backends for r in (b, b + FORGET)), BLIND, LONGEST]:
            started = time.perf_counter()
            rows[name] = replay(name, seeds, args.personas, args.tokens, reader, args.embedder, Path(work))
            seconds[name] = time.perf_counter() - started
    labels = {BLIND: "none (blind)", LONGEST: "none / longest_option (blind)"}
    shown = {labels.get(name, name): hits for name, hits in rows.items()}
    setting = (
        f"synthetic style=v2, seeds {seeds}, {args.personas} personas each, {args.tokens} tokens per history; "
        f"backends' embedder {args.embedder}; reader: embedding[{args.reader_embedder}]"
    )
    print(setting)
    print(table(shown))
    print("seconds: " + ", ".join(f"{name} {s:.0f}" for name, s in seconds.items()))
    print("checks (exact McNemar, paired on the same questions):")
    checks = [
        check(f"{name} > none (blind) on {SHORT[qtype]}", rows[name][0], rows[BLIND][0], qtype, better=True)
        for name in backends
        for qtype in SELF_TYPES
    ]
    checks += [
        check(f"{name}{FORGET} > {name} on forget", rows[name + FORGET][0], rows[name][0], "ask_to_forget", better=True)
        for name in backends
    ]
    if "full_context" in rows:
        checks.append(
            check(
                "full_context >= none (blind) on who=others",
                rows["full_context"][1],
                rows[BLIND][1],
                "others",
                better=False,
            )
        )
    if args.json:
        columns = [*TYPES, "others"]
        SweepResult(
            setting=setting,
            headers={t: SHORT[t] for t in columns},
            rows=[
                sweep_row(name, hits, {t: others if t == "others" else hits for t in columns})
                for name, (hits, others) in shown.items()
            ],
            checks=checks,
            seconds=seconds,
        ).save(args.json)
    return 0 if all(c.passed for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
