"""LoCoMo evidence retrieval, LLM-free: recall@5, recall@10 and MRR per question category.

Every backend replays each LoCoMo conversation through the runner (``memlab.run.driver.run``) and is
asked every question once the whole conversation is in memory; the retrieved items are traced back
to turns and compared with the turns LoCoMo annotates as evidence (``memlab.eval.retrieval``). No
answer is generated: the reader registered here only lets the runner retrieve.

    python benchmarks/bench_locomo_retrieval.py                       # dev file, four backends
    python benchmarks/bench_locomo_retrieval.py --backends rag        # rag's dense, BM25 and hybrid only
    python benchmarks/bench_locomo_retrieval.py --backends rag --rag.embedder hashing
    python benchmarks/bench_locomo_retrieval.py --backends rag --rag.neighbours 1 --rag-modes hybrid
    python benchmarks/bench_locomo_retrieval.py --data locomo10.json --out runs/locomo-full

``--<backend>.<key> VALUE`` sets a backend config key (VALUE parsed as JSON when it parses), as on
the memlab command line. A backend that cannot be created (not installed, needs a missing model or
key) is listed as unavailable with the reason, never dropped. A backend whose items do not say which
turns they came from is shown as "cannot say". Re-running resumes; ``--fresh`` starts over.

The rag backend runs as three rows (``--rag-modes``): ``rag-dense`` (embeddings only,
``lexical: none``), ``rag-bm25`` (BM25 alone: ``lexical: bm25, semantic_weight: 0``) and ``rag``
(the hybrid, rag's default: ``lexical: bm25``, the two rankings fused). ``--rag.*`` settings apply
to all three, under the mode's own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # MiniLM ships in a pip package; never reach a hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

from memlab.datasets.locomo import CATEGORIES  # noqa: E402
from memlab.readers.base import Reader  # noqa: E402
from memlab.registry import backends, readers  # noqa: E402
from memlab.results import Prediction, read_predictions  # noqa: E402
from memlab.run.spec import BackendSpec  # noqa: E402
from memlab.types import Answer, Question, Retrieval  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo10-dev.json"
DEFAULT_BACKENDS = ("rag", "full_context", "mem0", "profile")
ORDER = [CATEGORIES[c] for c in sorted(CATEGORIES)]
COLUMNS = ("recall@5", "recall@10", "mrr")
RAG_MODES: dict[str, dict[str, Any]] = {
    "dense": {"lexical": "none"},
    "bm25": {"lexical": "bm25", "semantic_weight": 0},
    "hybrid": {"lexical": "bm25"},
}


class RetrievalOnlyReader(Reader):
    """Makes the runner retrieve for every question and answers nothing: only retrieval is scored."""

    name = "retrieval_only"
    description = "answers nothing; lets the runner retrieve so retrieval metrics can be scored"

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        return Answer(metadata={"retrieved_items": len(retrieval.items)})


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, dict[str, dict[str, Any]]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo JSON file (default: the dev file)")
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS), help="comma-separated backend names")
    parser.add_argument("--out", default=str(REPO / "runs" / "bench-locomo-retrieval"), help="run directory")
    parser.add_argument("--fresh", action="store_true", help="delete the run directory first")
    parser.add_argument("--json", dest="json_out", help="also write the table as JSON here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--contexts", help="only these conversations (comma-separated sample ids)")
    parser.add_argument(
        "--rag-modes", default=",".join(RAG_MODES), help=f"rag rows to run, comma-separated from {', '.join(RAG_MODES)}"
    )
    args, rest = parser.parse_known_args(argv)
    configs: dict[str, dict[str, Any]] = defaultdict(dict)
    i = 0
    while i < len(rest):
        flag = rest[i]
        if not flag.startswith("--") or "." not in flag or i + 1 >= len(rest):
            parser.error(f"unexpected argument {flag!r}: use --<backend>.<key> VALUE")
        name, _, key = flag[2:].partition(".")
        configs[name][key.replace("-", "_")] = _value(rest[i + 1])
        i += 2
    return args, dict(configs)


def check_backend(name: str, config: dict[str, Any]) -> str | None:
    """None when ``name`` can be created with ``config``, else why not (one line)."""
    try:
        cls = backends.get(name)
        cls.parse_config(config)
        cls(config).close()  # a backend that needs a missing model or API key fails here, not mid-run
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def table(predictions: list[Prediction]) -> dict[str, dict[str, dict[str, float]]]:
    """backend -> category (and 'all') -> mean metrics, with n (scored) and n_evidence."""
    groups: dict[tuple[str, str], list[Prediction]] = defaultdict(list)
    for p in predictions:
        if p.evidence_messages:  # questions without evidence cannot be scored for retrieval
            groups[(p.backend, p.question_type)].append(p)
            groups[(p.backend, "all")].append(p)
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for (backend, category), preds in groups.items():
        scored = [p for p in preds if "mrr" in p.metrics]
        row: dict[str, float] = {"n": float(len(scored)), "n_evidence": float(len(preds))}
        for column in COLUMNS:
            if scored:
                row[column] = sum(p.metrics[column] for p in scored) / len(scored)
        out[backend][category] = row
    return dict(out)


def render(
    results: dict[str, dict[str, dict[str, float]]],
    unavailable: dict[str, str],
    failed: list[dict[str, Any]],
    order: list[str],
) -> str:
    lines = ["| backend | category | n | recall@5 | recall@10 | MRR |", "|---|---|---:|---:|---:|---:|"]
    for backend in order:
        if backend in unavailable:
            lines.append(f"| {backend} | all | - | unavailable | unavailable | unavailable |")
            continue
        rows = results.get(backend, {})
        for category in ORDER + ["all"]:
            row = rows.get(category)
            if row is None:
                continue
            if not row["n"]:
                lines.append(
                    f"| {backend} | {category} | 0/{int(row['n_evidence'])} | cannot say | cannot say | cannot say |"
                )
                continue
            cells = " | ".join(f"{row[c]:.3f}" for c in COLUMNS)
            n = f"{int(row['n'])}" + (f"/{int(row['n_evidence'])}" if row["n"] != row["n_evidence"] else "")
            lines.append(f"| {backend} | {category} | {n} | {cells} |")
        if not rows:
            lines.append(f"| {backend} | all | 0 | no predictions | - | - |")
    text = "\n".join(lines)
    notes = [f"- {name}: unavailable ({reason})" for name, reason in unavailable.items()]
    notes += [f"- {f['backend']} on {f['context_id']}: job failed ({f['error']})" for f in failed]
    return text + ("\n\n" + "\n".join(notes) if notes else "")


def main(argv: list[str] | None = None) -> int:
    args, configs = parse_args(sys.argv[1:] if argv is None else argv)
    from memlab.run.driver import run
    from memlab.run.spec import ReaderSpec, RunConfig

    if RetrievalOnlyReader.name not in readers.names():
        readers.register(RetrievalOnlyReader.name, RetrievalOnlyReader)
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    unknown_config = sorted(set(configs) - set(names))
    if unknown_config:
        raise SystemExit(f"config given for backend(s) not in --backends: {unknown_config}")
    specs: list[BackendSpec] = []
    for name in names:
        if name != "rag":
            specs.append(BackendSpec(name=name, config=configs.get(name, {})))
            continue
        for mode in [m.strip() for m in args.rag_modes.split(",") if m.strip()]:
            if mode not in RAG_MODES:
                raise SystemExit(f"unknown rag mode {mode!r}: choose from {', '.join(RAG_MODES)}")
            label = "rag" if mode == "hybrid" else f"rag-{mode}"  # the hybrid is rag's default
            specs.append(BackendSpec(name="rag", label=label, config={**configs.get("rag", {}), **RAG_MODES[mode]}))
    unavailable = {}
    for spec in specs:
        reason = check_backend(spec.name, spec.config)
        if reason:
            unavailable[spec.display] = reason
    available = [s for s in specs if s.display not in unavailable]
    out = Path(args.out)
    if args.fresh and out.exists():
        shutil.rmtree(out)
    failed: list[dict[str, Any]] = []
    if available:
        config = RunConfig(
            dataset=f"locomo:{args.data}",
            backends=available,
            reader=ReaderSpec(name=RetrievalOnlyReader.name),
            out=out,
            controls=False,
            progress=not args.no_progress,
            contexts=[c.strip() for c in args.contexts.split(",")] if args.contexts else None,
        )
        summary = run(config)
        failed = summary.failed_jobs
        print(
            f"dataset: {summary.dataset.get('source')} ({summary.dataset.get('histories')} conversations, "
            f"{summary.dataset.get('questions')} questions, {summary.dataset.get('issues')} data issues)"
        )
    shown = {s.display for s in available}
    results = table([p for p in read_predictions(out) if p.backend in shown])
    print(render(results, unavailable, failed, [s.display for s in specs]))
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"results": results, "unavailable": unavailable, "failed_jobs": failed}, indent=2),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
