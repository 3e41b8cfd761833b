"""Plugin discovery through Python entry points.

Backends live in the entry-point group ``memlab.backends`` and readers in ``memlab.readers``; each
entry is a lazy ``module:Class`` reference that is imported only when used (as in
lm-evaluation-harness). Two entries with one name are rejected, unknown names are answered with near
matches, and a plugin whose optional dependency is missing is listed as unavailable with its install
hint instead of breaking discovery of the others. A loaded class is validated against the interface
before it is handed out.

Names: a plugin is known by one name everywhere (the registry, ``--backends``, result rows): an
entry point's name must equal its class's ``name``, and a class without a ``name`` is refused.
A plugin whose import fails for any reason is a one-line ``MemlabError`` naming it, never a traceback.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import inspect
import json
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from memlab.errors import (
    DuplicateNameError,
    MissingDependencyError,
    PluginValidationError,
    UnknownNameError,
)

T = TypeVar("T")

BACKENDS_GROUP = "memlab.backends"
LOCAL_PLUGIN_PREFIX = "memlab_local_plugin_"  # module names of --plugin files (imported from a path)
READERS_GROUP = "memlab.readers"


@dataclass(frozen=True)
class PluginSource:
    """The code an in-process plugin runs: the file defining its class and the local modules it
    imports (those beside it, in its folder or below), each with the sha256 of its content as imported."""

    file: Path
    hashes: tuple[tuple[str, str], ...]  # (path relative to the file's folder, sha256), the file first

    @property
    def digest(self) -> str:
        """One sha256 over every file's name and hash: what a result row's fingerprint records."""
        return hashlib.sha256(json.dumps(self.hashes).encode("utf-8")).hexdigest()

    def describe(self) -> str:
        helpers = [name for name, _ in self.hashes[1:]]
        shown = ", ".join(helpers[:5]) + (f" and {len(helpers) - 5} more" if len(helpers) > 5 else "")
        more = f" with {shown}" if helpers else ""
        return f"file {self.file.name}{more} sha256:{self.digest[:16]}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local_source(file: Path, modules: Iterable[Any] = ()) -> PluginSource:
    """The ``PluginSource`` of ``file`` and of those ``modules`` whose files lie in its folder or below."""
    folder = file.resolve().parent
    hashes = [(file.name, _sha256(file))]
    seen = {file.resolve()}
    for module in modules:
        path = getattr(module, "__file__", None)
        if not path:
            continue
        resolved = Path(path).resolve()
        if resolved in seen or not resolved.is_file() or not resolved.is_relative_to(folder):
            continue
        if {"site-packages", "dist-packages"} & set(resolved.relative_to(folder).parts):
            continue  # an installed library under the folder (a virtual environment): versioned, not local code
        seen.add(resolved)
        hashes.append((str(resolved.relative_to(folder)), _sha256(resolved)))
    return PluginSource(file=file.resolve(), hashes=(hashes[0], *sorted(hashes[1:])))


@dataclass
class PluginEntry:
    """One registered plugin: its name, where it lives, and (once imported) its class."""

    name: str
    target: str
    distribution: str | None = None
    loader: Callable[[], Any] | None = None
    _loaded: Any = field(default=None, repr=False)
    in_process: bool = False  # registered by ``register`` (a notebook, a test, ``--plugin``), not an entry point
    _source: PluginSource | None = field(default=None, repr=False)

    def load(self) -> Any:
        if self._loaded is None:
            self._loaded = self.loader() if self.loader is not None else pkgutil.resolve_name(self.target)
        return self._loaded

    def source(self) -> PluginSource | None:
        """The code of an in-process plugin: its file and the local modules it imports.

        Part of a result row's fingerprint where no distribution version names the code: an edited
        ``--plugin`` file, or an edited helper module beside it, must not resume the rows its old
        version made. ``load_plugin`` records it as it imports the file; for a class registered
        otherwise (a notebook, a test) it is the file defining the class, hashed at first use.
        """
        if self._source is None and self._loaded is not None:
            module = sys.modules.get(getattr(self._loaded, "__module__", ""), None)
            path = getattr(module, "__file__", None)
            if path and Path(path).is_file():
                self._source = local_source(Path(path), _imported_modules(module))
        return self._source

    def where(self) -> str:
        """Where the plugin comes from, for people: a --plugin class's file, else its entry point target."""
        return f"{self._source.file}:{self.target.rpartition(':')[2]}" if self._source is not None else self.target

    @property
    def version(self) -> str | None:
        """Version of the distribution that provides the plugin (None for in-process registrations)."""
        if self.distribution is None:
            return None
        try:
            return metadata.version(self.distribution)
        except metadata.PackageNotFoundError:
            return None


