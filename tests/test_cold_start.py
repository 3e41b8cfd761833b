"""Cold start: the commands that load no model import no model library, and BM25 never imports JAX.

Each check runs in a fresh interpreter (a subprocess): what an earlier test imported must not hide
an import. Speed is measured by benchmarks/bench_gpu.py, never here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "sentence_transformers", "faiss", "jax")


def _python(code: str, *, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    paths = [str(extra_path)] if extra_path else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("argv", [["--help"], ["backends"], ["run", "--help"]], ids=" ".join)
def test_commands_without_a_model_import_no_model_library(argv: list[str]) -> None:
    code = f"""
import contextlib, io, json, sys
import memlab.cli
with contextlib.redirect_stdout(io.StringIO()):
    try:
        memlab.cli.main({argv!r})
    except SystemExit:
        pass
print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


# It leaves a marker rather than failing: bm25s imports jax inside try/except (ImportError, RuntimeError).
FAKE_JAX = """
import os
open(os.environ["MEMLAB_TEST_JAX_MARKER"], "w").close()
"""


@pytest.fixture()
def fake_jax(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A ``jax`` package that leaves a marker file when imported."""
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text(FAKE_JAX, encoding="utf-8")
    marker = tmp_path / "jax-was-imported"
    monkeypatch.setenv("MEMLAB_TEST_JAX_MARKER", str(marker))
    return tmp_path, marker


def test_the_fake_jax_catches_an_import_of_bm25s(fake_jax: tuple[Path, Path]) -> None:
    """The control: importing the bm25s package imports jax (its selection module), so the check below can fail."""
    path, marker = fake_jax
    done = _python("import bm25s", extra_path=path)
    assert done.returncode == 0, done.stderr
    assert marker.exists()


def test_rag_and_a_bm25_ingest_never_import_jax(fake_jax: tuple[Path, Path], tmp_path: Path) -> None:
    """Nor the bm25s package, nor the nltk package (its __init__ imports most of NLTK and scipy.stats)."""
    path, marker = fake_jax
    code = f"""
import sys
import memlab_plugins.rag
from memlab_plugins.rag import RagMemory
from memlab.testing import session
memory = RagMemory({{"embedder": "hashing", "lexical": "bm25"}}, data_dir={str(tmp_path / "data")!r})
memory.ingest(session("s1", ("user", "I went hiking in the Alps"), ("assistant", "Hikes are fun"), ("user", "I like tea")), user_id="u")
hits = memory.retrieve("hiking trips", user_id="u")
assert hits.items and "hik" in hits.items[0].text.lower(), hits
print(sorted(m for m in sys.modules if m in ("jax", "nltk") or m.startswith(("jax.", "bm25s", "nltk."))))
"""
    done = _python(code, extra_path=path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert not marker.exists()
