"""Settings from files and from the command line: one reader for settings files (JSON, or YAML when
PyYAML is installed) and one parser for dotted plugin options, shared by the CLI and the service.

Dotted options: ``--rag.top-k 5`` sets ``top_k`` in the settings section ``rag``;
``--rag.index.ef-search 64`` nests (``{"rag": {"index": {"ef_search": 64}}}``); ``--llm.base-url=URL``
is the same as ``--llm.base-url URL``. A value is parsed as JSON when it parses (``5``, ``0.5``,
``true``, ``null``, ``["user"]``, ``{"a": 1}``), else kept as the string given. Every option needs a
value: ``--rag.top-k`` followed by another option (or by nothing) is an error, never ``true``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memlab.errors import DataFormatError, MemlabError


class OptionError(MemlabError, ValueError):
    """A command-line option that cannot be used as written."""


def read_config_file(path: str | Path, what: str = "config") -> dict[str, Any]:
    """The mapping in ``path``; every problem is a ``DataFormatError`` naming the file, never a traceback.
    ``what`` names the file in messages ("run config", "settings file")."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"{path}: cannot read the {what}: {exc}") from exc
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - PyYAML ships with transformers
            raise DataFormatError(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or use JSON") from exc
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise DataFormatError(f"{path}: not valid YAML: {exc}") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise DataFormatError(f"{path}: a {what} is a mapping of settings, got {type(data).__name__}")
    return data


def parse_option_value(raw: str) -> Any:
    """JSON when it parses (numbers, booleans, null, lists, objects), else the string itself."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_dotted_options(tokens: list[str]) -> dict[str, dict[str, Any]]:
    """``['--rag.top-k', '5', '--llm.base-url=http://x']`` -> ``{'rag': {'top_k': 5}, 'llm': {...}}``.

    Raises ``OptionError`` for a token that is not a dotted option and for an option without a value.
    """
    out: dict[str, dict[str, Any]] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or "." not in token.partition("=")[0]:
            raise OptionError(f"unrecognised argument {token!r} (plugin options look like --NAME.KEY VALUE)")
        key, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                raise OptionError(f"option {token} needs a value (e.g. {token} 5, or {token}=true for a switch)")
            i += 1
            value = tokens[i]
        section, _, field = key.partition(".")
        if not section or not field:
            raise OptionError(f"bad plugin option {token!r}: expected --NAME.KEY VALUE")
        target = out.setdefault(section, {})
        parts = field.replace("-", "_").split(".")
        for part in parts[:-1]:  # --rag.index.ef-search 64 -> {"index": {"ef_search": 64}}
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                raise OptionError(f"option {token}: --{section}.{part} was already given a value")
            target = nested
        target[parts[-1]] = parse_option_value(value)
        i += 1
    return out
