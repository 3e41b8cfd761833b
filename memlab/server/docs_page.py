"""``GET /docs``: the API reference as one self-contained HTML page, rendered here from the OpenAPI
document. FastAPI's own page loads Swagger UI's scripts from a CDN and stays blank offline or
behind a strict firewall; this page needs nothing but the service (no script, no external link).
``/openapi.json`` stays available for tools (Swagger UI, Redoc, client generators).
"""

from __future__ import annotations

import html
import json
from typing import Any

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2rem}
.op{border:1px solid #ddd;border-radius:6px;margin:1rem 0;padding:.6rem 1rem}
.m{display:inline-block;min-width:4.5rem;font-weight:bold}
.GET{color:#0a6}.POST{color:#06c}.PATCH{color:#b70}.DELETE{color:#c22}
code,pre{background:#f5f5f5;border-radius:4px;padding:.1rem .3rem}pre{padding:.5rem;overflow:auto}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
"""


def _schema_text(schema: dict[str, Any], components: dict[str, Any], depth: int = 0) -> Any:
    """The schema with ``$ref``s resolved (two levels deep), for reading."""
    if depth > 2:
        return schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _schema_text(components.get(name, {}), components, depth + 1)
    return {
        key: (
            _schema_text(value, components, depth + 1)
            if isinstance(value, dict)
            else [_schema_text(v, components, depth + 1) if isinstance(v, dict) else v for v in value]
            if isinstance(value, list)
            else value
        )
        for key, value in schema.items()
    }


def _operation(method: str, path: str, op: dict[str, Any], components: dict[str, Any]) -> str:
    parts = [
        f'<div class="op"><div><span class="m {method}">{method}</span> <code>{html.escape(path)}</code></div>',
        f"<p><b>{html.escape(op.get('summary', ''))}</b></p>",
    ]
    if op.get("description"):
        parts.append(f"<p>{html.escape(op['description'])}</p>")
    params = op.get("parameters") or []
    if params:
        rows = "".join(
            f"<tr><td><code>{html.escape(p['name'])}</code></td><td>{html.escape(p.get('in', ''))}</td>"
            f"<td>{html.escape(p.get('description', '') or p.get('schema', {}).get('description', ''))}</td></tr>"
            for p in params
        )
        parts.append(f"<table><tr><th>parameter</th><th>in</th><th>meaning</th></tr>{rows}</table>")
    body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        shown = json.dumps(_schema_text(body, components), indent=2)
        parts.append(f"<p>JSON body:</p><pre>{html.escape(shown)}</pre>")
    responses = ", ".join(
        f"{html.escape(code)} {html.escape(r.get('description', ''))}"
        for code, r in (op.get("responses") or {}).items()
    )
    parts.append(f"<p>Responses: {responses}</p></div>")
    return "".join(parts)


def render_docs(spec: dict[str, Any]) -> str:
    info = spec.get("info", {})
    components = spec.get("components", {}).get("schemas", {})
    by_tag: dict[str, list[str]] = {}
    for path, methods in spec.get("paths", {}).items():
        for method, op in methods.items():
            tag = (op.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append(_operation(method.upper(), path, op, components))
    sections = "".join(f"<h2>{html.escape(tag)}</h2>{''.join(ops)}" for tag, ops in by_tag.items())
    title = html.escape(f"{info.get('title', 'API')} (version {info.get('version', '?')})")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{title}</h1><p>{html.escape(info.get('description', ''))}</p>"
        f"<p>Machine-readable: <a href='openapi.json'>openapi.json</a>.</p>{sections}</body></html>"
    )


def docs_html(app: Any) -> str:
    return render_docs(app.openapi())
