"""The memlab REST service: a FastAPI app over one ``MemoryClient``, run with ``memlab serve``.

Imports are lazy so ``memlab serve`` can name the missing extra (``pip install 'memlab[serve]'``)
instead of failing on import when FastAPI or uvicorn is absent.
"""

from typing import Any

__all__ = ["create_app", "ServerSettings", "ApiKey"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from memlab.server.app import create_app

        return create_app
    if name in ("ServerSettings", "ApiKey"):
        from memlab.server import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'memlab.server' has no attribute {name!r}")
