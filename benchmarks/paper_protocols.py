"""The PersonaMem paper's table in one run: full_context read by the official long-context protocol
(`personamem`) beside rag with the reference-baseline preset read by the baseline protocol
(`personamem_baseline`), against memlab's recording server scripted to answer by a hash of the prompt
(no model, loopback only). Then `memlab compare` prints the table and the paired tests.

    python benchmarks/paper_protocols.py runs/paper [--dataset ../shared/data/personamem/128k-dev]

The scripted answers make the accuracy meaningless; what it shows is the plumbing: one run, a reader
per row, one fingerprint per row, the served model recorded in each row, one comparison. For real
numbers, drop the server and pass --llm.model (and --llm.base-url) to `memlab run --config`.
The rag row uses `embedder: minilm` because BAAI/bge-m3 is not available offline (docs/llm.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from memlab.cli import main
from memlab.testing.recording_server import RecordingServer

DEFAULT_DATASET = str(Path(__file__).resolve().parents[2] / "shared" / "data" / "personamem" / "128k-dev")


def scripted_reply(body: dict[str, Any]) -> str:
    """A letter from a hash of the prompt, in the form each protocol asks for."""
    text = "\n".join(str(m.get("content", "")) for m in body["messages"])
    letter = "abcd"[hashlib.sha256(text.encode()).digest()[0] % 4]
    if body.get("response_format", {}).get("type") == "json_schema":
        return json.dumps({"answer": letter.upper()})
    return f"The user would want this.\n<final_answer>({letter})"


def run_config(dataset: str, out: Path) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "out": str(out),
        "backends": [
            {"name": "full_context", "reader": "personamem"},
            {
                "name": "rag",
                "config": {"preset": "personamem-baseline", "embedder": "minilm"},
                "reader": "personamem_baseline",
            },
        ],
        "reader": {"name": "personamem_baseline"},
    }


def main_cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    config_path = args.out.parent / f"{args.out.name}.config.json"
    config_path.write_text(json.dumps(run_config(args.dataset, args.out), indent=2), encoding="utf-8")
    with RecordingServer(scripted_reply, model_id="scripted-4o-mini") as server:
        code = main(
            [
                "run",
                "--config",
                str(config_path),
                "--no-progress",
                "--no-plots",
                "--llm.base-url",
                server.base_url,
                "--llm.api-key",
                "test",
                "--llm.max-concurrency",
                "8",
            ]
        )
        print(f"requests answered by the scripted server: {len(server.requests)}", file=sys.stderr)
    if code != 0:
        return code
    return main(["compare", str(args.out)])


if __name__ == "__main__":
    sys.exit(main_cli())
