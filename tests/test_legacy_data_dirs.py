"""Data dirs written by memlab before the rag/profile storage refactor (commit 5ca34c8) still open
and answer identically: same items, same retrievals (ids, scores, contexts), same exports.

The fixture (tests/data/legacy_5ca34c8) was made by ``make_fixture.py`` there, run on that commit's code.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from memlab.registry import create_backend
from memlab.testing import session

FIXTURE = Path(__file__).parent / "data" / "legacy_5ca34c8"
_spec = importlib.util.spec_from_file_location("make_fixture", FIXTURE / "make_fixture.py")
assert _spec is not None and _spec.loader is not None
make_fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixture)
EXPECTED = json.loads((FIXTURE / "answers.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_data_dir_of_the_old_code_opens_and_answers_identically(name: str, tmp_path: Path) -> None:
    expected = EXPECTED[name]
    data_dir = tmp_path / name
    shutil.copytree(FIXTURE / name, data_dir)  # opening may compact or migrate: never touch the fixture
    memory = create_backend(expected["backend"], expected["config"], data_dir=data_dir)
    try:
        assert json.loads(json.dumps(make_fixture.answers(memory, name))) == expected["answers"]
        # Turn numbering continues where the old code left it (s1 had 3 + 1 turns).
        assert memory.ingest(session("s1", ("user", "One more thing.")), user_id="alice").first_turn == 4
    finally:
        memory.close()
