"""The ``rag`` backend: chunks of the history in a FAISS index, ranked by dense vectors (fused with BM25).

Modules: ``backend`` (config, chunking, the Memory), ``index`` (one user's chunks and vectors),
``lexical`` (BM25 and rank fusion), ``file_store`` (the files under the data dir), ``pg`` (the
PostgreSQL + pgvector store).
"""

from memlab_plugins.rag.backend import RagConfig, RagMemory, chunk_session

__all__ = ["RagConfig", "RagMemory", "chunk_session"]
