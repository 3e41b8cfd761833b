"""LangGraph's own store tests (``tests/test_store.py`` of langgraph-checkpoint) with ``MemlabStore`` swapped in.

Every ``InMemoryStore(**kwargs)`` the suite builds becomes
``MemlabStore(MemoryClient(backend, data_dir=<fresh dir>), **kwargs)``; nothing else of the suite
changes (a generated ``conftest.py`` rebinds ``langgraph.store.memory.InMemoryStore`` before the
test module imports it). The suite is not vendored: it comes from ``--source`` (a directory holding
``tests/test_store.py``, or the langgraph-checkpoint sdist ``.tar.gz``), from the environment
variable ``MEMLAB_LANGGRAPH_SUITE``, or else from PyPI: the sdist of the installed
langgraph-checkpoint version, which ships its tests (``pip download --no-binary :all:``).

    python benchmarks/bench_langgraph_store_suite.py                 # rag and full_context
    python benchmarks/bench_langgraph_store_suite.py --backends rag --source /tmp/langgraph_checkpoint-4.3.2.tar.gz

Prints ``langgraph store suite: rag P/N tests (p/n cases), full_context ...`` (test functions that
passed, all their parametrized cases included / test functions; pytest's cases) and the cases that
failed. Needs pytest-asyncio and pytest-mock (the suite's own test dependencies).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

SUITE_ENV = "MEMLAB_LANGGRAPH_SUITE"
SUITE_FILES = ("__init__.py", "embed_test_utils.py", "test_store.py")

# Rebinds InMemoryStore before the suite imports it; the backend comes from the environment.
SWAP_CONFTEST = '''
import os
import tempfile

import langgraph.store.memory

from memlab.client import MemoryClient
from memlab.integrations.langgraph import MemlabStore

_CLIENTS = []


class InMemoryStore(MemlabStore):
    """MemlabStore over a fresh memory, built as the suite builds InMemoryStore."""

    def __init__(self, **kwargs):
        data_dir = tempfile.mkdtemp(dir=os.environ["MEMLAB_SUITE_TMP"])
        client = MemoryClient(os.environ["MEMLAB_SUITE_BACKEND"], data_dir=data_dir)
        _CLIENTS.append(client)
        super().__init__(client, **kwargs)


langgraph.store.memory.InMemoryStore = InMemoryStore


def pytest_sessionfinish(session, exitstatus):
    for client in _CLIENTS:
        client.close()
    # The runner checks the swap took effect (a suite that never built a MemlabStore proves nothing).
    with open(os.path.join(os.environ["MEMLAB_SUITE_TMP"], "stores-built"), "w") as out:
        out.write(str(len(_CLIENTS)))
'''


class SuiteUnavailable(Exception):
    """The suite could not be obtained (no local copy, registry unreachable)."""


@dataclass
class SuiteResult:
    """Cases are pytest's items (one per parametrization); a test (function) passes when all its cases do."""

    backend: str
    passed: int = 0
    total: int = 0
    failed: list[str] = field(default_factory=list)
    case_names: list[str] = field(default_factory=list)

    @property
    def tests(self) -> int:
        return len(self._functions(self.case_names))

    @property
    def tests_passed(self) -> int:
        return self.tests - len(self._functions(self.failed))

    @staticmethod
    def _functions(names: list[str]) -> set[str]:
        return {name.split("[", 1)[0] for name in names}

    def line(self) -> str:
        return f"{self.backend} {self.tests_passed}/{self.tests} tests ({self.passed}/{self.total} cases)"


def _suite_from_sdist(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if "/tests/" in m.name and m.name.rsplit("/", 1)[-1] in SUITE_FILES]
        if not any(m.name.endswith("/tests/test_store.py") for m in members):
            raise SuiteUnavailable(f"{archive} holds no tests/test_store.py")
        for member in members:
            source = tar.extractfile(member)
            if source is not None:
                (into / Path(member.name).name).write_bytes(source.read())
    return into


def obtain_suite(source: str | None, into: Path) -> Path:
    """A directory ``into/tests`` holding the suite's files; SuiteUnavailable says why not."""
    tests = into / "tests"
    tests.mkdir(parents=True)
    source = source or os.environ.get(SUITE_ENV)
    if source:
        path = Path(source)
        if path.is_file() and path.name.endswith(".tar.gz"):
            return _suite_from_sdist(path, tests)
        for candidate in (path, path / "tests", path / "libs" / "checkpoint" / "tests"):
            if (candidate / "test_store.py").is_file():
                for name in SUITE_FILES:
                    if (candidate / name).is_file():
                        shutil.copy(candidate / name, tests / name)
                return tests
        raise SuiteUnavailable(f"{source} holds no test_store.py (give a langgraph-checkpoint sdist or its tests dir)")
    version = importlib.metadata.version("langgraph-checkpoint")
    download = into / "sdist"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q"]
    command += [f"langgraph-checkpoint=={version}", "-d", str(download)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    archives = sorted(download.glob("*.tar.gz")) if download.is_dir() else []
    if done.returncode != 0 or not archives:
        reason = (done.stderr.strip().splitlines() or ["no archive"])[-1]
        raise SuiteUnavailable(
            f"could not download the langgraph-checkpoint {version} sdist from PyPI ({reason}); "
            f"pass --source or set {SUITE_ENV} to a local copy"
        )
    return _suite_from_sdist(archives[0], tests)


def run_suite(tests: Path, backend: str, work: Path, extra_args: list[str] | None = None) -> SuiteResult:
    """Runs ``tests/test_store.py`` with the store swapped for MemlabStore over ``backend``."""
    root = tests.parent
    (root / "conftest.py").write_text(SWAP_CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    report = work / f"{backend}.xml"
    scratch = work / f"{backend}-data"
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MEMLAB_SUITE_BACKEND": backend, "MEMLAB_SUITE_TMP": str(scratch)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-m", "pytest", "tests/test_store.py", "-q", "-p", "no:cacheprovider"]
    command += ["-c", str(root / "pytest.ini"), "--rootdir", str(root), f"--junitxml={report}", *(extra_args or [])]
    subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    if not report.is_file():
        raise RuntimeError(f"pytest wrote no report for {backend} (run it by hand in {root} to see why)")
    built = scratch / "stores-built"
    if not built.is_file() or int(built.read_text() or 0) == 0:
        raise RuntimeError(f"the suite in {root} built no MemlabStore: the InMemoryStore swap did not take effect")
    result = SuiteResult(backend)
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            continue
        result.total += 1
        result.case_names.append(case.get("name", "?"))
        if case.find("failure") is None and case.find("error") is None:
            result.passed += 1
        else:
            result.failed.append(case.get("name", "?"))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source", help=f"langgraph-checkpoint sdist .tar.gz or tests dir (default: ${SUITE_ENV}, else PyPI)"
    )
    parser.add_argument("--backends", default="rag,full_context", help="comma-separated memlab backends")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memlab-langgraph-suite-") as tmp:
        work = Path(tmp)
        try:
            tests = obtain_suite(args.source, work / "suite")
        except SuiteUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        results = [run_suite(tests, backend.strip(), work) for backend in args.backends.split(",") if backend.strip()]
    print("langgraph store suite: " + ", ".join(r.line() for r in results))
    for r in results:
        for name in r.failed:
            print(f"  {r.backend} failed: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
