"""The ``memlab`` command line: run, report, demo, backends, readers, serve.

Plugin settings use dotted options: ``--rag.top-k 5`` sets ``top_k`` in the config of backend
``rag``; ``--reader.<key>`` goes to the reader, ``--llm.<key>`` into the reader's ``llm`` settings.
Values are parsed as JSON when they parse (numbers, true/false, lists), else kept as strings.
A run config file (``--config run.json``, or YAML when PyYAML is installed) holds the same settings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memlab.config_files import read_config_file
from memlab.errors import MemlabError


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_dotted(tokens: list[str]) -> dict[str, dict[str, Any]]:
    """``['--rag.top-k', '5', '--llm.base-url=http://x']`` -> ``{'rag': {'top_k': 5}, 'llm': {...}}``."""
    out: dict[str, dict[str, Any]] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or "." not in token:
            raise MemlabError(f"unrecognised argument {token!r} (plugin options look like --NAME.KEY VALUE)")
        key, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 >= len(tokens) or (tokens[i + 1].startswith("--") and "." in tokens[i + 1]):
                value = "true"  # a bare flag
            else:
                i += 1
                value = tokens[i]
        section, _, field = key.partition(".")
        if not section or not field:
            raise MemlabError(f"bad plugin option {token!r}: expected --NAME.KEY")
        target = out.setdefault(section, {})
        parts = field.replace("-", "_").split(".")
        for part in parts[:-1]:  # --rag.index.ef-search 64 -> {"index": {"ef_search": 64}}
            target = target.setdefault(part, {})
        target[parts[-1]] = _parse_value(value)
        i += 1
    return out


def build_run_config(args: argparse.Namespace, extra: list[str]) -> Any:
    from memlab.runner import BackendSpec, ReaderSpec, RunConfig

    data: dict[str, Any] = read_config_file(args.config, "run config") if args.config else {}
    dotted = parse_dotted(extra)
    if args.dataset:
        data["dataset"] = args.dataset
    if args.out:
        data["out"] = args.out
    if args.backends:
        data["backends"] = [{"name": n.strip()} for n in args.backends.split(",") if n.strip()]
    if args.reader:
        data["reader"] = {"name": args.reader, "config": data.get("reader", {}).get("config", {})}
    if args.no_controls:
        data["controls"] = False
    if args.max_questions is not None:  # 0 must be refused by RunConfig, not silently mean "all"
        data["max_questions"] = args.max_questions
    if args.contexts:
        data["contexts"] = args.contexts.split(",")
    if args.executor:
        data["executor"] = args.executor
    if getattr(args, "ray_address", None):
        data.setdefault("executor_options", {})["address"] = args.ray_address
    if args.workers is not None:
        data.setdefault("executor_options", {})["workers"] = args.workers
    if args.retries is not None:
        data.setdefault("executor_options", {})["retries"] = args.retries
    if args.no_progress:
        data["progress"] = False
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise MemlabError(f"invalid run config ({args.config or 'command line'}):\n{exc}") from exc
    # Dotted options: backends by name or label, then the reader and its LLM.
    reader_config = dict(config.reader.config)
    reader_config.update(dotted.pop("reader", {}))
    if "llm" in dotted:
        reader_config["llm"] = {**reader_config.get("llm", {}), **dotted.pop("llm")}
    specs = []
    for spec in config.backends:
        overrides = dotted.pop(spec.display, None) or dotted.get(spec.name) or {}
        specs.append(BackendSpec(name=spec.name, label=spec.label, config={**spec.config, **overrides}))
    for spec in config.backends:
        dotted.pop(spec.name, None)
    if dotted:
        raise MemlabError(
            f"options for {sorted(dotted)} match no chosen backend ({', '.join(s.display for s in specs)}), "
            "'reader' or 'llm'"
        )
    return config.model_copy(update={"backends": specs, "reader": ReaderSpec(name=config.reader.name, config=reader_config)})


def _print_report(run_dir: Path, plots: bool) -> None:
    from memlab import report

    summary = report.load_run(run_dir)
    print(report.terminal_table(summary))
    for extra in (report.paired_table(summary), report.distance_table(summary),
                  report.metrics_table(summary, per_type=False)):
        if extra:
            print()
            print(extra)
    if summary.failed_jobs:
        print(f"\n{len(summary.failed_jobs)} job(s) failed:")
        for job in summary.failed_jobs:
            print(f"  {job['backend']} / {job['context_id'][:16]}: {job['error']}")
    if summary.data_issues:
        print(f"\n{len(summary.data_issues)} data issue(s), first: {summary.data_issues[0]}")
    if plots:
        path = report.write_report(run_dir)
        print(f"\nreport and plots: {path.parent}")


# --------------------------------------------------------------------------- commands
def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.runner import run

    config = build_run_config(args, extra)
    print(f"memlab run: dataset={config.dataset} backends={','.join(b.display for b in config.backends)} "
          f"reader={config.reader.name} out={config.out}", file=sys.stderr)
    run(config)
    _print_report(Path(config.out), plots=not args.no_plots)
    return 0


def cmd_demo(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.demo import run_demo

    if extra:
        raise MemlabError(f"unrecognised arguments: {' '.join(extra)}")
    return run_demo(args.dataset, Path(args.out), progress=not args.no_progress)


def cmd_report(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise MemlabError(f"unrecognised arguments: {' '.join(extra)}")
    _print_report(Path(args.run_dir), plots=not args.no_plots)
    return 0


def _print_plugins(registry: Any) -> None:
    rows = registry.info()
    width = max((len(r.name) for r in rows), default=4)
    for row in rows:
        if row.available:
            caps = f" [{', '.join(row.capabilities)}]" if row.capabilities else ""
            print(f"{row.name:<{width}}  available    {row.description}{caps}")
        else:
            print(f"{row.name:<{width}}  UNAVAILABLE  {row.reason}")


def cmd_backends(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.registry import backends

    _print_plugins(backends)
    return 0


def cmd_readers(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.registry import readers

    _print_plugins(readers)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memlab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run_p = sub.add_parser("run", help="evaluate backends on a dataset (resumes an interrupted run)")
    run_p.add_argument("--dataset", help="synthetic | personamem:32k|128k|1M | <folder> | locomo:<file>")
    run_p.add_argument("--backends", help="comma-separated backend names (see `memlab backends`)")
    run_p.add_argument("--reader", help="reader name (default: embedding)")
    run_p.add_argument("--out", help="run directory (default: runs/latest)")
    run_p.add_argument("--config", help="run config file (JSON, or YAML with PyYAML)")
    run_p.add_argument("--no-controls", action="store_true", help="skip the blind controls")
    run_p.add_argument("--max-questions", type=int, help="at most N questions per history")
    run_p.add_argument("--contexts", help="comma-separated history ids to run")
    run_p.add_argument("--executor", choices=["local", "process", "ray"], help="where jobs run (default local)")
    run_p.add_argument("--ray-address", help="Ray cluster address for --executor ray (auto, ray://host:10001)")
    run_p.add_argument("--workers", type=int, help="parallel workers for process/ray executors")
    run_p.add_argument("--retries", type=int, help="retries of a failed job for process/ray executors (default 2)")
    run_p.add_argument("--no-plots", action="store_true")
    run_p.add_argument("--no-progress", action="store_true")
    run_p.set_defaults(func=cmd_run)

    demo_p = sub.add_parser("demo", help="offline demo on synthetic data: table and plots")
    demo_p.add_argument("--dataset", default=None, help="default: the calibrated synthetic set in memlab.demo")
    demo_p.add_argument("--out", default="runs/demo")
    demo_p.add_argument("--no-progress", action="store_true")
    demo_p.set_defaults(func=cmd_demo)

    report_p = sub.add_parser("report", help="tables and plots from a run directory's result files")
    report_p.add_argument("run_dir")
    report_p.add_argument("--no-plots", action="store_true")
    report_p.set_defaults(func=cmd_report)

    sub.add_parser("backends", help="list memory backends").set_defaults(func=cmd_backends)
    sub.add_parser("readers", help="list readers").set_defaults(func=cmd_readers)
    sub.add_parser("serve", help="REST memory service (memlab serve --help)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    if argv and argv[0] == "serve":
        from memlab.server.cli import main as serve_main

        return serve_main(argv[1:])
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    try:
        return int(args.func(args, extra) or 0)
    except (MemlabError, ValidationError) as exc:
        print(f"memlab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
