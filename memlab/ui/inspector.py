"""The memory inspector: a static page on the REST service (``memlab serve --ui``, ``MEMLAB_SERVE_UI=1``).

``/ui/`` is one HTML page and its CSS/JS; it holds no data and needs no key. Everything it shows it
fetches from the documented ``/v1`` API with the key the user types, kept in the tab's
``sessionStorage`` and sent as ``Authorization: Bearer``; no cookie is ever set, so other sites cannot
make the browser act with it (no CSRF surface). The page's Content-Security-Policy allows scripts,
styles and requests to this origin only.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import RedirectResponse, Response

STATIC_DIR = Path(__file__).parent / "static"
PAGE = "inspector.html"
ASSETS = {"ui.css": "text/css; charset=utf-8", "inspector.js": "text/javascript; charset=utf-8"}
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def mount_inspector(app: FastAPI) -> None:
    """Serve the inspector at ``/ui/`` (its assets at ``/ui/static/``); left out of the OpenAPI document."""

    @app.get("/ui", include_in_schema=False)
    async def inspector_redirect() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=308)

    @app.get("/ui/", include_in_schema=False)
    async def inspector_page() -> Response:
        body = (STATIC_DIR / PAGE).read_bytes()
        return Response(body, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    @app.get("/ui/static/{name}", include_in_schema=False)
    async def inspector_asset(name: str) -> Response:
        if name not in ASSETS:
            raise HTTPException(404, f"no asset {name!r}")
        return Response((STATIC_DIR / name).read_bytes(), media_type=ASSETS[name], headers=PAGE_HEADERS)


__all__ = ["mount_inspector"]
