"""The ``memlab`` command line: run, report, compare, ui, demo, repair-predictions, backends, readers, serve, mcp.

Plugin settings use dotted options: ``--rag.top-k 5`` sets ``top_k`` in the config of backend
``rag`` (by name or by label); ``--reader.<key>`` goes to the reader, ``--llm.<key>`` into the
reader's ``llm`` settings, ``--judge.<key>`` into the judge's LLM settings. Values are parsed as JSON
when they parse (``5``, ``0.5``, ``true``, ``null``, ``["user"]``), else kept as strings; every
dotted option needs a value (``--rag.top-k`` followed by another option is an error). A run config
file (``--config run.json``, or YAML) holds the same settings; see docs/core.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memlab.config_files import parse_dotted_options, read_config_file
from memlab.errors import ConfigurationError, MemlabError, RunInterrupted, UnknownNameError

RUN_EPILOG = """plugin options:
  --NAME.KEY VALUE     set KEY in the config of backend NAME (name or label), e.g. --rag.top-k 5;
                       nested keys: --rag.index.ef-search 64; also --NAME.KEY=VALUE
  --reader.KEY VALUE   reader config, e.g. --reader.embedder hashing
  --llm.KEY VALUE      the reader's LLM, e.g. --llm.base-url http://127.0.0.1:8000/v1 --llm.model m
                       --llm.max-concurrency 16 (questions answered at once)
  --judge.KEY VALUE    the judge's LLM (default: the reader's --llm settings), e.g. --judge.model gpt-4o
  VALUE is parsed as JSON when it parses (5, 0.5, true, null, ["user"], {"a": 1}), else used as the
  string given. Every option needs a value: write --profile.verbose true, not --profile.verbose.

