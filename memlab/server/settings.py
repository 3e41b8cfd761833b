"""Settings of the REST service, from a config file, the command line and the environment.

API keys: ``--api-key`` options, ``api_keys`` in the config file, and ``MEMLAB_API_KEYS`` in the
environment (comma-separated) are merged. Each entry is ``KEY`` (may act for every user) or
``KEY:user1|user2`` (may act only for those users). Keys are at least 16 characters from
``A-Za-z0-9_-`` (what ``secrets.token_urlsafe`` produces). Without any key the service runs
unauthenticated, which is allowed only on a loopback address.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlab.config_files import read_config_file
from memlab.memory import validate_user_id

API_KEYS_ENV = "MEMLAB_API_KEYS"
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
            raise ValueError("an API key must be 16-256 characters from A-Z a-z 0-9 _ - (e.g. secrets.token_urlsafe(32))")
        return value

    @field_validator("users")
    @classmethod
    def _users(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for user in value:
            validate_user_id(user)
        return value

    @classmethod
    def parse(cls, entry: str) -> "ApiKey":
        key, sep, users = entry.strip().partition(":")
        return cls(key=key, users=tuple(u for u in users.split("|") if u) if sep else ())

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
    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="larger request bodies get 413")
    max_messages: int = Field(default=500, ge=1, description="messages per add request")
    max_message_chars: int = Field(default=32_000, ge=1)
    max_query_chars: int = Field(default=8_000, ge=1)
    max_k: int = Field(default=100, ge=1)
    log_level: str = "info"

    @field_validator("api_keys", mode="before")
    @classmethod
    def _keys(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [ApiKey.parse(v) if isinstance(v, str) else v for v in value]
        return value

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_keys)

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def with_env_keys(self, environ: dict[str, str] | None = None) -> "ServerSettings":
        """Add the keys listed in ``MEMLAB_API_KEYS``."""
        raw = (environ if environ is not None else os.environ).get(API_KEYS_ENV, "")
        extra = [ApiKey.parse(entry) for entry in raw.split(",") if entry.strip()]
        return self.model_copy(update={"api_keys": [*self.api_keys, *extra]}) if extra else self

    def check_startable(self) -> None:
        """Refuse configurations that would expose memories: no keys on a non-loopback address."""
        if not self.auth_enabled and not self.loopback:
            raise ValueError(
                f"refusing to serve on {self.host!r} without an API key: anyone who can reach it could read "
                f"every user's memories. Set {API_KEYS_ENV}, pass --api-key, or bind to 127.0.0.1."
            )


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
