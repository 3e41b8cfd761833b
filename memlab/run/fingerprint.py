"""The fingerprint of a result row: a hash of everything that determines its answers.

It covers the backend (name and fully resolved config), the reader (name, resolved config, and for
LLM readers the provider, endpoint, model and decoding parameters), the dataset (spec and a hash of
its content), the replay mode, and the versions of memlab and of the package providing each plugin.
For a plugin that is an editable install or an unpackaged ``--plugin`` file, a hash of its code
stands in for the version that does not change when the code does. Settings that change how fast answers come but not what they are (concurrency, timeouts, retries,
caches, prices, API keys) are left out, so a rerun with ``--llm.max-concurrency 16`` resumes a run
made with 4. Every prediction carries its row's fingerprint; a run resumes a row only when it matches.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from memlab.datasets import Dataset
from memlab.registry import backends, readers
from memlab.run.spec import BackendSpec, ReaderSpec, ReplayMode, redact

# Keys that never change an answer: left out of fingerprints wherever they appear.
OPERATIONAL_KEYS = frozenset(
    {
        "max_concurrency",
        "timeout",
        "max_retries",
        "initial_backoff",
        "max_backoff",
        "cache",
        "cache_dir",
        "price",
        "prices",
        "api_key",
        "progress",
    }
)


def memlab_version() -> str:
    try:
        return metadata.version("memlab")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def plugin_package(kind: str, name: str) -> str:
    """'distribution version' of the package that provides a plugin, or where an in-process one lives.

    An editable install (``pip install -e``) adds a hash of its package's files, since its code
    changes without its version. An in-process plugin (``--plugin file.py:Class``, a notebook's
    class) has no version: the file's name and a hash of it and of the local modules it imports
    (those beside it) stand in, so an edited plugin file or helper module makes a new row.
    """
    registry = backends if kind == "backend" else readers
    entry = registry.entry(name)
    if entry.distribution:
        try:
            version = metadata.version(entry.distribution)
        except metadata.PackageNotFoundError:
            return f"{entry.distribution} (version unknown)"
        edited = editable_code_hash(entry.distribution, entry.target.partition(":")[0])
        return f"{entry.distribution} {version}" + (f" (editable, {edited})" if edited else "")
    source = entry.source()
    if source is None:
        return f"in-process {entry.target}"
    return f"in-process {entry.target}, {source.describe()}"


@functools.lru_cache(maxsize=64)
def editable_code_hash(distribution: str, module: str) -> str | None:
    """``<package> sha256:<hash>`` over the source files of the top-level package ``module`` lives in,
    when ``distribution`` is an editable install (PEP 610 ``direct_url.json``); None otherwise.

    Hashed once per process: the code a process runs is the code it imported.
    """
    try:
        direct = metadata.distribution(distribution).read_text("direct_url.json")
        editable = bool(json.loads(direct or "{}").get("dir_info", {}).get("editable"))
    except (metadata.PackageNotFoundError, json.JSONDecodeError, AttributeError):
        return None
    top = module.split(".")[0]
    spec = importlib.util.find_spec(top) if editable and top else None
    if spec is None:
        return None
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] or ([Path(spec.origin)] if spec.origin else [])
    digest = hashlib.sha256()
    for root in roots:
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            if "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(root.parent)).encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return f"{top} sha256:{digest.hexdigest()[:16]}"


def plugin_code(kind: str, name: str) -> dict[str, str] | None:
    """File -> sha256 (16 hex digits) of an in-process plugin's file and the local modules it imports;
    None for a packaged plugin. In a row's settings, so a refused resume names the file that changed."""
    registry = backends if kind == "backend" else readers
    entry = registry.entry(name)
    source = None if entry.distribution else entry.source()
    return None if source is None else {file: digest[:16] for file, digest in source.hashes}


def _operational_removed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _operational_removed(v) for k, v in value.items() if k not in OPERATIONAL_KEYS}
    if isinstance(value, list):
        return [_operational_removed(v) for v in value]
    return value


def resolved_backend_config(spec: BackendSpec) -> dict[str, Any]:
    cls = backends.get(spec.name)
    return json.loads(cls.parse_config(spec.config).model_dump_json())


def resolved_reader_config(spec: ReaderSpec) -> dict[str, Any]:
    cls = readers.get(spec.name)
    return json.loads(cls.Config.model_validate(spec.config).model_dump_json())


def _llm_endpoint(config: dict[str, Any]) -> dict[str, Any] | None:
    """Provider and endpoint an LLM setting resolves to (the environment fills a missing base URL)."""
    llm = config.get("llm")
    if not isinstance(llm, dict):
        return None
    from memlab.llm.config import LLMConfig

    parsed = LLMConfig.model_validate({k: v for k, v in llm.items() if k != "api_key"})
    provider = parsed.resolved_provider()
    endpoint = parsed.base_url or (
        os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1" if provider == "openai" else None
    )
    return {"provider": provider, "base_url": endpoint}


def dataset_content_hash(dataset: Dataset) -> str:
    """SHA-256 over every history message and question, in a stable order."""
    digest = hashlib.sha256()
    for history_id in sorted(dataset.histories):
        history = dataset.histories[history_id]
        digest.update(json.dumps([history_id, history.session_starts]).encode())
        for message in history.messages:
            digest.update(message.model_dump_json().encode("utf-8"))
    for question in sorted(dataset.questions, key=lambda q: (q.context_id, q.id)):
        digest.update(question.model_dump_json().encode("utf-8"))
    return digest.hexdigest()


def row_settings(
    backend: BackendSpec,
    reader: ReaderSpec,
    *,
    reader_identity: str,
    dataset_spec: str,
    dataset_hash: str,
    replay: ReplayMode,
    answer_runs: int = 1,
) -> dict[str, Any]:
    """What a row's fingerprint covers, as a JSON-ready document (shown when resume refuses).
    ``answer_runs`` is covered only above 1, so rows of runs made before it existed keep their fingerprints."""
    reader_config = resolved_reader_config(reader)
    reader_part: dict[str, Any] = {
        "name": reader.name,
        "identity": reader_identity,
        "config": _operational_removed(redact(reader_config)),
        "package": plugin_package("reader", reader.name),
    }
    endpoint = _llm_endpoint(reader_config)
    if endpoint is not None:
        reader_part["llm_endpoint"] = endpoint
    backend_part: dict[str, Any] = {
        "name": backend.name,
        "config": _operational_removed(redact(resolved_backend_config(backend))),
        "package": plugin_package("backend", backend.name),
    }
    for part, kind, name in ((backend_part, "backend", backend.name), (reader_part, "reader", reader.name)):
        code = plugin_code(kind, name)
        if code is not None:
            part["code"] = code
    settings: dict[str, Any] = {
        "backend": backend_part,
        "reader": reader_part,
        "dataset": {"spec": dataset_spec, "content_sha256": dataset_hash},
        "replay": replay,
        "memlab": memlab_version(),
    }
    if answer_runs > 1:
        settings["answer_runs"] = answer_runs
    return settings


def fingerprint_of(settings: dict[str, Any]) -> str:
    blob = json.dumps(settings, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``path: old -> new`` for every setting that differs between two row settings documents."""
    a, b = _flatten(old), _flatten(new)
    missing = object()
    lines = []
    for key in sorted(a.keys() | b.keys()):
        before, after = a.get(key, missing), b.get(key, missing)
        if before != after:
            show = lambda v: "(not set)" if v is missing else json.dumps(v, ensure_ascii=False)  # noqa: E731
            lines.append(f"{key}: {show(before)} -> {show(after)}")
    return lines
