"""Errors memlab raises on purpose, each saying what went wrong and what to do about it."""

from __future__ import annotations


class MemlabError(Exception):
    """Base class of every error memlab raises on purpose."""


class UnknownNameError(MemlabError, KeyError):
    """A backend, reader or dataset name that is not registered."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateNameError(MemlabError):
    """Two plugins registered under one name."""


class PluginValidationError(MemlabError):
    """A plugin that cannot be used as registered: its import fails, or it does not satisfy the interface
    (a missing hook or name, an entry-point name other than the class's, more than ``k`` items retrieved)."""


class MissingDependencyError(MemlabError, ImportError):
    """An optional dependency is not installed; the message carries the install hint."""

    def __init__(self, package: str, hint: str) -> None:
        super().__init__(f"{package} is not installed: {hint}")
        self.package = package
        self.hint = hint


class ConfigurationError(MemlabError):
    """A setup that can never work as configured (bad key, unknown model): stop, do not retry."""


class UnsupportedCapabilityError(MemlabError, NotImplementedError):
    """The backend does not declare the capability the caller asked for."""


class ModelUnavailableError(MemlabError):
    """Model weights could not be loaded (typically: offline and not on disk)."""


class DatasetUnavailableError(MemlabError):
    """A dataset could not be found locally or downloaded."""


class DataFormatError(MemlabError, ValueError):
    """Input data that cannot be used at all (a file, not a row, is broken)."""


class NotFoundError(MemlabError, KeyError):
    """An item id (or user) that the backend does not hold for this user: unknown or someone else's.

    Every backend raises this for such ids, so the client and the REST service answer 404 alike.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DirectoryInUseError(MemlabError):
    """A data or run directory is held by another live process (one writer per directory)."""


class ConflictError(MemlabError):
    """The request conflicts with an earlier one: an idempotency key reused for a different write,
    or one whose first use is still in progress (the service answers 409)."""


class WriteInProgressError(ConflictError):
    """The first request with this idempotency key is still being processed: retry shortly."""


class ReadOnlyItemError(MemlabError):
    """An item that exists but cannot be changed this way (e.g. a raw turn: delete it, do not edit it).

    The message says what can be changed instead; the service answers 409.
    """


class ShuttingDownError(MemlabError):
    """The process is stopping: the call was not carried out (nothing of it was stored); retry later."""


class RunInterrupted(MemlabError):
    """Ctrl-C or SIGTERM: the run stopped cleanly; what was answered is saved. (Here, not in the run
    driver, so the command line catches it without importing the run machinery for every command.)"""

    def __init__(self, saved: int, signal_name: str) -> None:
        super().__init__(f"interrupted: {saved} answers saved; rerun the same command to resume")
        self.saved = saved
        self.signal_name = signal_name
