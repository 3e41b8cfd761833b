"""The comparison notebook runs end to end on a synthetic run directory and shows tables and plots."""

from __future__ import annotations

import base64
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from memlab.results import Prediction, PredictionWriter

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "compare_backends.ipynb"


def _fake_run(run_dir: Path) -> Path:
    """rag/embedding answers 3 of 4, the none control 1 of 4; distances in two buckets."""
    writer = PredictionWriter(run_dir)
    for backend, correct in (("rag", [True, True, True, False]), ("none", [True, False, False, False])):
        for i, ok in enumerate(correct):
            writer.write(
                Prediction(
                    backend=backend,
                    reader="embedding",
                    question_id=f"q{i}",
                    context_id="ctx",
                    question_type="recall_user_shared_facts" if i < 2 else "suggest_new_ideas",
                    distance_tokens=1_000 if i % 2 else 50_000,
                    answer=0,
                    chosen=0 if ok else 1,
                    correct=ok,
                )
            )
    writer.close()
    return run_dir


def test_notebook_is_saved_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_notebook_shows_table_and_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = _fake_run(tmp_path / "nb-run")
    monkeypatch.setenv("MEMLAB_RUN_DIR", str(run_dir))  # the kernel inherits this environment
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # "python3" resolves to this interpreter: jupyter_client swaps a spec's bare "python" for sys.executable.
    client = NotebookClient(
        nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    markdown = "\n".join(o.data["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {}))
    assert "| rag | embedding | 75.0 [30.1, 95.4] | 100.0 | 50.0 | 4 | 0 | 0 |" in markdown
    assert "| none (control) | embedding | 25.0 [4.6, 69.9] | 50.0 | 0.0 | 4 | 0 | 0 |" in markdown
    assert "| Backend | Reader | <4k | 32k-64k |" in markdown  # the distance table
    # the significance tables: each row against the controls, then every two rows (Holm-adjusted)
    assert "| Backend | Reader | vs control | n | wins | losses | p (McNemar) |" in markdown
    assert "### Paired tests between rows" in markdown and "adjusted by Holm" in markdown
    stream = "".join(o.text for o in outputs if o.output_type == "stream")
    assert "run 'nb-run': 2 (backend, reader) rows" in stream

    images = [base64.b64decode(o.data["image/png"]) for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 2
    assert all(img.startswith(b"\x89PNG\r\n\x1a\n") and len(img) > 10_000 for img in images)
    # the notebook only reads the run directory
    assert sorted(p.name for p in run_dir.iterdir()) == ["predictions.jsonl"]