@dataclass
class PluginInfo:
    """What ``memlab backends`` prints for one plugin."""

    name: str
    target: str
    distribution: str | None
    available: bool
    description: str = ""
    capabilities: list[str] = field(default_factory=list)
    reason: str = ""


class Registry(Generic[T]):
    """Plugins of one kind (backends or readers), discovered from one entry-point group."""

    def __init__(
        self,
        group: str,
        validate: Callable[[str, Any], None],
        *,
        eps: Iterable[EntryPoint] | None = None,
    ) -> None:
        self.group = group
        self._validate = validate
        self._eps = eps
        self._entries: dict[str, PluginEntry] | None = None

    # ----------------------------------------------------------------- discovery
    def _discover(self) -> dict[str, PluginEntry]:
        if self._entries is None:
            found = self._eps if self._eps is not None else entry_points(group=self.group)
            entries: dict[str, PluginEntry] = {}
            for ep in found:
                dist = getattr(getattr(ep, "dist", None), "name", None)
                if ep.name in entries:
                    if entries[ep.name].target == ep.value:
                        continue  # the same package seen twice on sys.path (editable installs)
                    other = entries[ep.name]
                    raise DuplicateNameError(
                        f"{self.group}: name {ep.name!r} is registered twice: "
                        f"{other.target} (from {other.distribution or '?'}) and {ep.value} (from {dist or '?'})"
                    )
                entries[ep.name] = PluginEntry(ep.name, ep.value, dist)
            self._entries = entries
        return self._entries

    def register(self, name: str, obj: Any, *, source: PluginSource | None = None) -> None:
        """Register a class in-process (notebooks, tests, ``--plugin``). Same duplicate rule as entry
        points. ``source``: the code it runs, when it was imported from a file (``load_plugin``)."""
        entries = self._discover()
        target = f"{obj.__module__}:{obj.__qualname__}"
        if name in entries:
            if entries[name]._loaded is obj:
                return  # the same class registered again (a re-run notebook cell, --plugin given twice)
            holder = entries[name]
            held = holder.where() + (f" (from {holder.distribution})" if holder.distribution else "")
            new = f"{source.file}:{obj.__qualname__}" if source is not None else target
            raise DuplicateNameError(f"{self.group}: name {name!r} is registered twice: {held} and {new}")
        self._validate(name, obj)
        entries[name] = PluginEntry(name, target, None, _loaded=obj, in_process=True, _source=source)

    def unregister(self, name: str) -> None:
        self._discover().pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._discover())

    # ----------------------------------------------------------------- lookup
    def entry(self, name: str) -> PluginEntry:
        entries = self._discover()
        if name not in entries:
            close = difflib.get_close_matches(name, list(entries), n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            known = ", ".join(sorted(entries)) or "none"
            raise UnknownNameError(f"unknown {self._kind()} {name!r}.{hint} Registered: {known}.")
        return entries[name]

    def get(self, name: str) -> T:
        """Import, validate and return the plugin class registered as ``name``."""
        entry = self.entry(name)
        try:
            obj = entry.load()
        except MissingDependencyError:
            raise
        except ImportError as exc:
            missing = getattr(exc, "name", None) or str(exc)
            raise MissingDependencyError(
                missing, f"{self._kind()} {name!r} ({entry.target}) needs it: pip install {missing}"
            ) from exc
        except AttributeError as exc:  # the module imports but the entry point names nothing in it
            raise PluginValidationError(
                f"{self._kind()} {name!r}: entry point {entry.target} does not exist ({exc})"
            ) from exc
        except Exception as exc:  # the plugin's own code raised while importing: one line, naming it
            raise PluginValidationError(
                f"{self._kind()} {name!r} ({entry.target}): import failed: {type(exc).__name__}: {exc}"
            ) from exc
        self._validate(name, obj)
        if not entry.in_process and obj.name != name:
            # Rows are labelled with the class's name: two names for one plugin would label them wrong.
            raise PluginValidationError(
                f"{self._kind()} {name!r} ({entry.target}{', from ' + entry.distribution if entry.distribution else ''}):"
                f" the entry point's name must equal the class's name, which is {obj.name!r}"
            )
        return obj

    def resolve(self, name: str) -> str:
        """``name`` itself when registered, else the one plugin the distribution ``name`` provides.

        ``memlab backends --show memlab-episodic`` then shows ``episodic``. A distribution that
        provides several plugins of this kind (or none) leaves ``name`` as it is, to fail with a hint.
        """
        entries = self._discover()
        if name in entries:
            return name
        wanted = _normalise(name)
        provided = sorted(n for n, e in entries.items() if e.distribution and _normalise(e.distribution) == wanted)
        if len(provided) == 1:
            return provided[0]
        if provided:
            raise UnknownNameError(
                f"distribution {name!r} provides several {self._kind()}s: {', '.join(provided)}; name one of them"
            )
        return name

    def show(self, name: str) -> dict[str, Any]:
        """Everything a plugin author or user needs to configure ``name`` (``memlab backends --show``).

        ``name`` may also be the distribution that provides the plugin, when it provides one.
        """
        name = self.resolve(name)
        entry = self.entry(name)
        obj = self.get(name)
        config = getattr(obj, "Config", None)
        fields = []
        if isinstance(config, type) and issubclass(config, BaseModel):
            for key, info in config.model_fields.items():
                default = None if info.is_required() else info.get_default(call_default_factory=True)
                if isinstance(default, BaseModel):  # a nested settings block (the llm reader's `llm`)
                    default = default.model_dump(mode="json")
                fields.append(
                    {
                        "name": key,
                        "type": _type_name(info.annotation),
                        "default": default,
                        "required": info.is_required(),
                        "description": info.description or "",
                    }
                )
        return {
            "name": name,
            "kind": self._kind(),
            "target": entry.where(),
            "description": getattr(obj, "description", "") or (obj.__doc__ or "").strip().split("\n")[0],
            "capabilities": sorted(c.value for c in getattr(obj, "capabilities", ())),
            "package": entry.distribution,
            "version": entry.version,
            "config": fields,
        }

    def info(self) -> list[PluginInfo]:
        rows = []
        for name in self.names():
            entry = self._discover()[name]
            try:
                obj = self.get(name)
            except (MissingDependencyError, PluginValidationError) as exc:
                rows.append(PluginInfo(name, entry.target, entry.distribution, False, reason=str(exc)))
                continue
            except Exception as exc:  # a plugin that fails to import must not hide the others
                reason = f"import failed: {type(exc).__name__}: {exc}"
                rows.append(PluginInfo(name, entry.target, entry.distribution, False, reason=reason))
                continue
            caps = sorted(c.value for c in getattr(obj, "capabilities", ()))
            rows.append(PluginInfo(name, entry.target, entry.distribution, True, getattr(obj, "description", ""), caps))
        return rows

    def _kind(self) -> str:
        return self.group.rsplit(".", 1)[-1].rstrip("s")


def _normalise(distribution: str) -> str:
    """A distribution name as pip compares them (PEP 503): case, ``-``, ``_`` and ``.`` do not matter."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


# ----------------------------------------------------------------------- validation
def _check_plugin_class(kind: str, name: str, obj: Any, base: type, base_name: str) -> str:
    """Check that ``obj`` is a concrete subclass of ``base``; return how errors name the plugin."""
    where = f"{kind} {name!r} ({getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)})"
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise PluginValidationError(f"{where} is not a subclass of {base_name}")
    missing = sorted(getattr(obj, "__abstractmethods__", ()))
    if missing:
        raise PluginValidationError(f"{where} does not implement {', '.join(missing)}")
    name_attr = getattr(obj, "name", None)
    if not isinstance(name_attr, str) or not name_attr:
        raise PluginValidationError(f"{where} sets no `name` (rows and the registry need a non-empty one)")
    return where


def validate_backend(name: str, obj: Any) -> None:
    from memlab.memory import CAPABILITY_HOOKS, BackendConfig, Capability, Memory

    where = _check_plugin_class("backend", name, obj, Memory, "memlab.Memory")
    config = getattr(obj, "Config", None)
    if not (isinstance(config, type) and issubclass(config, BackendConfig)):
        raise PluginValidationError(f"{where}: Config must subclass memlab.BackendConfig")
    if config.model_config.get("extra") != "forbid":
        raise PluginValidationError(f"{where}: Config must forbid unknown keys (extra='forbid')")
    if not obj.description:
        raise PluginValidationError(f"{where} has no description")
    for capability in obj.capabilities:
        hook = CAPABILITY_HOOKS.get(capability)
        if hook is not None and getattr(obj, hook) is getattr(Memory, hook):
            raise PluginValidationError(
                f"{where} declares the {capability.value!r} capability but does not override {hook}()"
            )
    if Capability.FILTER in obj.capabilities and "filters" not in inspect.signature(obj._retrieve).parameters:
        raise PluginValidationError(f"{where} declares the 'filter' capability but its _retrieve takes no 'filters'")


def validate_reader(name: str, obj: Any) -> None:
    from memlab.readers.base import Reader

    where = _check_plugin_class("reader", name, obj, Reader, "memlab.readers.Reader")
    config = getattr(obj, "Config", None)
    if not (isinstance(config, type) and issubclass(config, BaseModel)):
        raise PluginValidationError(f"{where}: Config must be a pydantic model")


backends: Registry[Any] = Registry(BACKENDS_GROUP, validate_backend)
readers: Registry[Any] = Registry(READERS_GROUP, validate_reader)


def create_backend(name: str, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """Instantiate the backend registered as ``name`` with ``config`` (validated by its Config)."""
    return backends.get(name)(config, **kwargs)


def create_reader(name: str, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    return readers.get(name)(config, **kwargs)


def load_plugin(reference: str) -> tuple[str, str]:
    """Register a plugin class from ``module:Class`` or ``path/to/file.py:Class`` without packaging it.

    This is what ``memlab run --plugin`` does (like lm-evaluation-harness's ``--include_path``):
    the class registers under its ``name`` as a backend (a ``Memory`` subclass) or a reader (a
    ``Reader`` subclass). Returns (kind, name).
    """
    from memlab.memory import Memory
    from memlab.readers.base import Reader

    source: PluginSource | None = None  # the plugin file and the local modules it imported
    target, sep, attr = reference.rpartition(":")
    if not sep or not target or not attr:
        raise PluginValidationError(f"--plugin {reference!r}: expected module:Class or path/to/file.py:Class")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise PluginValidationError(f"--plugin {reference!r}: no such file {path}")
        # One module per file, imported once per process: loading the same --plugin again (the
        # driver, then a job in the same process) must hand back the same class.
        module_name = LOCAL_PLUGIN_PREFIX + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
        module = sys.modules.get(module_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise PluginValidationError(f"--plugin {reference!r}: cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            # The file's folder is importable, as for ``python file.py``: a helper module beside it imports.
            folder = str(path.resolve().parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            before = set(sys.modules)
            sys.modules[module_name] = module  # dataclasses, pickling and pydantic look modules up by name
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                del sys.modules[module_name]
                raise PluginValidationError(
                    f"--plugin {reference!r}: importing {path} failed: {type(exc).__name__}: {exc}"
                ) from exc
            imported = [sys.modules[n] for n in set(sys.modules) - before if n in sys.modules]
            source = local_source(path, [*imported, *_imported_modules(module)])
        else:
            entry = _file_plugin_entry(module_name)
            source = entry.source() if entry is not None else None
        obj = getattr(module, attr, None)
    else:
        try:
            obj = pkgutil.resolve_name(reference)
        except (ImportError, AttributeError, ValueError) as exc:
            raise PluginValidationError(f"--plugin {reference!r}: {type(exc).__name__}: {exc}") from exc
    if obj is None:
        raise PluginValidationError(f"--plugin {reference!r}: {target} has no attribute {attr!r}")
    if isinstance(obj, type) and issubclass(obj, Memory):
        registry: Registry[Any] = backends
    elif isinstance(obj, type) and issubclass(obj, Reader):
        registry = readers
    else:
        raise PluginValidationError(f"--plugin {reference!r} is neither a memlab.Memory nor a memlab Reader subclass")
    name = getattr(obj, "name", "")
    if not name:
        raise PluginValidationError(f"--plugin {reference!r}: the class sets no `name`")
    registry.register(name, obj, source=source)
    return registry._kind(), name


def _file_plugin_entry(module_name: str) -> PluginEntry | None:
    """An entry registered from the file plugin module ``module_name`` (loading the file again: its
    code was recorded when it was first imported)."""
    for registry in (backends, readers):
        for entry in registry._discover().values():
            if entry.target.startswith(f"{module_name}:"):
                return entry
    return None


def _imported_modules(module: Any) -> list[Any]:
    """Modules a module's namespace refers to: those it imported, and those its imported names live in."""
    found = []
    for value in list(vars(module).values()) if module is not None else []:
        if inspect.ismodule(value):
            found.append(value)
        else:
            owner = sys.modules.get(getattr(value, "__module__", None) or "")
            if owner is not None and owner is not module:
                found.append(owner)
    return found
