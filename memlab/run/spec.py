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
      "replay": "once",
      "device": "cuda"
    }

Labels name the result rows, so one backend can appear several times with different settings (a
sweep); without a label the row is named by the backend's ``display_name``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlab.devices import check_device
from memlab.errors import MemlabError
from memlab.results import CONTROL_BACKEND, CONTROL_READER

ReplayMode = Literal["once", "rebuild"]


class BackendSpec(BaseModel):
    """A backend to evaluate: registered name, config, and the label its result rows carry; optionally
    a reader (and reader config, LLM) of its own, so one run holds rows read by different protocols."""

    model_config = ConfigDict(extra="forbid")

    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None
    reader: str | None = Field(default=None, description="this row's reader (default: the run's)")
    reader_config: dict[str, Any] | None = Field(
        default=None, description="this row's reader config (default: the run's when the reader is the run's)"
    )
    llm: dict[str, Any] | None = Field(
        default=None, description="this row's LLM settings, over the run's --llm.* (LLM readers only)"
    )

    @property
    def has_own_reader(self) -> bool:
        return self.reader is not None or self.reader_config is not None or self.llm is not None

    def without_reader(self) -> BackendSpec:
        """The backend part alone (what a job's memory is built from)."""
        return BackendSpec(name=self.name, config=self.config, label=self.label)

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

    @property
    def key(self) -> str:
        return json.dumps([self.name, self.config], sort_keys=True, default=str)


def reader_uses_memory(name: str) -> bool:
    """Whether reader ``name`` is ever shown a retrieval (False for the blind controls)."""
    from memlab.registry import readers

    return bool(readers.get(name).uses_memory)


def reader_fields(name: str) -> set[str]:
    """The config keys of reader ``name`` (unknown names: none; the name is refused where specs are checked)."""
    from memlab.registry import readers

    try:
        return set(readers.get(name).Config.model_fields)
    except MemlabError:
        return set()


def reader_takes_llm(name: str) -> bool:
    """Whether reader ``name``'s config has an ``llm`` block."""
    return "llm" in reader_fields(name)


def reader_with(name: str, config: dict[str, Any], llm: dict[str, Any] | None = None) -> ReaderSpec:
    """Reader ``name`` with ``config``; the shared LLM settings (``llm`` block, ``--llm.*``) go only to
    readers that take an LLM, so ``--readers embedding,personamem --llm.model m`` works."""
    config = dict(config)
    shared = config.pop("llm", None)
    if reader_takes_llm(name):
        merged = {**(shared or {}), **(llm or {})}
        if merged:
            config["llm"] = merged
    elif llm:
        raise MemlabError(f"reader {name!r} takes no LLM, but its row sets llm {sorted(llm)}")
    return ReaderSpec(name=name, config=config)


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
    readers: list[str] | None = Field(
        default=None,
        description="run every backend (without a reader of its own) with each of these readers; "
        "each gets the run reader's config (its llm block only if it takes an LLM)",
    )
    contexts: list[str] | None = Field(default=None, description="only these history ids")
    max_questions: int | None = Field(default=None, ge=1, description="at most this many questions per history")
    sample: Literal["first", "stratified"] = Field(
        default="first",
        description="which max_questions: the first N of each history, or N keeping every question type "
        "in proportion (seeded)",
    )
    seed: int = Field(default=0, description="seed of stratified sampling")
    answer_runs: int = Field(
        default=1, ge=1, description="answer each multiple-choice question this many times (accuracy mean and std)"
    )
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
    device: str | None = Field(
        default=None,
        description="where every model of the run goes unless its plugin names a device (--rag.device, "
        "--reader.device, --llm.device win): cpu, cuda, cuda:N, mps or auto (None: cpu; local LLMs: auto)",
    )

    @field_validator("device")
    @classmethod
    def _device_spelling(cls, value: str | None) -> str | None:
        return None if value is None else check_device(value)

    def run_readers(self) -> list[ReaderSpec]:
        """The readers of rows without a reader of their own: ``readers`` (each with the run reader's
        config), else the run reader."""
        if not self.readers:
            return [reader_with(self.reader.name, self.reader.config)]
        # The shared settings (--reader.*) go to each reader that has them; a key no reader has is an error.
        fields = {name: reader_fields(name) for name in self.readers}
        unknown = sorted(k for k in self.reader.config if k != "llm" and not any(k in f for f in fields.values()))
        if unknown:
            raise MemlabError(f"reader option(s) {unknown} belong to none of the readers {self.readers}")
        return [
            reader_with(name, {k: v for k, v in self.reader.config.items() if k == "llm" or k in fields[name]})
            for name in self.readers
        ]

    def reader_for(self, backend: BackendSpec) -> ReaderSpec:
        """A backend row's own reader: its reader (the run's config when it is the run reader's name),
        its reader_config, and its llm over the run's LLM settings."""
        name = backend.reader or self.reader.name
        if backend.reader_config is not None:
            config = {**backend.reader_config}
            shared_llm = self.reader.config.get("llm")
            if shared_llm is not None and "llm" not in config:
                config["llm"] = shared_llm
        elif name == self.reader.name:
            config = dict(self.reader.config)
        else:
            config = {k: v for k, v in self.reader.config.items() if k == "llm"}
        return reader_with(name, config, backend.llm)

    def all_jobs_specs(self) -> list[tuple[BackendSpec, ReaderSpec]]:
        """(backend, reader) pairs: the chosen ones (each backend with its own reader, or with every
        run reader), then the blind controls (the ``none`` backend with each reader, and the
        longest-option reader once)."""
        pairs: list[tuple[BackendSpec, ReaderSpec]] = []
        blind: list[ReaderSpec] = []
        # A run reader that never looks at memory (--readers ...,longest_option) would answer every
        # backend's row alike: with several backends it gets one row, on the none backend, instead of
        # one copy per backend; with one backend it stays on it (the run still exercises that backend).
        several = sum(not backend.has_own_reader for backend in self.backends) > 1
        for backend in self.backends:
            if backend.has_own_reader:
                pairs.append((backend.without_reader(), self.reader_for(backend)))
                continue
            for reader in self.run_readers():
                if not several or reader_uses_memory(reader.name):
                    pairs.append((backend, reader))
                elif reader.key not in {r.key for r in blind}:
                    blind.append(reader)
        pairs += [(BackendSpec(name=CONTROL_BACKEND), reader) for reader in blind]
        if self.controls:
            used = list({r.key: r for _, r in pairs}.values())
            present = {(b.display, r.key) for b, r in pairs}
            for reader in used:
                if (CONTROL_BACKEND, reader.key) not in present:
                    pairs.append((BackendSpec(name=CONTROL_BACKEND), reader))
            if not any(r.name == CONTROL_READER for r in used):
                pairs.append((BackendSpec(name=CONTROL_BACKEND), ReaderSpec(name=CONTROL_READER)))
        if "llm" in self.reader.config and self.judge is None and not any(reader_takes_llm(r.name) for _, r in pairs):
            raise MemlabError(
                f"LLM settings (--llm.*) were given, but no reader of the run takes an LLM "
                f"({', '.join(sorted({r.name for _, r in pairs}))})"
            )
        labels = [b.display + "|" + r.key for b, r in pairs]
        duplicates = sorted({label.partition("|")[0] for label in labels if labels.count(label) > 1})
        if duplicates:
            raise MemlabError(f"two backends share the label(s) {duplicates}: give them distinct labels")
        return pairs

    def all_readers(self) -> list[ReaderSpec]:
        """Every distinct reader of the run's rows."""
        return list({r.key: r for _, r in self.all_jobs_specs()}.values())

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
