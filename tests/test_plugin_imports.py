"""No import cycle in memlab_plugins: each module imports on its own in a fresh interpreter, and the
graph of every import between its modules (top-level and lazy ones inside functions) is acyclic."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import memlab_plugins

ROOT = Path(memlab_plugins.__file__).parent
PACKAGE = "memlab_plugins"

# Records, in the fresh interpreter, which memlab_plugins module imported which while the target loaded.
_PROBE = """
import builtins, importlib, json, sys
edges = set()
real = builtins.__import__
def recording(name, globals=None, locals=None, fromlist=(), level=0):
    module = real(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__", "")
    if importer.startswith("memlab_plugins") and module.__name__.startswith("memlab_plugins"):
        targets = [module.__name__] + [f"{module.__name__}.{n}" for n in fromlist or () if f"{module.__name__}.{n}" in sys.modules]
        edges.update((importer, t) for t in targets if t != importer)
    return module
builtins.__import__ = recording
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(edges)))
"""


def _modules() -> list[str]:
    names = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join([PACKAGE, *parts]))
    return names


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, AttributeError):  # a name inside a module, not a submodule
        return False


def _static_edges(module: str) -> set[tuple[str, str]]:
    """Every import of another memlab_plugins module written in ``module``, wherever it sits."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    package = module if spec.origin.endswith("__init__.py") else module.rpartition(".")[0]
    edges = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if not base.startswith(PACKAGE):
                continue
            # ``from package import submodule`` imports the submodule; ``from module import name`` the module.
            targets = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]
        else:
            continue
        edges.update((module, t) for t in targets if t.startswith(PACKAGE + ".") and t != module)
    return edges


def _cycle(edges: set[tuple[str, str]]) -> list[str] | None:
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _without_package_inits(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    # A package's __init__ re-exporting its backend (``memlab_plugins.rag`` -> ``.backend``) is not a
    # cycle with the submodules importing their siblings: Python imports the parent package first.
    packages = {m for m in _modules() if (ROOT / Path(*m.split(".")[1:]) / "__init__.py").exists()}
    return {(a, b) for a, b in edges if a not in packages and b not in packages}


def test_every_module_imports_alone_in_a_fresh_interpreter_without_a_cycle() -> None:
    runtime: set[tuple[str, str]] = set()
    for module in _modules():
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, module], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, f"import {module} failed in a fresh interpreter:\n{done.stderr[-2000:]}"
        runtime.update(tuple(e) for e in json.loads(done.stdout.strip().splitlines()[-1]))
    assert ("memlab_plugins.rag.backend", "memlab_plugins.rag.store") in runtime, "the probe sees the imports"
    assert _cycle(_without_package_inits(runtime)) is None, _cycle(_without_package_inits(runtime))


def test_no_module_imports_one_that_imports_it_back_even_lazily() -> None:
    edges = set().union(*(_static_edges(m) for m in _modules()))
    assert ("memlab_plugins.rag.backend", "memlab_plugins.rag.pg") in edges, "lazy imports are in the graph"
    assert ("memlab_plugins.profile.backend", "memlab_plugins.profile.pg_store") in edges
    cycle = _cycle(_without_package_inits(edges))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({("a", "b"), ("b", "c"), ("c", "a")}) == ["a", "b", "c", "a"]
    assert _cycle({("a", "b"), ("a", "c"), ("b", "c")}) is None
