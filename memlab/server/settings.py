"""Settings of the REST service, from a config file, the command line and the environment.

API keys: ``--api-key`` options, ``api_keys`` in the config file, ``MEMLAB_API_KEYS`` in the
environment (comma-separated) and the key file (``--api-keys-file`` / ``MEMLAB_API_KEYS_FILE``, one
entry a line, ``#`` comments) are merged. Each entry is ``KEY`` (may act for every user) or
``KEY:user1|user2`` (may act only for those users). Keys are at least 16 characters from
``A-Za-z0-9_-`` (what ``secrets.token_urlsafe`` produces). Without any key the service runs
unauthenticated, which is allowed only on a loopback address.

Every field of ``ServerSettings`` can also be set with an environment variable named
``MEMLAB_SERVE_<FIELD>`` (``MEMLAB_SERVE_BACKEND``, ``MEMLAB_SERVE_DATA_DIR``,
``MEMLAB_SERVE_MAX_CONNECTIONS``, ``MEMLAB_SERVE_RATE_LIMIT``, ...; ``backend_config`` as JSON,
booleans as true/false/1/0). Precedence, highest first: command-line flags, ``MEMLAB_SERVE_*``
variables, the ``--config`` file, the older variables (``MEMLAB_USER_CACHE_SIZE``,
``MEMLAB_COMPUTE_THREADS``, ``MEMLAB_STORE``), the defaults. API keys from every source are merged.
An unknown ``MEMLAB_SERVE_*`` name is an error (a typo would otherwise be ignored silently).

Key configuration fails closed: an entry with an empty user list (``KEY:``) and a key listed more
than once (in one place or in two, with the same or different users) are errors, reported with
the key's first characters only. The key file is re-read when it changes (and on SIGHUP), so keys
can be rotated without a restart; a key file that became invalid is refused and the keys in force
stay as they were.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memlab.config_files import read_config_file
from memlab.errors import ConfigurationError
from memlab.memory import validate_user_id

API_KEYS_ENV = "MEMLAB_API_KEYS"
API_KEYS_FILE_ENV = "MEMLAB_API_KEYS_FILE"
USER_CACHE_SIZE_ENV = "MEMLAB_USER_CACHE_SIZE"
COMPUTE_THREADS_ENV = "MEMLAB_COMPUTE_THREADS"
_KEY = re.compile(r"^[A-Za-z0-9_\-]{16,256}$")


class ApiKey(BaseModel):
    """One API key and the users it may act for (empty: every user)."""

    # A rejected key is often a real key mistyped: keep it out of error messages and logs.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    key: str = Field(repr=False)
    users: tuple[str, ...] = ()

    @field_validator("key")
    @classmethod
    def _strong(cls, value: str) -> str:
        if not _KEY.match(value):
            raise ValueError(
                "an API key must be 16-256 characters from A-Z a-z 0-9 _ - (e.g. secrets.token_urlsafe(32))"
            )
        return value

    @field_validator("users")
    @classmethod
    def _users(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for user in value:
            validate_user_id(user)
        return value

    @classmethod
    def parse(cls, entry: str) -> ApiKey:
        key, sep, users = entry.strip().partition(":")
        bound = tuple(u.strip() for u in users.split("|") if u.strip()) if sep else ()
        if sep and not bound:
            # "KEY:" reads as "bound to nobody" but would allow everybody: refuse the ambiguity.
            raise ValueError(
                f"API key {redact(key)} has an empty user list after ':'; list its users "
                "(KEY:alice|bob) or drop the ':' to allow every user"
            )
        return cls(key=key, users=bound)

    @property
    def label(self) -> str:
        return redact(self.key)

    def allows(self, user_id: str) -> bool:
        return not self.users or user_id in self.users


class ServerSettings(BaseModel):
    """Everything ``memlab serve`` needs; also the format of its ``--config`` file (JSON or YAML)."""

    # Errors of nested ApiKeys are rendered with this config: hide inputs so no key reaches stderr.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    backend: str = Field(default="full_context", description="registered backend name")
    backend_config: dict[str, Any] = Field(default_factory=dict, description="the backend's own config")
    data_dir: Path | None = Field(default=None, description="where the backend keeps its state")
    allow_ephemeral: bool = Field(
        default=False, description="serve a backend whose data does not survive a restart (refused by default)"
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    api_keys: list[ApiKey] = Field(default_factory=list)
    api_keys_file: Path | None = Field(
        default=None, description="file of key entries (one a line); re-read on change and on SIGHUP"
    )
    user_cache_size: int = Field(
        default=1024, ge=1, description=f"users whose state is kept in RAM (LRU); env {USER_CACHE_SIZE_ENV}"
    )
    forget_undo_hours: float = Field(
        default=24.0,
        ge=0,
        description="hours a memory removed by a forget request stays restorable before it is deleted for good "
        "(0 = at once)",
    )
    compute_threads: int = Field(
        default=1,
        ge=1,
        description="threads one request's model and vector work may use (torch/OpenMP intra-op); 1 lets "
        f"concurrent requests share the cores instead of fighting over them; env {COMPUTE_THREADS_ENV}",
    )
    batch_queries: bool = Field(
        default=True, description="concurrent searches share one query-embedding call (rag, profile)"
    )
    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="larger request bodies get 413")
    max_messages: int = Field(default=500, ge=1, description="messages per add request")
    max_message_chars: int = Field(default=32_000, ge=1)
    max_query_chars: int = Field(default=8_000, ge=1)
    max_k: int = Field(default=100, ge=1)
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    # Operations (issue 25): connection and request limits, logs, workers.
    max_connections: int = Field(
        default=512,
        ge=1,
        description="open connections at most; over it, the connection idle longest without a request is closed",
    )
    request_timeout: float = Field(
        default=30.0, gt=0, description="seconds a request's headers and body may take to arrive (else 408)"
    )
    keep_alive_timeout: float = Field(default=5.0, gt=0, description="seconds an idle keep-alive connection stays open")
    graceful_timeout: float = Field(
        default=10.0, gt=0, description="on SIGTERM: seconds requests in flight get to finish before they are cut"
    )
    rate_limit: str | None = Field(
        default=None,
        description="requests per second per API key and per client address, e.g. '20/s' (429 + Retry-After over it)",
    )
    log_format: Literal["json", "text"] = "text"
    log_user_ids: bool = Field(
        default=False, description="put the user id in access log lines (off: ids may be e-mails)"
    )
    workers: int = Field(default=1, ge=1, description="worker processes (more than 1 needs a database store)")
    ui: bool = Field(
        default=False,
        description="serve the memory inspector page at /ui/ (it calls the /v1 API with the key the user enters)",
    )

    @field_validator("rate_limit")
    @classmethod
    def _rate(cls, value: str | None) -> str | None:
        from memlab.server.limits import parse_rate

        return None if parse_rate(value) is None else value

    @property
    def rate_per_second(self) -> float | None:
        from memlab.server.limits import parse_rate

        return parse_rate(self.rate_limit)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _keys(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [ApiKey.parse(v) if isinstance(v, str) else v for v in value]
        return value

    @property
    def auth_enabled(self) -> bool:
        # A key file turns auth on even while it is empty: an emptied file locks out, never opens up.
        return bool(self.api_keys) or self.api_keys_file is not None

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def with_env_keys(self, environ: dict[str, str] | None = None) -> ServerSettings:
        """Add the keys listed in ``MEMLAB_API_KEYS`` (and the key file / cache size named in the environment)."""
        env = environ if environ is not None else os.environ
        raw = env.get(API_KEYS_ENV, "")
        update: dict[str, Any] = {}
        extra = [entry for entry in raw.split(",") if entry.strip()]
        if extra:
            update["api_keys"] = [*self.api_keys, *extra]
        if self.api_keys_file is None and env.get(API_KEYS_FILE_ENV):
            update["api_keys_file"] = env[API_KEYS_FILE_ENV]
        for name, variable in (("user_cache_size", USER_CACHE_SIZE_ENV), ("compute_threads", COMPUTE_THREADS_ENV)):
            if name not in self.model_fields_set and env.get(variable):
                update[name] = env[variable]
        if not update:
            return self
        data = {**self.model_dump(exclude_unset=True), **update}
        data["api_keys"] = update.get("api_keys", self.api_keys)
        return ServerSettings.model_validate(data)

    def all_keys(self) -> list[ApiKey]:
        """The configured keys plus the key file's, checked (``ConfigurationError`` when not usable)."""
        keys = list(self.api_keys)
        if self.api_keys_file is not None:
            keys += read_key_file(self.api_keys_file)
        check_keys(keys)
        return keys

    def check_startable(self) -> None:
        """Refuse configurations that would expose memories: no keys on a non-loopback address,
        unusable key lists, an empty key file."""
        keys = self.all_keys()
        if self.api_keys_file is not None and not keys:
            raise ConfigurationError(f"{self.api_keys_file}: the API key file lists no keys")
        if not self.auth_enabled and not self.loopback:
            raise ValueError(
                f"refusing to serve on {self.host!r} without an API key: anyone who can reach it could read "
                f"every user's memories. Set {API_KEYS_ENV}, pass --api-key, or bind to 127.0.0.1."
            )


