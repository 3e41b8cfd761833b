"""The README's REST quick start, run as written: its bash block against a real `memlab serve`.

The block is read from README.md (the ```bash fence in the chatbot section that starts the
service), and run by bash in a fresh directory with this venv's ``memlab`` and ``python`` first on
PATH. The only change made to it is the port: 8080 becomes a free port, because other processes on
this machine may hold 8080.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memlab.testing.server_process import free_port

README = Path(__file__).resolve().parents[1] / "README.md"


def quickstart_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Memory for a chatbot") :]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    found = [b for b in blocks if "memlab serve" in b]
    assert found, "README.md's chatbot section has no bash block that starts memlab serve"
    return found[0]


def json_documents(text: str) -> list[dict]:
    decoder, documents, at = json.JSONDecoder(), [], 0
    while (start := text.find("{", at)) != -1:
        document, at = decoder.raw_decode(text, start)
        documents.append(document)
    return documents


@pytest.mark.slow  # loads MiniLM in the server (profile backend): ~10-20 s on a busy machine
def test_readme_rest_quickstart_works_as_written(tmp_path: Path) -> None:
    block = quickstart_block()
    assert "Content-Type: application/json" in block and "8080" in block
    port = str(free_port())
    script = "set -e\n" + block.replace("8080", port) + "\necho; kill %1; wait %1 || true\n"
    env = {k: v for k, v in os.environ.items() if k not in ("MEMLAB_API_KEYS", "MEMLAB_API_KEYS_FILE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_PROXY"] = env["no_proxy"] = "*"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    bodies = json_documents(result.stdout)  # curl prints bodies without newlines between them
    assert {"status": "ok"} in bodies, result.stdout
    stored, found, exported = [b for b in bodies if b != {"status": "ok"}][:3]
    assert stored["session_id"] == "s1" and stored["first_turn"] == 0 and stored["messages"] == 1, stored
    assert "jazz" in found["context"].lower(), found
    assert exported["user_id"] == "alice" and "jazz" in json.dumps(exported).lower()
    assert "error" not in result.stdout and "Traceback" not in result.stderr, result.stderr
    assert (tmp_path / "memdata").is_dir()  # relative --data-dir, as written
