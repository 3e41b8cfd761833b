"""Datasets: PersonaMem (released layout), LoCoMo, and the synthetic PersonaMem-format generator.

``load_dataset(spec)`` is the single entry point the runner uses. Specs:

- ``synthetic`` or ``synthetic:personas=3,seed=7`` - generated offline, deterministic by seed
- ``personamem:32k`` / ``personamem:128k`` / ``personamem:1M`` - the released files, looked up in
  ``$MEMLAB_DATA_DIR/personamem`` and downloaded there once
- ``personamem:<folder>``, ``personamem:<questions.csv>`` or just ``<folder>`` - local files; a folder
  without a contexts file loads questions only (blind controls can still run on it)
- ``locomo:<file.json>`` - a LoCoMo file (``locomo`` alone downloads locomo10.json to ``$MEMLAB_DATA_DIR/locomo``)
- ``personamem-v2:32k`` / ``personamem-v2:128k`` - PersonaMem-v2's text release, looked up in
  ``$MEMLAB_DATA_DIR/personamem-v2`` (the benchmark CSV and exactly the histories it links downloaded
  there once); ``personamem-v2:32k:<folder>`` a local snapshot root
- ``synthetic:style=v2,personas=N,...`` - offline data with PersonaMem-v2's structure
- ``longmemeval:<file.json>`` - a LongMemEval file; ``longmemeval:oracle|s|m`` the released files,
  looked up in ``$MEMLAB_DATA_DIR/longmemeval`` and downloaded there once (``longmemeval`` alone: ``s``)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

from memlab.datasets.base import DataIssue, Dataset, History, split_at_system

__all__ = ["DataIssue", "Dataset", "History", "load_dataset", "split_at_system"]


def _options(text: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"bad dataset option {part!r}: expected key=value")
        options[key.strip()] = value.strip()
    return options


def _int_parameters(options: dict[str, str], generator: Callable[..., Dataset], what: str) -> dict[str, int]:
    """A generator's options as ints; an unknown name or a non-integer value is one line naming it."""
    known = [name for name in inspect.signature(generator).parameters]
    parameters = {}
    for key, value in options.items():
        if key not in known:
            raise ValueError(f"{what}: unknown parameter {key!r}; known: {', '.join(['style', *known])}")
        try:
            parameters[key] = int(value)
        except ValueError:
            raise ValueError(f"{what}: {key}={value!r} is not an integer") from None
    return parameters


def load_dataset(spec: str) -> Dataset:
    """Load a dataset from a spec string (see the module docstring)."""
    kind, _, rest = spec.partition(":")
    if kind == "synthetic":
        options = _options(rest)
        style = options.pop("style", "v1")
        if style not in ("v1", "v2"):
            raise ValueError(f"unknown synthetic style {style!r}: expected v1 (PersonaMem) or v2 (PersonaMem-v2)")
        if style == "v2":
            from memlab.datasets.synthetic.v2 import generate_v2

            return generate_v2(**_int_parameters(options, generate_v2, "synthetic:style=v2"))
        from memlab.datasets.synthetic import generate

        return generate(**_int_parameters(options, generate, "synthetic"))
    if kind == "personamem-v2":
        from memlab.datasets.personamem_v2 import load_personamem_v2

        return load_personamem_v2(rest or "32k")
    if kind == "personamem":
        from memlab.datasets.personamem import load_personamem

        return load_personamem(rest or "32k")
    if kind == "locomo":
        from memlab.datasets.locomo import load_locomo

        return load_locomo(rest or None)
    if kind == "longmemeval":
        from memlab.datasets.longmemeval import load_longmemeval

        return load_longmemeval(rest or None)
    path = Path(spec)
    if path.suffix == ".json":
        from memlab.datasets.locomo import load_locomo

        return load_locomo(str(path))
    from memlab.datasets.personamem import load_personamem

    return load_personamem(spec)
