"""The README's agent quick starts (MCP over stdio, the LangGraph store), run as written.

Each ```python block of the README's "Memory for agents" section runs with this venv's python in
a fresh directory. Nothing in the blocks is changed. The MCP block starts ``memlab mcp`` as a
desktop agent would, through the SDK, which gives the child only a minimal environment (PATH,
HOME, ...): so the ``memlab`` first on PATH is a two-line wrapper running this checkout's
``memlab.cli`` (an installed memlab is its own ``memlab`` script).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
ROOT = README.parent


def agent_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Memory for agents")
    section = text[start : text.index("\n## ", start + 1)]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def run_block(block: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMLAB_API_KEYS", "MEMLAB_API_KEYS_FILE")}
    bin_dir = cwd / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "memlab"
    wrapper.write_text(
        f'#!/bin/sh\nexec env PYTHONPATH="{ROOT}" HF_HUB_OFFLINE=1 MEM0_TELEMETRY=False "{sys.executable}" -m memlab.cli "$@"\n'
    )
    wrapper.chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update({"HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False"})
    script = cwd / "quickstart.py"
    script.write_text(block, encoding="utf-8")
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_section_has_the_two_quick_starts() -> None:
    blocks = agent_blocks()
    assert len(blocks) == 2
    assert "StdioServerParameters" in blocks[0] and "MemlabStore" in blocks[1]


@pytest.mark.slow  # each block loads MiniLM (rag): ~10-30 s on a busy 2-core machine
@pytest.mark.parametrize("which", ["mcp", "langgraph"])
def test_readme_agent_quickstart_works_as_written(which: str, tmp_path: Path) -> None:
    block = agent_blocks()[0 if which == "mcp" else 1]
    result = run_block(block, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    if which == "mcp":
        assert "I adopted a cat named Pixel." in result.stdout, result.stdout
    else:
        assert result.stdout.strip().splitlines()[-1] == "my cat is called Pixel", result.stdout
    assert (tmp_path / "memdata").is_dir()  # relative --data-dir, as written