exit status: 0 when every job finished and no question ended in an error; 1 otherwise (what failed
is printed, full tracebacks are in OUT/errors.log, -v prints them); 2 for a usage or input error;
130 / 143 when stopped by Ctrl-C / SIGTERM (rerun the same command to resume).
"""


def build_run_config(args: argparse.Namespace, extra: list[str]) -> Any:
    from memlab.memory import config_problems
    from memlab.run.spec import JudgeSpec, ReaderSpec, RunConfig

    data: dict[str, Any] = read_config_file(args.config, "run config") if args.config else {}
    dotted = parse_dotted_options(extra)
    if args.dataset:
        data["dataset"] = args.dataset
    if args.out:
        data["out"] = args.out
    if args.backends:
        data["backends"] = [{"name": n.strip()} for n in args.backends.split(",") if n.strip()]
    if args.reader:
        data["reader"] = {"name": args.reader, "config": data.get("reader", {}).get("config", {})}
    if args.readers:
        data["readers"] = [n.strip() for n in args.readers.split(",") if n.strip()]
    if args.no_controls:
        data["controls"] = False
    if args.max_questions is not None:  # 0 must be refused by RunConfig, not silently mean "all"
        data["max_questions"] = args.max_questions
    for key in ("sample", "seed", "answer_runs"):
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
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
    if args.replay:
        data["replay"] = args.replay
    if args.device:
        data["device"] = args.device
    if args.plugin:
        data["plugins"] = [*data.get("plugins", []), *args.plugin]
    if args.judge or args.judge_runs is not None:
        judge_data = dict(data.get("judge") or {})
        if args.judge:
            judge_data["prompt"] = args.judge
        if args.judge_runs is not None:
            judge_data["runs"] = args.judge_runs
        data["judge"] = judge_data
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        where = args.config or "command line"
        raise ConfigurationError(f"invalid run config ({where}): {config_problems(RunConfig, exc)}") from exc
    # Dotted options: backends by name or label, then the reader and its LLM.
    reader_config = dict(config.reader.config)
    reader_config.update(dotted.pop("reader", {}))
    if "llm" in dotted:
        reader_config["llm"] = {**reader_config.get("llm", {}), **dotted.pop("llm")}
    judge_llm = dotted.pop("judge", None)
    judge = config.judge
    if judge_llm is not None and judge is None:
        raise MemlabError("--judge.* options need --judge mem0|memlab|longmemeval|personamem_v2")
    if judge is not None:
        # The judge's LLM defaults to the reader's (endpoint, model, key), overridden by --judge.*.
        judge = JudgeSpec(
            prompt=judge.prompt, runs=judge.runs, llm={**reader_config.get("llm", {}), **judge.llm, **(judge_llm or {})}
        )
    specs = []
    for spec in config.backends:
        overrides = dotted.pop(spec.display, None) or dotted.get(spec.name) or {}
        specs.append(spec.model_copy(update={"config": {**spec.config, **overrides}}))
    for spec in config.backends:
        dotted.pop(spec.name, None)
    if dotted:
        raise MemlabError(
            f"options for {sorted(dotted)} match no chosen backend ({', '.join(s.display for s in specs)}), "
            "'reader' or 'llm'"
        )
    resolved = config.model_copy(
        update={"backends": specs, "judge": judge, "reader": ReaderSpec(name=config.reader.name, config=reader_config)}
    )
    _check_rows(resolved, args.config)
    return resolved


def _check_rows(config: Any, config_file: str | None) -> None:
    """Each row's backend and settings and every reader's, checked before any work; errors name the file and the row."""
    from memlab.memory import parse_plugin_config
    from memlab.registry import backends, load_plugin, readers

    for reference in config.plugins:
        load_plugin(reference)
    source = f"{config_file}: " if config_file else ""
    for spec in config.backends:
        try:
            backends.get(spec.name).parse_config(spec.config)
        except (ConfigurationError, UnknownNameError) as exc:
            row = f"backend row {spec.display!r}" + (f" ({spec.name})" if spec.display != spec.name else "")
            raise ConfigurationError(f"{source}{row}: {exc}") from exc
    try:
        for reader in config.all_readers():
            parse_plugin_config(readers.get(reader.name).Config, reader.config, f"reader {reader.name!r}")
    except (ConfigurationError, UnknownNameError) as exc:
        raise ConfigurationError(f"{source}reader: {exc}") from exc


def _print_report(run_dir: Path, plots: bool) -> None:
    from memlab import report

    summary = report.load_run(run_dir)
    blocks = (
        report.terminal_table(summary),
        report.paired_table(summary),
        report.distance_table(summary),
        report.field_tables(summary),
        report.metrics_table(summary, per_type=False),
        report.traceability_text(summary),
        report.failed_jobs_text(summary),
    )
    print("\n\n".join(block for block in blocks if block))
    if summary.data_issues:
        print(f"\n{len(summary.data_issues)} data issue(s), first: {summary.data_issues[0]}")
    if plots:
        path = report.write_report(run_dir)
        print(f"\nreport and plots: {path.parent}")
    print(f"browse it question by question: memlab ui {run_dir}  (docs/ui.md)")


# --------------------------------------------------------------------------- commands
def _run_and_report(config: Any, args: argparse.Namespace, plots: bool) -> int:
    from memlab.run.driver import ERRORS_FILE, run_with_details  # the run's imports: only when a run is asked for

    result = run_with_details(config)
    _print_report(Path(config.out), plots=plots)
    if not result.failed:
        return 0
    rows_with_errors = [r for r in result.summary.rows if r.errors]
    questions = sum(r.errors for r in rows_with_errors)
    print(
        f"\nmemlab: {len(result.summary.failed_jobs)} job(s) failed, {questions} question(s) ended in an error:",
        file=sys.stderr,
    )
    for job in result.summary.failed_jobs:
        print(f"  job {job['backend']} / {job['reader']} x {job['context_id'][:24]}: {job['error']}", file=sys.stderr)
    for row in rows_with_errors:
        print(
            f"  {row.backend} / {row.reader}: {row.errors} of {row.questions} questions ended in an error",
            file=sys.stderr,
        )
    if getattr(args, "verbose", False):
        for record in result.errors:
            print(f"\n--- {record.what}: {record.message}\n{record.traceback.rstrip()}", file=sys.stderr)
    print(
        f"full tracebacks: {Path(config.out) / ERRORS_FILE}"
        + ("" if getattr(args, "verbose", False) else " (or rerun with -v)"),
        file=sys.stderr,
    )
    return 1


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    config = build_run_config(args, extra)
    readers = ",".join(dict.fromkeys(r.name for r in config.all_readers()))
    defaulted = not args.dataset and "dataset" not in config.model_fields_set
    print(
        f"memlab run: dataset={config.dataset}{' (the default: no --dataset given)' if defaulted else ''} backends={','.join(b.display for b in config.backends)} "
        f"readers={readers} replay={config.replay} out={config.out} cache={config.resolved_cache_dir()}",
        file=sys.stderr,
    )
    return _run_and_report(config, args, plots=not args.no_plots)


def cmd_demo(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.demo import run_demo

    if extra:
        raise MemlabError(f"unrecognised arguments: {' '.join(extra)}")
    return run_demo(args.dataset, Path(args.out), progress=not args.no_progress)


def cmd_repair(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.results import PREDICTIONS_FILE, REJECTS_FILE, repair_predictions

    if extra:
        raise MemlabError(f"unrecognised arguments: {' '.join(extra)}")
    kept, rejected = repair_predictions(args.run_dir)
    where = Path(args.run_dir)
    if rejected:
        print(
            f"{where / PREDICTIONS_FILE}: kept {kept} line(s), moved {rejected} unreadable line(s) to "
            f"{where / REJECTS_FILE}; rerun the same memlab run command to answer those questions again"
        )
    else:
        print(f"{where / PREDICTIONS_FILE}: all {kept} line(s) readable, nothing to repair")
    return 0


def cmd_report(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise MemlabError(f"unrecognised arguments: {' '.join(extra)}")
    _print_report(Path(args.run_dir), plots=not args.no_plots)
    return 0


def cmd_ui(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.ui.server import make_server, url_of

    if extra:
        raise MemlabError(f"unrecognised arguments: {' '.join(extra)}")
    try:
        server = make_server(args.run_dirs, host=args.host, port=args.port)
    except OSError as exc:
        raise MemlabError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    print(f"memlab ui: {url_of(server)}  (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nmemlab ui: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def cmd_compare(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.report import compare

    if extra:
        raise MemlabError(f"unrecognised arguments: {' '.join(extra)}")
    out = Path(args.out) if args.out else None
    if out is not None and not out.parent.is_dir():
        raise MemlabError(f"--out {out}: the directory {out.parent} does not exist")
    if args.diff:
        diff = compare.diff_rows(args.run_dirs, args.diff[0], args.diff[1])
        print(compare.render_diff(diff, "plain"), end="")
        if out is not None:
            fmt = args.format or _format_of(out, default="md")
            compare.write_text(out, compare.render_diff(diff, fmt))
            print(f"\ndiff written to {out}")
        return 0
    comparison = compare.compare_runs(args.run_dirs)
    if out is None:
        print(compare.render_comparison(comparison, args.format or "plain"), end="")
    else:
        fmt = args.format or _format_of(out, default="md")
        if fmt == "csv":  # one file per table: FILE.accuracy.csv, FILE.pairwise.csv (each readable as one frame)
            written = [
                compare.write_text(out.with_suffix(f".{name}.csv"), text)
                for name, text in compare.csv_tables(comparison).items()
            ]
        else:
            written = [compare.write_text(out, compare.render_comparison(comparison, fmt))]
        if fmt != "json":  # the machine-readable record (pairwise p and p_adjusted) goes beside every export
            written.append(compare.write_text(out.with_suffix(".json"), compare.render_comparison(comparison, "json")))
        print(compare.render_comparison(comparison, "plain"), end="")
        print("\nwritten: " + ", ".join(str(p) for p in written))
    if args.plot:
        path = compare.plot_comparison(comparison, args.plot, x=args.plot_x)
        print(f"plot: {path}")
    return 0


def _format_of(path: Path, default: str) -> Any:
    """The export format a file name asks for (``.md``, ``.csv``, ``.tex``, ``.json``, ``.txt``)."""
    return {".md": "md", ".csv": "csv", ".tex": "latex", ".json": "json", ".txt": "plain"}.get(
        path.suffix.lower(), default
    )


def _print_plugins(registry: Any) -> None:
    rows = registry.info()
    width = max((len(r.name) for r in rows), default=4)
    for row in rows:
        if row.available:
            caps = f" [{', '.join(row.capabilities)}]" if row.capabilities else ""
            print(f"{row.name:<{width}}  available    {row.description}{caps}")
        else:
            print(f"{row.name:<{width}}  UNAVAILABLE  {row.reason}")


def _print_plugin(registry: Any, name: str) -> None:
    """``--show NAME``: what the plugin is, who provides it, and every config field."""
    shown = registry.show(name)
    provider = f"{shown['package']} {shown['version'] or ''}".strip() if shown["package"] else "registered in-process"
    print(f"{shown['kind']} {shown['name']}: {shown['description']}")
    print(f"  class:        {shown['target']}")
    print(f"  provided by:  {provider}")
    if shown["kind"] == "backend":
        print(f"  capabilities: {', '.join(shown['capabilities']) or 'none'}")
    print("  config (--%s.KEY VALUE):" % (shown["name"] if shown["kind"] == "backend" else "reader"))
    if not shown["config"]:
        print("    (no settings)")
    for field in shown["config"]:
        default = "required" if field["required"] else f"default {json.dumps(field['default'], default=str)}"
        print(f"    {field['name'].replace('_', '-')}: {field['type']}, {default}")
        if field["description"]:
            print(f"        {field['description']}")


def _plugins_command(registry: Any, args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.registry import load_plugin

    if extra:
        raise MemlabError(f"unrecognised arguments: {' '.join(extra)}")
    for reference in args.plugin or []:
        load_plugin(reference)
    if args.show:
        _print_plugin(registry, args.show)
    else:
        _print_plugins(registry)
    return 0


def cmd_backends(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.registry import backends

    return _plugins_command(backends, args, extra)


def cmd_readers(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.registry import readers

    return _plugins_command(readers, args, extra)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memlab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run_p = sub.add_parser(
        "run",
        help="evaluate backends on a dataset (resumes an interrupted run)",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Evaluate backends on a dataset. Rerunning the same command into the same --out resumes; "
        "a row whose settings changed is refused (use a new --out or a distinct label).",
    )
    run_p.add_argument(
        "--dataset",
        help="synthetic[:personas=N,seed=S,...] | personamem:32k|128k|1M | <folder> | locomo:<file> | "
        "longmemeval:... | personamem-v2:... (default: synthetic, the generated offline set, 2 personas)",
    )
    run_p.add_argument("--backends", help="comma-separated backend names (see `memlab backends`; default: rag)")
    run_p.add_argument("--reader", help="reader name (default: embedding)")
    run_p.add_argument(
        "--readers",
        help="comma-separated readers: every backend is run with each (rows of a run config may name their own)",
    )
    run_p.add_argument("--out", help="run directory (default: runs/latest)")
    run_p.add_argument(
        "--config",
        help="run config file (JSON, or YAML): the same settings, with labels for sweeps; "
        "format and an example in docs/core.md (Running an evaluation)",
    )
    run_p.add_argument("--no-controls", action="store_true", help="skip the blind controls")
    run_p.add_argument("--max-questions", type=int, help="at most N questions per history")
    run_p.add_argument(
        "--sample",
        choices=["first", "stratified"],
        help="with --max-questions: the first N (default), or N keeping every question type in proportion",
    )
    run_p.add_argument("--seed", type=int, help="seed of --sample stratified (default 0)")
    run_p.add_argument(
        "--answer-runs",
        type=int,
        help="answer each multiple-choice question N times; rows report accuracy mean and std (accuracy_std)",
    )
    run_p.add_argument("--contexts", help="comma-separated history ids to run")
    run_p.add_argument("--executor", choices=["local", "process", "ray"], help="where jobs run (default local)")
    run_p.add_argument("--ray-address", help="Ray cluster address for --executor ray (auto, ray://host:10001)")
    run_p.add_argument("--workers", type=int, help="parallel workers for process/ray executors")
    run_p.add_argument("--retries", type=int, help="retries of a failed job for process/ray executors (default 2)")
    run_p.add_argument(
        "--replay",
        choices=["once", "rebuild"],
        help="once (default): one replay per history; rebuild: each question sees the memory a "
        "fresh replay of exactly the turns before it builds",
    )
    run_p.add_argument(
        "--judge",
        choices=["mem0", "memlab", "longmemeval", "personamem_v2"],
        help="LLM judge for open answers (LoCoMo: mem0's prompt; LongMemEval: its per-type prompts; "
        "PersonaMem-v2 with --reader personamem_v2 --reader.mode open: its narrow judge, mean score)",
    )
    run_p.add_argument("--judge-runs", type=int, help="judgments per answer (mean and std are reported)")
    run_p.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE:CLASS",
        help="register an unpackaged backend or reader first: path/to/file.py:Class or module:Class "
        "(repeatable; see docs/plugins.md)",
    )
    run_p.add_argument(
        "--device",
        metavar="cuda|cuda:N|cpu|auto",
        help="where every model of the run goes (embedders, the embedding reader, BGE-M3, local LLMs) unless "
        "its plugin names one (--rag.device, --reader.device, --llm.device win); auto: a GPU where torch sees one. "
        "Default: cpu (local LLMs: auto)",
    )
    run_p.add_argument("-v", "--verbose", action="store_true", help="print full tracebacks of failures")
    run_p.add_argument("--no-plots", action="store_true")
    run_p.add_argument("--no-progress", action="store_true")
    run_p.set_defaults(func=cmd_run)

    demo_p = sub.add_parser("demo", help="offline demo on synthetic data: table and plots")
    demo_p.add_argument("--dataset", default=None, help="default: the calibrated synthetic set in memlab.demo")
    demo_p.add_argument("--out", default="runs/demo")
    demo_p.add_argument("--no-progress", action="store_true")
    demo_p.add_argument("-v", "--verbose", action="store_true", help="print full tracebacks of failures")
    demo_p.set_defaults(func=cmd_demo)

    repair_p = sub.add_parser(
        "repair-predictions", help="move unreadable lines of a run's predictions.jsonl to predictions.rejects.jsonl"
    )
    repair_p.add_argument("run_dir")
    repair_p.set_defaults(func=cmd_repair)

    report_p = sub.add_parser("report", help="tables and plots from a run directory's result files")
    report_p.add_argument("run_dir")
    report_p.add_argument("--no-plots", action="store_true")
    report_p.set_defaults(func=cmd_report)

    compare_p = sub.add_parser(
        "compare",
        help="one table of the rows of several runs, paired tests between every two rows, exports, per-question diff",
        description="Compare the rows of one or several run directories: accuracy with 95% CI, per type, context "
        "tokens, cost, retrieve latency p50/p95, and an exact McNemar test between every two rows on the questions "
        "both scored (p adjusted by Holm's method). Rows on datasets with different content hashes are not paired. "
        "--diff ROW_A ROW_B lists the questions two rows answer differently.",
    )
    compare_p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    compare_p.add_argument(
        "--format",
        choices=["md", "csv", "latex", "json", "plain"],
        help="export format (default: from --out's suffix .md/.csv/.tex/.json, else md; the terminal gets plain)",
    )
    compare_p.add_argument(
        "--out",
        metavar="FILE",
        help="write the export here (and FILE.json beside it); FILE.csv writes one CSV per table: "
        "FILE.accuracy.csv and FILE.pairwise.csv",
    )
    compare_p.add_argument(
        "--diff",
        nargs=2,
        metavar=("ROW_A", "ROW_B"),
        help="questions the two rows answer differently (rows as backend/reader, e.g. rag/embedding[minilm], "
        "or a backend label naming one row; run:backend/reader with several runs)",
    )
    compare_p.add_argument("--plot", metavar="PNG", help="draw accuracy against context tokens (or cost) here")
    compare_p.add_argument("--plot-x", choices=["tokens", "cost"], default="tokens")
    compare_p.set_defaults(func=cmd_compare)

    ui_p = sub.add_parser(
        "ui",
        help="web pages of runs: rows, paired tests, plots, and every question with each row's pick and context",
        description="Serve the runs explorer (docs/ui.md): / (rows, McNemar/Holm matrix, plots), /questions "
        "(filter, sort, page) and /questions/<id> (options, picks, scores, retrieved turns with provenance). Reads "
        "only the result files; a run in progress shows new predictions on reload.",
    )
    ui_p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    ui_p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ui_p.add_argument("--port", type=int, default=8700, help="port (default 8700; 0 picks a free one)")
    ui_p.set_defaults(func=cmd_ui)

    for kind, func in (("backends", cmd_backends), ("readers", cmd_readers)):
        list_p = sub.add_parser(kind, help=f"list {kind}, or --show NAME: its settings, capabilities and package")
        list_p.add_argument(
            "--show",
            metavar="NAME",
            help="every config field (type, default, description) of NAME: a plugin, or the distribution "
            "that provides one",
        )
        list_p.add_argument(
            "--plugin", action="append", metavar="MODULE:CLASS", help="register an unpackaged plugin first"
        )
        list_p.set_defaults(func=func)
    sub.add_parser("serve", help="REST memory service (memlab serve --help)", add_help=False)
    sub.add_parser("mcp", help="memory as MCP tools for agents (memlab mcp --help)", add_help=False)
    compact_p = sub.add_parser(
        "compact-store",
        help="rewrite memlab's PostgreSQL tables (VACUUM FULL) so deleted text leaves the table files",
    )
    compact_p.add_argument("--store", required=True, metavar="postgresql://...", help="the store's database URL")
    compact_p.set_defaults(func=cmd_compact_store)
    return parser


def cmd_compact_store(args: argparse.Namespace, extra: list[str]) -> int:
    from memlab.pg import compact_store

    for table in compact_store(args.store):
        print(f"rewritten: {table}")
    print(
        "deleted rows are gone from these tables' files; WAL segments and backups taken before still hold "
        "them until they are recycled or expire (docs/chatbot.md: Deleting data on PostgreSQL)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    if argv and argv[0] == "serve":
        from memlab.server.cli import main as serve_main

        return serve_main(argv[1:])
    if argv and argv[0] == "mcp":
        from memlab.mcp_server import main as mcp_main

        return mcp_main(argv[1:])
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    try:
        return int(args.func(args, extra) or 0)
    except RunInterrupted as exc:
        print(f"\nmemlab: {exc}", file=sys.stderr)
        return 143 if exc.signal_name == "SIGTERM" else 130
    except KeyboardInterrupt:  # outside a run (loading, reporting): nothing to save
        print("\nmemlab: interrupted", file=sys.stderr)
        return 130
    except (MemlabError, ValidationError) as exc:
        print(f"memlab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
