"""Operation precision and recall of the profile's LLM-free extractor on the held-out labelled set.

    python benchmarks/bench_profile_extractor.py            # tests/data/profile_value_ops.jsonl
    python benchmarks/bench_profile_extractor.py --show     # also list misses and extras

How the set was made and what it measures: docs/profile.md ("Measuring the extractor").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from result_files import ExtractorResult  # benchmarks/ is on sys.path as a script

from memlab_plugins.profile.labelled import score

LABELLED = Path(__file__).resolve().parents[1] / "tests" / "data" / "profile_value_ops.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(LABELLED))
    parser.add_argument("--show", action="store_true", help="list the misses and the extras")
    parser.add_argument("--json", type=Path, default=None, help="also write the table's result file here")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.path).read_text(encoding="utf-8").splitlines() if line.strip()]
    result = score(args.path)
    print(f"labelled set: {args.path}")
    print(f"conversations: {len(rows)}  user statements: {sum(len(t) for r in rows for t in r['sessions'])}")
    print(f"operations: expected {result.expected}  predicted {result.predicted}  matched {result.matched}")
    print(f"precision: {result.precision:.3f}  recall: {result.recall:.3f}")
    if args.json:
        ExtractorResult(
            labelled_set=Path(args.path).name,
            conversations=len(rows),
            statements=sum(len(t) for r in rows for t in r["sessions"]),
            expected=result.expected,
            predicted=result.predicted,
            matched=result.matched,
            precision=result.precision,
            recall=result.recall,
        ).save(args.json)
    if args.show:
        for name, items in (("missed", result.misses), ("extra", result.extras)):
            for row_id, op in items:
                print(f"  {name:6} {row_id:10} {op}")


if __name__ == "__main__":
    main()
