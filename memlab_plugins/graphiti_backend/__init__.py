"""The ``graphiti`` backend: Graphiti's bi-temporal knowledge graph (graphiti-core on embedded Kuzu),
split into ``clients`` (what memlab hands to graphiti) and ``backend`` (the ``Memory`` class).

Install with ``pip install 'memlab[graphiti]'``; importing this package does not import graphiti-core.
"""

from .config import GraphitiConfig

__all__ = ["GraphitiConfig", "GraphitiMemory"]


def __getattr__(name: str) -> object:
    if name == "GraphitiMemory":
        from .backend import GraphitiMemory

        return GraphitiMemory
    raise AttributeError(name)
