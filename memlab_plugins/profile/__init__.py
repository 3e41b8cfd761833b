"""The ``profile`` backend: a versioned user profile changed only through ADD/UPDATE/DELETE/NOOP.

Modules: ``models`` (entries and operations), ``store`` (SQLite, one file per store; the storage
interface), ``pg_store`` (the same store on PostgreSQL),
``extract_rules`` (the LLM-free extractor), ``extract_llm`` (one JSON prompt per session),
``resolve`` (aspect matching by embedding), ``render`` (retrieval text), ``backend`` (the Memory).
"""

from memlab_plugins.profile.models import Evidence, Operation, OpType, ProfileEntry, Stance

__all__ = ["Evidence", "Operation", "OpType", "ProfileEntry", "Stance"]
