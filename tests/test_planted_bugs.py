"""The conformance suite catches the 14 data-loss bugs of issue 35, each planted alone in a small
SQLite backend (tests/planted_bugs.py), and its failure message names the rule that broke."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from planted_bugs import BUGS, SqliteTurns, run_suite

from memlab.errors import PluginValidationError
from memlab.registry import validate_backend
from memlab.testing import MemoryConformance
from memlab.types import MemoryItem, Retrieval


def test_the_reference_backend_passes_every_check(tmp_path: Path) -> None:
    """The backend the bugs are planted in conforms: every failure below is the planted bug's."""
    validate_backend("sqlite_turns", SqliteTurns)
    assert run_suite(lambda data_dir: SqliteTurns(data_dir=data_dir), tmp_path) == {}


def test_fourteen_kinds_are_planted() -> None:
    assert len(BUGS) == 14
    assert len({bug.backend for bug in BUGS.values()}) == 14


@pytest.mark.parametrize("kind", sorted(BUGS))
def test_the_suite_catches_the_planted_bug_naming_the_rule(kind: str, tmp_path: Path) -> None:
    bug = BUGS[kind]
    failures = run_suite(lambda data_dir: bug.backend(data_dir=data_dir), tmp_path)
    assert bug.check in failures, f"{kind}: {bug.check} passed; failures: {failures}"
    assert re.search(bug.message, failures[bug.check]), failures[bug.check]


def test_the_guide_states_the_numbers_the_suite_has() -> None:
    """docs/plugins.md's count of checks and of planted bugs are these, not a guess."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text(encoding="utf-8")
    checks = [name for name in dir(MemoryConformance) if name.startswith("test_")]
    stated = re.search(r"`pytest test_keyword_memory.py` runs (\d+) checks", guide)
    assert stated and int(stated.group(1)) == len(checks), (stated and stated.group(0), len(checks))
    planted = re.search(r"plants (\d+) data-loss bugs", guide.replace("\n", " "))
    assert planted and int(planted.group(1)) == len(BUGS)


class _Returns(SqliteTurns):
    """Hands back whatever ``returned`` holds, to test what ``Memory.retrieve`` refuses."""

    returned: Any = None

    def _retrieve(self, query: str, *, user_id: str, k: int) -> Retrieval:
        return self.returned


@pytest.mark.parametrize(
    ("returned", "refusal"),
    [
        (
            Retrieval(items=[MemoryItem(id="a", text="x", score=math.inf)]),
            r"item 'a' with score inf; a score is a finite",
        ),
        (Retrieval(items=[MemoryItem(id="a", text="x", score=-math.inf)]), r"score -inf"),
        (Retrieval.model_construct(items=[{"id": "a"}], context=""), r"item 0 as dict .*expected memlab.MemoryItem"),
        (Retrieval.model_construct(items="abc", context=""), r"whose items are str"),
        (Retrieval.model_construct(items=[], context=None), r"and context NoneType"),
    ],
)
def test_retrieve_refuses_what_no_metric_can_read_naming_the_plugin(returned: Retrieval, refusal: str) -> None:
    memory = _Returns()
    memory.returned = returned
    with pytest.raises(
        PluginValidationError,
        match=r"^backend 'sqlite_turns' \(test_planted_bugs._Returns\): _retrieve returned .*" + refusal,
    ):
        memory.retrieve("q", user_id="u", k=3)
    memory.close()
