"""The ``rag`` backend: chunks of the history in a FAISS index, ranked by dense vectors (fused with BM25).

Modules: ``backend`` (config, chunking, ranking, the Memory), ``store`` (the storage interface the
backend talks to), ``local_store`` (the default store: chunks in RAM, files under the data dir),
``index`` (one user's chunks and vectors), ``lexical`` (BM25 and rank fusion), ``file_store`` (the
file format), ``pg`` (the PostgreSQL + pgvector store).
"""

from memlab_plugins.rag.backend import RagConfig, RagMemory, chunk_session

__all__ = ["RagConfig", "RagMemory", "chunk_session"]
