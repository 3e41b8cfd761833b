"""How soon ``memlab mcp`` answers an agent over stdio: ``initialize``, ``tools/list``, first search.

    python benchmarks/bench_mcp_startup.py [--backend rag] [--runs 5]

Each run starts ``memlab mcp --backend B --data-dir <fresh> --user alice`` as a desktop agent does,
with the official MCP SDK's client (``mcp.Client`` over stdio), and times from the spawn to the
answer of ``initialize`` (the client's handshake), of ``tools/list``, and of the first
``search_memory`` (which waits for the backend to open: rag loads its embedding model). Prints each
run, then p50 and max of each. The machine's load average is printed too: on a shared machine the
SDK's own import dominates the handshake, so each run also times ``python -c "import
mcp.server.mcpserver"`` alone (the floor no server built on the SDK can go under).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


async def one_run(backend: str, data_dir: Path) -> tuple[float, float, float]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False"}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memlab.cli", "mcp", "--backend", backend, "--data-dir", str(data_dir), "--user", "alice"],
        env=env,
    )
    with (data_dir.parent / f"{data_dir.name}.stderr").open("w") as errlog:
        start = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog)) as client:
            initialized = time.perf_counter() - start
            await client.list_tools()
            listed = time.perf_counter() - start
            result = await client.call_tool("search_memory", {"query": "what is my cat called?"})
            searched = time.perf_counter() - start
            if result.is_error:
                raise SystemExit(f"search_memory failed: {result.content}")
    return initialized, listed, searched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="rag", help="served backend (rag: loads its embedding model)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rows: list[tuple[float, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            init, listed, searched = asyncio.run(one_run(args.backend, Path(tmp) / f"data{run}"))
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], check=True)
            floor = time.perf_counter() - start
            rows.append((init, listed, searched, floor))
            print(
                f"run {run + 1}: initialize {init:.2f} s, tools/list {listed:.2f} s, first search {searched:.2f} s "
                f"(SDK import alone {floor:.2f} s)"
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"memlab mcp --backend {args.backend}, {args.runs} runs over stdio (load average {load:.1f}, {os.cpu_count()} CPUs):"
    )
    for index, what in enumerate(("initialize", "tools/list", "first search", "SDK import alone")):
        values = [row[index] for row in rows]
        print(f"  {what}: p50 {statistics.median(values):.2f} s, max {max(values):.2f} s")


if __name__ == "__main__":
    main()
