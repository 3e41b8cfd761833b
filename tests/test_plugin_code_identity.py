"""The code a row runs is in its fingerprint (issue 35): a ``--plugin`` file and the local modules it
imports, an editable install's files; a ``--plugin`` file's folder is importable; ``--show`` and a
name clash name the files."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from run_helpers import run_args
from test_plugin_guide import memlab_cli

from memlab.errors import DuplicateNameError
from memlab.registry import backends, load_plugin
from memlab.run.fingerprint import editable_code_hash, plugin_code, plugin_package

PLUGIN = """
    from memlab import Memory, Retrieval
    from memlab.memory import render_turns, turn_source
    from memlab.types import MemoryItem

    from {helper} import overlap


    class Helped(Memory):
        name = "{name}"
        description = "ranks turns with a helper module beside it"

        def __init__(self, config=None, *, data_dir=None, cache_dir=None):
            super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
            self.turns = {{}}

        def _ingest(self, session, *, user_id, first_turn):
            for i, m in enumerate(session.messages):
                source = turn_source(session, first_turn + i, m)
                self.turns.setdefault(user_id, []).append(MemoryItem(id=f"{{session.id}}#{{first_turn + i}}", text=m.content, source=source))

        def _retrieve(self, query, *, user_id, k):
            best = sorted(self.turns.get(user_id, []), key=lambda i: -overlap(query, i.text))[:k]
            return Retrieval(items=best, context=render_turns(best))

        def _reset(self, user_id):
            self.turns.pop(user_id, None)
"""
HELPER = """
    def overlap(a, b):
        return len(set(a.lower().split()) & set(b.lower().split()))
"""


def write_plugin(folder: Path, name: str, helper: str = "scoring") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{helper}.py").write_text(textwrap.dedent(HELPER), encoding="utf-8")
    path = folder / f"{name}_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN.format(helper=helper, name=name)), encoding="utf-8")
    return path


def test_a_plugin_file_imports_a_module_beside_it_and_both_are_hashed(tmp_path: Path) -> None:
    path = write_plugin(tmp_path / "p", "helped_a", helper="scoring_a")
    try:
        assert load_plugin(f"{path}:Helped") == ("backend", "helped_a")
        code = plugin_code("backend", "helped_a")
        assert code is not None and set(code) == {"helped_a_plugin.py", "scoring_a.py"}
        assert re.search(
            r"file helped_a_plugin\.py with scoring_a\.py sha256:\w{16}$", plugin_package("backend", "helped_a")
        )
        assert backends.show("helped_a")["target"] == f"{path.resolve()}:Helped", "--show names the file"
        assert load_plugin(f"{path}:Helped") == ("backend", "helped_a"), "loading it again is the same class"
    finally:
        backends.unregister("helped_a")


def test_a_name_clash_names_both_holders(tmp_path: Path) -> None:
    first = write_plugin(tmp_path / "one", "clash_b", helper="scoring_b1")
    second = write_plugin(tmp_path / "two", "clash_b", helper="scoring_b2")
    try:
        load_plugin(f"{first}:Helped")
        with pytest.raises(DuplicateNameError) as caught:
            load_plugin(f"{second}:Helped")
        assert f"{first.resolve()}:Helped" in str(caught.value) and f"{second.resolve()}:Helped" in str(caught.value)
        with pytest.raises(
            DuplicateNameError, match=r"'rag' is registered twice: memlab_plugins\.rag.* \(from memlab\)"
        ):
            backends.register("rag", backends.get("clash_b"))
    finally:
        backends.unregister("clash_b")


def test_show_prints_the_plugin_file(tmp_path: Path) -> None:
    path = write_plugin(tmp_path / "show", "shown_c", helper="scoring_c")
    shown = memlab_cli("backends", "--plugin", f"{path}:Helped", "--show", "shown_c")
    assert shown.returncode == 0, shown.stderr
    assert f"class:        {path.resolve()}:Helped" in shown.stdout, shown.stdout


def test_an_edited_helper_module_refuses_to_resume_naming_the_file(tmp_path: Path) -> None:
    path = write_plugin(tmp_path / "run", "helped_d", helper="scoring_d")
    out = tmp_path / "out"
    args = run_args(
        out,
        "--plugin",
        f"{path}:Helped",
        "--reader",
        "longest_option",
        "--no-controls",
        backends="helped_d",
        dataset="synthetic:personas=1,sessions=3",
    )
    first = memlab_cli(*args, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    helper = path.parent / "scoring_d.py"
    helper.write_text(helper.read_text(encoding="utf-8").replace("len(", "0 + len("), encoding="utf-8")
    edited = memlab_cli(*args, timeout=600)
    assert edited.returncode == 2, edited.stdout[-2000:]
    assert "cannot resume" in edited.stderr and "row helped_d" in edited.stderr, edited.stderr
    assert re.search(r"backend\.code\.scoring_d\.py: \"\w{16}\" -> \"\w{16}\"", edited.stderr), edited.stderr
    assert "backend.code.helped_d_plugin.py" not in edited.stderr, "the plugin file itself did not change"


def _editable_distribution(root: Path, package: str) -> None:
    info = root / f"{package}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n", encoding="utf-8")
    (info / "direct_url.json").write_text(
        json.dumps({"url": f"file://{root}", "dir_info": {"editable": True}}), encoding="utf-8"
    )
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("X = 1\n", encoding="utf-8")


def test_an_editable_install_is_fingerprinted_by_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _editable_distribution(tmp_path, "editable_e")
    monkeypatch.syspath_prepend(str(tmp_path))
    editable_code_hash.cache_clear()
    before = editable_code_hash("editable_e", "editable_e.backend")
    assert before is not None and before.startswith("editable_e sha256:")
    (tmp_path / "editable_e" / "__init__.py").write_text("X = 2\n", encoding="utf-8")
    editable_code_hash.cache_clear()
    assert editable_code_hash("editable_e", "editable_e.backend") != before, "the same version, other code"
    assert editable_code_hash("memlab-not-installed", "x") is None
    editable_code_hash.cache_clear()
    sys.modules.pop("editable_e", None)
