"""LangGraph's ``BaseStore.batch`` contract, once for memlab's stores: each operation to its handler, in order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp


def run_ops(
    ops: Iterable[Op],
    *,
    get: Callable[[GetOp], Any],
    put: Callable[[PutOp], None],
    search: Callable[[SearchOp], Any],
    list_namespaces: Callable[[ListNamespacesOp], Any],
) -> list[Result]:
    """The results of ``ops`` in order (``None`` for a put), as LangGraph's own stores give them."""
    results: list[Result] = []
    for op in ops:
        if isinstance(op, GetOp):
            results.append(get(op))
        elif isinstance(op, PutOp):
            put(op)
            results.append(None)
        elif isinstance(op, SearchOp):
            results.append(search(op))
        elif isinstance(op, ListNamespacesOp):
            results.append(list_namespaces(op))
        else:
            raise TypeError(f"unsupported store operation {type(op).__name__}")
    return results
