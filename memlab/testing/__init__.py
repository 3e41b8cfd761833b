"""Fixtures and fakes for plugin authors: the ``Memory`` conformance suite and small helpers."""

from memlab.testing.conformance import MemoryConformance, session
from memlab.testing.network import block_network

__all__ = ["MemoryConformance", "session", "block_network"]
