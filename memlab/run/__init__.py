"""The run pipeline, in the order work flows:

- ``memlab.run.spec``: the run config and the backend/reader specs it lists;
- ``memlab.run.job``: one backend and reader replaying one history (imports no executor);
- ``memlab.run.executors``: where jobs run (``local``, ``process``, ``ray``) and the worker code they share;
- ``memlab.run.fingerprint``: what determines a row's answers, hashed;
- ``memlab.run.driver``: plan, resume, lock, write results and summarise (``run``);
- ``memlab.run.judging``: the optional LLM-judge stage after answering.

Names are imported lazily, so ``import memlab.run.job`` loads neither the driver nor an executor.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "BackendSpec": "memlab.run.spec",
    "ReaderSpec": "memlab.run.spec",
    "RunConfig": "memlab.run.spec",
    "JudgeSpec": "memlab.run.spec",
    "Job": "memlab.run.job",
    "run_job": "memlab.run.job",
    "run": "memlab.run.driver",
    "run_with_details": "memlab.run.driver",
    "plan_jobs": "memlab.run.driver",
    "make_executor": "memlab.run.executors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'memlab.run' has no attribute {name!r}")
