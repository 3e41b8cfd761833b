"""Retrieved items without a turn source are counted and reported as "not traceable" (issue 35): in the
terminal, report.md and summary.json, instead of rows whose retrieval metrics are silently empty."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from run_helpers import run_args
from test_plugin_guide import memlab_cli

from memlab.report import load_run, render_report

SOURCELESS = """
    from memlab import Memory, Retrieval
    from memlab.types import MemoryItem


    class Sourceless(Memory):
        name = "sourceless"
        description = "every turn, newest first, without a source"

        def __init__(self, config=None, *, data_dir=None, cache_dir=None):
            super().__init__(config, data_dir=data_dir, cache_dir=cache_dir)
            self.turns = {}

        def _ingest(self, session, *, user_id, first_turn):
            for i, m in enumerate(session.messages):
                self.turns.setdefault(user_id, []).append(MemoryItem(id=f"{session.id}#{first_turn + i}", text=m.content))

        def _retrieve(self, query, *, user_id, k):
            items = self.turns.get(user_id, [])[-k:]
            return Retrieval(items=items, context="\\n".join(i.text for i in items))

        def _reset(self, user_id):
            self.turns.pop(user_id, None)
"""


def test_items_without_a_source_are_reported_not_traceable(tmp_path: Path) -> None:
    plugin = tmp_path / "sourceless.py"
    plugin.write_text(textwrap.dedent(SOURCELESS), encoding="utf-8")
    out = tmp_path / "run"
    args = run_args(
        out,
        "--plugin",
        f"{plugin}:Sourceless",
        "--reader",
        "embedding",
        "--reader.embedder",
        "hashing",
        "--no-controls",
        backends="sourceless,rag",
        dataset="synthetic:personas=1,sessions=3",
    )
    done = memlab_cli(*args, "--rag.embedder", "hashing", timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["backend"]: row for row in json.loads((out / "summary.json").read_text())["rows"]}
    sourceless, rag = rows["sourceless"], rows["rag"]
    assert sourceless["untraceable_items"] == sourceless["retrieved_items"] > 0
    assert sourceless["untraceable_questions"] == sourceless["questions"]
    assert rag["untraceable_items"] == 0 and rag["retrieved_items"] > 0
    line = (
        f"not traceable: row sourceless / embedding[hashing]: {sourceless['untraceable_items']} of "
        f"{sourceless['retrieved_items']} retrieved items carry no turn source (session_id + turn_index), so "
        f"{sourceless['questions']} of {sourceless['questions']} questions have no retrieval metrics"
    )
    assert line in done.stdout, done.stdout[-3000:]
    assert "row rag" not in done.stdout.split("not traceable:", 1)[1]
    report = render_report(load_run(out))
    assert "## Not traceable" in report and f"- {line}" in report