SERVE_ENV_PREFIX = "MEMLAB_SERVE_"
# Variables with this prefix that are not settings (set by memlab itself for its worker processes).
_NOT_SETTINGS = frozenset({"MEMLAB_SERVE_SETTINGS"})


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings given as ``MEMLAB_SERVE_<FIELD>`` variables (raw strings, validated by
    ``ServerSettings``; ``backend_config`` and ``api_keys`` parsed here)."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    fields = ServerSettings.model_fields
    for variable, raw in env.items():
        if not variable.startswith(SERVE_ENV_PREFIX) or variable in _NOT_SETTINGS:
            continue
        name = variable[len(SERVE_ENV_PREFIX) :].lower()
        if name not in fields:
            known = ", ".join(SERVE_ENV_PREFIX + f.upper() for f in fields)
            raise ConfigurationError(f"{variable}: not a memlab serve setting (known: {known})")
        if name == "backend_config":
            try:
                data[name] = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigurationError(f"{variable}: not JSON ({exc.msg})") from None
        elif name == "api_keys":
            data[name] = [entry for entry in raw.split(",") if entry.strip()]
        else:
            data[name] = raw
    return data


def redact(key: str) -> str:
    """How a key appears in messages and logs: its first 4 characters, never more."""
    return f"'{key[:4]}...'" if len(key) > 8 else "'...'"


