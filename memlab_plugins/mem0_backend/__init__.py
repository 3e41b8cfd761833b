"""The ``mem0`` backend, split along its seams: ``config`` (what a user sets, presets), ``wiring``
(building mem0 offline from its public configuration), ``ingest`` (how sessions become mem0 memories),
``ledger`` (what memlab keeps beside mem0), ``erasure`` (deleting text for real) and ``backend``
(the ``Memory`` class: retrieval and capabilities)."""

from .backend import Mem0Memory, Mem0StoreError
from .config import Mem0Config
from .ledger import LEDGER_FILE
from .wiring import import_mem0

__all__ = ["LEDGER_FILE", "Mem0Config", "Mem0Memory", "Mem0StoreError", "import_mem0"]
