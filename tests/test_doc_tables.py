"""The measured tables of README.md and docs/ come from result files kept in docs/results/
(benchmarks/doc_tables.py): the repository's tables match their sources, and an edited number fails."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _doc_tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_tables", ROOT / "benchmarks" / "doc_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_tables"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_every_generated_table_matches_its_source() -> None:
    tables = _doc_tables()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("<!-- memlab:table ") >= 2  # the 128k accuracy table and the pairwise matrix
    assert tables.check() == []


def test_an_edited_number_fails_the_check(tmp_path: Path) -> None:
    tables = _doc_tables()
    shutil.copytree(ROOT / "docs" / "results", tmp_path / "docs" / "results")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- memlab:table docs/results/pm128k-embedding accuracy -->")
    block_end = readme.index("<!-- memlab:end -->", start)
    block = readme[start:block_end]
    assert "| full_context | 68.1 [59.9, 75.4] |" in block
    edited = readme[:start] + block.replace("68.1 [59.9", "69.1 [59.9") + readme[block_end:]
    (tmp_path / "README.md").write_text(edited, encoding="utf-8")
    assert tables.check(tmp_path) == ["README.md: docs/results/pm128k-embedding accuracy"]
    regenerated, changed = tables.regenerate(edited, tmp_path)
    assert changed and regenerated == readme


def test_a_missing_source_is_named(tmp_path: Path) -> None:
    tables = _doc_tables()
    (tmp_path / "README.md").write_text("<!-- memlab:table docs/results/nope accuracy -->\n<!-- memlab:end -->\n")
    with pytest.raises(tables.TableSourceError, match="docs/results/nope"):
        tables.check(tmp_path)
