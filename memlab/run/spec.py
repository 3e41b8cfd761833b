"""What a run is made of: the run config (as given on the command line or in a ``--config`` file),
the backend and reader specs it lists, and how configs are written to result files (secrets redacted).

A run config file holds the same settings as the command line, for example (JSON, or YAML)::

    {
      "dataset": "personamem:32k",
      "out": "runs/topk-sweep",
      "backends": [
        {"name": "rag", "label": "rag-top5", "config": {"top_k": 5}},
        {"name": "rag", "label": "rag-top20", "config": {"top_k": 20}}
      ],
      "reader": {"name": "llm", "config": {"llm": {"model": "gpt-4o-mini", "max_concurrency": 16}}},
      "replay": "once"
    }

Labels name the result rows, so one backend can appear several times with different settings (a
sweep); without a label the row is named by the backend's ``display_name``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memlab.errors import MemlabError
from memlab.results import CONTROL_BACKEND, CONTROL_READER

ReplayMode = Literal["once", "rebuild"]


class BackendSpec(BaseModel):
    """A backend to evaluate: registered name, config, and the label its result rows carry."""

    model_config = ConfigDict(extra="forbid")

    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None

    @property
    def display(self) -> str:
        """The row label: the user's, else the backend's own ``display_name`` (``mem0 (no LLM)``)."""
        return self.label or _display_name(self.name, json.dumps(self.config, sort_keys=True, default=str))


@lru_cache(maxsize=256)
def _display_name(name: str, config_json: str) -> str:
    from memlab.registry import backends

    try:
        cls = backends.get(name)
        return str(cls.display_name(cls.parse_config(json.loads(config_json))))
    except MemlabError:  # an unknown name or a bad config is reported where the run validates specs
        return name


class ReaderSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "embedding"
    config: dict[str, Any] = Field(default_factory=dict)


class JudgeSpec(BaseModel):
    """An LLM judge scoring open answers after they are made (``--judge mem0|memlab|longmemeval|personamem_v2``)."""

    model_config = ConfigDict(extra="forbid")

    prompt: Literal["mem0", "memlab", "longmemeval", "personamem_v2"] = "mem0"
    runs: int = Field(default=1, ge=1, description="independent judgments per answer (mean and std reported)")
    llm: dict[str, Any] = Field(default_factory=dict, description="judge LLM settings (default: the reader's llm)")


class RunConfig(BaseModel):
    """Everything that defines a run; saved in ``config.json`` and ``summary.json``."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = "synthetic"
    backends: list[BackendSpec] = Field(default_factory=lambda: [BackendSpec(name="rag")])
    reader: ReaderSpec = Field(default_factory=ReaderSpec)
    out: Path = Path("runs/latest")
    controls: bool = Field(default=True, description="add the none backend and the longest-option heuristic")
    contexts: list[str] | None = Field(default=None, description="only these history ids")
    max_questions: int | None = Field(default=None, ge=1, description="at most this many questions per history")
    cache_dir: Path | None = Field(default=None, description="embedding/LLM cache (default: <out>/../.memlab_cache)")
    replay: ReplayMode = Field(
        default="once",
        description="once: one replay per history; rebuild: each question sees the memory a fresh replay "
        "of exactly the turns before it builds (sessions whole as that replay sees them)",
    )
    judge: JudgeSpec | None = None
    progress: bool = True
    executor: str = "local"
    executor_options: dict[str, Any] = Field(default_factory=dict)
    plugins: list[str] = Field(
        default_factory=list,
        description="unpackaged plugin classes to register first (module:Class or path/to/file.py:Class)",
    )

    def all_jobs_specs(self) -> list[tuple[BackendSpec, ReaderSpec]]:
        """(backend, reader) pairs: the chosen ones, then the blind controls."""
        pairs = [(b, self.reader) for b in self.backends]
        if self.controls:
            if not any(b.display == CONTROL_BACKEND for b in self.backends):
                pairs.append((BackendSpec(name=CONTROL_BACKEND), self.reader))
            if self.reader.name != CONTROL_READER:
                pairs.append((BackendSpec(name=CONTROL_BACKEND), ReaderSpec(name=CONTROL_READER)))
        labels = [b.display + "|" + r.name for b, r in pairs]
        duplicates = {label for label in labels if labels.count(label) > 1}
        if duplicates:
            raise MemlabError(f"two backends share the label(s) {sorted(duplicates)}: give them distinct labels")
        return pairs

    def resolved_cache_dir(self) -> Path:
        return self.cache_dir or (Path(self.out).resolve().parent / ".memlab_cache")


# --------------------------------------------------------------------------- secrets
SECRET_KEYS = ("api_key", "apikey", "password", "passwd", "secret", "authorization", "credential", "private_key")
# Token-like keys named exactly so; a substring match would also hide max_tokens and friends.
SECRET_TOKEN_KEYS = ("token", "access_token", "auth_token", "hf_token", "bearer_token", "refresh_token")


def is_secret_key(key: Any) -> bool:
    """Whether a config key names a secret ("api-key" in headers counts like "api_key")."""
    name = str(key).lower().replace("-", "_")
    return any(s in name for s in SECRET_KEYS) or name in SECRET_TOKEN_KEYS


def redact(value: Any) -> Any:
    """Config as written to result files: secrets (API keys) replaced, everything else kept."""
    if isinstance(value, dict):
        return {k: "***" if is_secret_key(k) and v else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def config_for_files(config: RunConfig) -> dict[str, Any]:
    return redact(json.loads(config.model_dump_json()))
