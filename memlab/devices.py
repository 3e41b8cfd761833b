"""The run's device: one setting (``memlab run --device``, ``device`` in a run config) that every
model a run loads follows (backends' embedders, the embedding reader, BGE-M3, local LLMs) unless a
plugin names its own (``--rag.device``, ``--reader.device``, ``--llm.device`` win).

Spellings: ``cpu``, ``cuda`` (the current GPU), ``cuda:N``, ``mps`` and ``auto`` (``cuda`` when torch
sees a GPU, else ``cpu``). ``resolve_device`` turns a spelling into the device a model is put on, so
``cuda`` and ``cuda:0`` name one loaded model, not two. Importing this module imports no torch: only
resolving ``auto`` or ``cuda`` does, and only a run that loads a model resolves a device.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from memlab.errors import ConfigurationError

DEVICE_SPELLINGS = "cpu, cuda, cuda:N, mps or auto"
_DEVICE = re.compile(r"^(cpu|auto|mps|cuda(:\d+)?)$")

_run_device: str | None = None


def check_device(value: str) -> str:
    """``value`` lower-cased when it is a device spelling; a ``ValueError`` naming the spellings otherwise."""
    device = value.strip().lower()
    if not _DEVICE.match(device):
        raise ValueError(f"device {value!r} is not one of {DEVICE_SPELLINGS}")
    return device


def set_run_device(device: str | None) -> str | None:
    """The device models follow when they name none (the runner sets the run's ``--device``).
    Returns the previous setting, so a caller can restore it."""
    global _run_device
    previous, _run_device = _run_device, (check_device(device) if device else None)
    return previous


def run_device() -> str | None:
    """The run's device as given (unresolved), or None when the run names none."""
    return _run_device


def _torch() -> Any:
    return sys.modules.get("torch") or __import__("torch")


def resolve_device(device: str | None) -> str:
    """The device a model is put on: ``device``, else the run's, else ``cpu``; ``auto`` becomes ``cuda:N``
    or ``cpu``, and ``cuda`` the current GPU's ``cuda:N``. A GPU asked for where torch sees none is a
    ``ConfigurationError`` (one line), not a failure deep in a model load."""
    wanted = check_device(device or _run_device or "cpu")
    if wanted in ("cpu", "mps"):
        return wanted
    cuda = _torch().cuda
    available = cuda.is_available()
    if wanted == "auto":
        return f"cuda:{cuda.current_device()}" if available else "cpu"
    if not available:
        raise ConfigurationError(
            f"device {wanted!r}: torch sees no CUDA GPU here (torch.cuda.is_available() is False); "
            "use --device cpu, or auto to take a GPU only where there is one"
        )
    if wanted == "cuda":
        return f"cuda:{cuda.current_device()}"
    index = int(wanted.partition(":")[2])
    if index >= cuda.device_count():
        raise ConfigurationError(f"device {wanted!r}: torch sees {cuda.device_count()} CUDA GPU(s) (cuda:0 ...)")
    return wanted


def is_gpu(device: str | None) -> bool:
    """Whether a resolved device is a GPU (what decides fp16 and whether CPU thread settings matter)."""
    return bool(device) and not str(device).startswith("cpu")
