"""Errors raised by LLM providers, split by what the caller should do about them."""

from __future__ import annotations

from memlab.errors import ConfigurationError, MemlabError


class LLMError(MemlabError):
    """A request to an LLM failed. Readers record it as the question's error."""


class TransientLLMError(LLMError):
    """Worth retrying: rate limit, timeout, dropped connection, server error, malformed body.

    ``retry_after`` is the server's hint in seconds (``Retry-After``), if it sent one.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMRequestFailed(LLMError):
    """A transient error that did not go away after every retry."""


class ContextWindowExceeded(LLMError):
    """The request needs more tokens than the model's window: it fails alike on every retry."""


class LLMConfigError(LLMError, ConfigurationError):
    """The request can never succeed as configured (bad key, unknown model, missing package).

    Readers let this propagate: recording it once per question would hide a broken setup.
    """
