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


def refused_request(exc: BaseException) -> LLMError | None:
    """The memlab LLM error behind ``exc`` (it may be wrapped, e.g. by mem0) when only this request failed.

    A request the endpoint refused (a prompt over the model's window, a 4xx) fails alike on every
    retry and says nothing about the next one: a caller may skip it and count it. A bad setup
    (``LLMConfigError``), an endpoint still failing after its retries (``LLMRequestFailed``) or an
    error that is not memlab's (a caller's own LangChain model) would fail every request: None, so
    the caller raises and a run stops (and resumes later) instead of building an empty memory.
    """
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, LLMError):
        cause = cause.__cause__
    if cause is None or isinstance(cause, (LLMConfigError, LLMRequestFailed)):
        return None
    return cause
