"""The ``langmem`` backend: LangMem's memory store manager over a LangGraph store kept in SQLite
(``store``), behind the memlab ``Memory`` interface (``backend``). Install with ``pip install 'memlab[langmem]'``."""