def check_keys(keys: list[ApiKey]) -> None:
    """Refuse a key listed more than once: which binding wins would be an accident of order."""
    seen: dict[str, ApiKey] = {}
    for key in keys:
        before = seen.get(key.key)
        if before is None:
            seen[key.key] = key
            continue
        if before.users != key.users:
            raise ConfigurationError(
                f"API key {key.label} is bound in two places with different users "
                f"({_users(before)} and {_users(key)}); keep one entry per key"
            )
        raise ConfigurationError(f"API key {key.label} is listed twice; keep one entry per key")


def _users(key: ApiKey) -> str:
    return "|".join(key.users) if key.users else "every user"


def read_key_file(path: str | Path) -> list[ApiKey]:
    """Key entries from a file, one a line (``KEY`` or ``KEY:user1|user2``; ``#`` starts a comment)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the API key file {path}: {exc.__class__.__name__}") from None
    keys = []
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        try:
            keys.append(ApiKey.parse(entry))
        except ValueError as exc:  # pydantic's ValidationError too; inputs are hidden
            reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise ConfigurationError(f"{path}: line {number}: {reason}") from None
    return keys


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_settings_file(path: str | Path) -> dict[str, Any]:
    """Read a JSON or YAML settings file into a dict (validated by ``ServerSettings``). Problems are
    ``DataFormatError``s (a ``ValueError``), which ``memlab serve`` reports without a traceback."""
    return read_config_file(path, "settings file")
