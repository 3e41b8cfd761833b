"""docs/plugins.md is runnable: its files pass the conformance suite, and the suite catches planted bugs.

The guide's code blocks tagged ``file=NAME`` are written to a temporary folder and run as a plugin
author would run them: pytest in a subprocess (so the ``pytest11`` assertion-rewriting plugin is
exercised too), and ``memlab.registry.load_plugin`` for trying a plugin without packaging it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from run_helpers import NoneRetrieveMemory, run_args

from memlab import Session
from memlab.errors import MemlabError, PluginValidationError
from memlab.memory import Capability
from memlab.registry import backends, load_plugin, readers, validate_backend
from memlab.types import Message, Question

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"
FENCE = re.compile(r"^```python file=(\S+)\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.fixture
def guide_files(tmp_path: Path) -> Path:
    files = dict(FENCE.findall(GUIDE.read_text(encoding="utf-8")))
    assert {"keyword_memory.py", "test_keyword_memory.py", "overlap_reader.py"} <= set(files)
    for name, code in files.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    return tmp_path


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def failed_checks(result: subprocess.CompletedProcess[str]) -> set[str]:
    return set(re.findall(r"^FAILED \S+::\w+::(\w+)", result.stdout, re.MULTILINE))


def test_guide_backend_passes_the_conformance_suite(guide_files: Path) -> None:
    result = run_pytest(guide_files, "test_keyword_memory.py")
    assert result.returncode == 0, result.stdout[-3000:]
    assert re.search(r"\b1\d passed|\b[2-9]\d passed", result.stdout), result.stdout[-500:]


PLANTED = {
    # bug name -> (code replacing KeywordMemory's behaviour, the conformance check that must fail)
    "inverted_ranking": (
        """
        def _retrieve(self, query, *, user_id, k):
            asked = words(query)
            scored = [(len(asked & words(i.text)), i) for i in self._user(user_id)]
            worst = sorted(scored, key=lambda pair: pair[0])[:k]  # ascending: the planted bug
            items = [i.model_copy(update={"score": float(s)}) for s, i in worst]
            return Retrieval(items=items, context=" ".join(i.text for i in items))
        """,
        "test_ranking_puts_the_relevant_item_first",
    ),
    "k_is_top_k": (
        """
        def _retrieve(self, query, *, user_id, k):
            return super()._retrieve(query, user_id=user_id, k=self.config.top_k)
        """,
        "test_k_is_the_callers_bound_not_top_k",
    ),
    "no_provenance": (
        """
        def _retrieve(self, query, *, user_id, k):
            found = super()._retrieve(query, user_id=user_id, k=k)
            return found.model_copy(update={"items": [i.model_copy(update={"source": {}}) for i in found.items]})
        """,
        "test_items_trace_back_to_turns",
    ),
    "shared_state": (
        """
        _everyone = {}  # one dict for every instance

        def __init__(self, config=None, *, data_dir=None, cache_dir=None):
            super().__init__(config, data_dir=None, cache_dir=cache_dir)  # data_dir ignored
            self._items = Buggy._everyone
        """,
        "test_instances_do_not_share_state",
    ),
}


def run_suite_on_buggy(folder: Path, code: str) -> subprocess.CompletedProcess[str]:
    """The conformance suite on ``Buggy``: the guide's KeywordMemory with ``code`` replacing some of it."""
    (folder / "buggy.py").write_text(
        "from memlab import Retrieval\nfrom memlab.errors import NotFoundError\n"
        "from keyword_memory import KeywordMemory, words\n\n\n"
        "class Buggy(KeywordMemory):\n" + textwrap.indent(textwrap.dedent(code), "    "),
        encoding="utf-8",
    )
    (folder / "test_buggy.py").write_text(
        "from memlab.testing import MemoryConformance\nfrom buggy import Buggy\n\n\n"
        "class TestBuggy(MemoryConformance):\n"
        "    def make_memory(self, data_dir):\n        return Buggy({'top_k': 3}, data_dir=data_dir)\n",
        encoding="utf-8",
    )
    return run_pytest(folder, "test_buggy.py")


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_conformance_suite_catches_planted_bug(guide_files: Path, bug: str) -> None:
    code, check = PLANTED[bug]
    result = run_suite_on_buggy(guide_files, code)
    assert check in failed_checks(result), result.stdout[-3000:]
    # the pytest11 plugin rewrote the suite's asserts: failures show values, not a bare AssertionError
    assert re.search(r"^E\s+(assert|AssertionError: \S)", result.stdout, re.MULTILINE), result.stdout[-2000:]


