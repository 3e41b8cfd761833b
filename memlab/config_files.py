"""Reading settings files (JSON, or YAML when PyYAML is installed) for the CLI and the REST service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memlab.errors import DataFormatError


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
