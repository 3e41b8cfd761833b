"""Plugin discovery with fake entry points: lazy loading, duplicates, near matches, availability."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint

import pytest

from memlab.errors import DuplicateNameError, MissingDependencyError, PluginValidationError, UnknownNameError
from memlab.memory import BackendConfig, Memory
from memlab.registry import BACKENDS_GROUP, Registry, backends, readers, validate_backend
from memlab.types import Retrieval


class GoodMemory(Memory):
    name = "good"
    description = "a fake backend"

    def _ingest(self, session, *, user_id, first_turn):  # type: ignore[no-untyped-def]
        pass

    def _retrieve(self, query, *, user_id, k):  # type: ignore[no-untyped-def]
        return Retrieval()

    def _reset(self, user_id):  # type: ignore[no-untyped-def]
        pass


class LooseConfig(BackendConfig):
    model_config = {"extra": "allow"}


class LooseMemory(GoodMemory):
    Config = LooseConfig  # type: ignore[assignment]


class Incomplete(Memory):
    name = "incomplete"
    description = "forgot _retrieve"

    def _ingest(self, session, *, user_id, first_turn):  # type: ignore[no-untyped-def]
        pass

    def _reset(self, user_id):  # type: ignore[no-untyped-def]
        pass


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch) -> str:
    module = types.ModuleType("fake_memlab_plugin")
    module.GoodMemory = GoodMemory  # type: ignore[attr-defined]
    module.LooseMemory = LooseMemory  # type: ignore[attr-defined]
    module.Incomplete = Incomplete  # type: ignore[attr-defined]
    module.NotAMemory = dict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_memlab_plugin", module)
    return "fake_memlab_plugin"


def ep(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=BACKENDS_GROUP)


def registry(*eps: EntryPoint) -> Registry:
    return Registry(BACKENDS_GROUP, validate_backend, eps=list(eps))


def test_lazy_load_and_create(fake_module: str) -> None:
    reg = registry(ep("good", f"{fake_module}:GoodMemory"), ep("broken", "not_installed_pkg.mod:Cls"))
    assert reg.names() == ["broken", "good"]  # listing imports nothing
    assert reg.get("good") is GoodMemory


def test_duplicate_names_rejected(fake_module: str) -> None:
    reg = registry(ep("good", f"{fake_module}:GoodMemory"), ep("good", f"{fake_module}:LooseMemory"))
    with pytest.raises(DuplicateNameError, match="registered twice"):
        reg.names()


def test_same_entry_seen_twice_is_not_a_duplicate(fake_module: str) -> None:
    reg = registry(ep("good", f"{fake_module}:GoodMemory"), ep("good", f"{fake_module}:GoodMemory"))
    assert reg.names() == ["good"]


def test_unknown_name_suggests_near_matches(fake_module: str) -> None:
    reg = registry(ep("full_context", f"{fake_module}:GoodMemory"), ep("rag", f"{fake_module}:GoodMemory"))
    with pytest.raises(UnknownNameError, match="Did you mean 'full_context'"):
        reg.get("full_contxt")


def test_missing_dependency_is_listed_as_unavailable(fake_module: str) -> None:
    reg = registry(ep("good", f"{fake_module}:GoodMemory"), ep("needs_pkg", "not_installed_pkg.mod:Cls"))
    with pytest.raises(MissingDependencyError, match="pip install not_installed_pkg"):
        reg.get("needs_pkg")
    info = {row.name: row for row in reg.info()}
    assert info["good"].available and info["good"].description == "a fake backend"
    assert not info["needs_pkg"].available and "pip install" in info["needs_pkg"].reason


@pytest.mark.parametrize(
    "target, message",
    [("NotAMemory", "not a subclass"), ("Incomplete", "does not implement _retrieve"), ("LooseMemory", "forbid")],
)
def test_plugins_validated_at_load(fake_module: str, target: str, message: str) -> None:
    reg = registry(ep("x", f"{fake_module}:{target}"))
    with pytest.raises(PluginValidationError, match=message):
        reg.get("x")


def test_in_process_registration(fake_module: str) -> None:
    reg = registry(ep("good", f"{fake_module}:GoodMemory"))
    with pytest.raises(DuplicateNameError):
        reg.register("good", GoodMemory)
    reg.register("other", GoodMemory)
    assert reg.get("other") is GoodMemory


def test_builtins_are_registered_through_entry_points() -> None:
    names = backends.names()
    for name in ("none", "full_context", "rag", "mem0", "profile"):
        assert name in names
    assert {"embedding", "longest_option"} <= set(readers.names())
    assert backends.entry("rag").distribution == "memlab"


def test_broken_plugins_are_listed_not_fatal(fake_module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # One plugin whose module raises on import, one whose entry point names a missing class: the
    # listing still shows every plugin instead of crashing `memlab backends`.
    broken = types.ModuleType("fake_broken_plugin")

    def explode(name: str) -> None:
        raise RuntimeError("plugin module crashed at import")

    broken.__getattr__ = explode  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_broken_plugin", broken)
    reg = registry(
        ep("good", f"{fake_module}:GoodMemory"),
        ep("typo", f"{fake_module}:NoSuchClass"),
        ep("crash", "fake_broken_plugin:Anything"),
    )
    with pytest.raises(PluginValidationError, match="NoSuchClass does not exist"):
        reg.get("typo")
    info = {row.name: row for row in reg.info()}
    assert info["good"].available
    assert not info["typo"].available and "does not exist" in info["typo"].reason
    assert not info["crash"].available and "RuntimeError: plugin module crashed" in info["crash"].reason