def test_load_plugin_from_a_file_registers_backend_and_reader(guide_files: Path) -> None:
    try:
        assert load_plugin(f"{guide_files / 'keyword_memory.py'}:KeywordMemory") == ("backend", "keyword")
        assert load_plugin(f"{guide_files / 'overlap_reader.py'}:OverlapReader") == ("reader", "overlap")
        shown = backends.show("keyword")
        assert shown["capabilities"] == ["delete", "list", "persist"]
        assert {f["name"]: f["default"] for f in shown["config"]} == {"top_k": 10, "min_overlap": 1}
        memory = backends.get("keyword")({"top_k": 2})
        memory.ingest(Session(id="s1", messages=[Message(role="user", content="I keep bees in Lisbon.")]), user_id="u")
        question = Question(
            id="q",
            type="recall",
            text="What do I keep?",
            context_id="c",
            end_index=1,
            answer=1,
            options=["(a) goats", "(b) bees in Lisbon", "(c) a boat", "(d) nothing"],
        )
        answer = readers.get("overlap")().answer(question, memory.retrieve(question.text, user_id="u"))
        assert answer.choice == 1 and len(answer.scores) == 4
    finally:
        backends.unregister("keyword")
        readers.unregister("overlap")


def test_load_plugin_errors_name_the_reference(tmp_path: Path) -> None:
    with pytest.raises(PluginValidationError, match="expected module:Class"):
        load_plugin("no_colon_here")
    with pytest.raises(PluginValidationError, match="no such file"):
        load_plugin(f"{tmp_path / 'missing.py'}:X")
    with pytest.raises(PluginValidationError, match="neither"):
        load_plugin("memlab.types:Message")


def test_retrieve_must_return_a_retrieval() -> None:
    with pytest.raises(PluginValidationError, match=r"'none_retrieve'.*returned NoneType, expected memlab.Retrieval"):
        NoneRetrieveMemory().retrieve("anything", user_id="u")


def test_declared_capability_needs_its_hook() -> None:
    class ClaimsDelete(NoneRetrieveMemory):
        capabilities = frozenset({Capability.DELETE})

    with pytest.raises(PluginValidationError, match="declares the 'delete' capability but does not override _delete"):
        validate_backend("claims", ClaimsDelete)


def test_unknown_config_key_lists_the_valid_ones() -> None:
    with pytest.raises(MemlabError, match=r"valid keys: .*top_k"):
        backends.get("rag").parse_config({"top_kk": 3})


def test_k_is_bounded_in_the_python_api() -> None:
    with pytest.raises(ValueError, match="k must be an integer from 1 to"):
        NoneRetrieveMemory().retrieve("x", user_id="u", k=10**9)


def memlab_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``memlab ARGS`` as a user runs it: a fresh interpreter that has registered nothing."""
    return subprocess.run([sys.executable, "-m", "memlab.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_guide_commands_show_and_run_an_unpackaged_plugin(guide_files: Path, tmp_path: Path) -> None:
    """The guide's two commands, as a user types them: --show, then a run with --plugin."""
    plugin = f"{guide_files / 'keyword_memory.py'}:KeywordMemory"
    shown = memlab_cli("backends", "--plugin", plugin, "--show", "keyword")
    assert shown.returncode == 0, shown.stderr
    assert "capabilities: delete, list, persist" in shown.stdout
    assert "min-overlap: int, default 1" in shown.stdout and "query words a turn must share" in shown.stdout
    out = tmp_path / "run"

    def keyword_run(into: Path, *more: str) -> list[str]:
        plugged = ["--plugin", plugin, "--reader", "longest_option", *more]
        return run_args(into, *plugged, dataset="synthetic:personas=1,sessions=4", backends="keyword")

    ran = memlab_cli(*keyword_run(out), timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert any(row["backend"] == "keyword" and row["questions"] > 0 for row in rows), rows
    # A process worker has not seen the driver's registration: the job loads the file itself.
    ran = memlab_cli(
        *keyword_run(tmp_path / "proc", "--executor", "process", "--workers", "1", "--no-controls"), timeout=600
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    unknown = memlab_cli("backends", "--show", "keywrd")
    assert unknown.returncode == 2 and "memlab: error:" in unknown.stderr and "keyword" not in unknown.stderr
