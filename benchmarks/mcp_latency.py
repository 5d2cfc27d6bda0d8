"""Latency of every MCP tool call, in-process and over stdio, through the SDK's client.

Run: ``.venv/bin/python benchmarks/mcp_latency.py [--calls 20] [--write docs/results.md]``

The warehouse is the one the gate tests use (the mini workspace, the 43 real event logs
and C3O: ~4 700 runs), built in a temporary directory. Each tool is called ``--calls`` times
(the gate-running feature tools 5 times) after one warm-up call; stdio runs ``autofe mcp`` as
a subprocess the way an MCP host launches it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from report import machine, percentile, write_section

from autofe.config import REPO_DIR, IngestSettings, external_data_dir
from autofe.ingest.ingest import ingest
from autofe.tools.server import ServerConfig, build_server

FEATURE = (REPO_DIR / "tests" / "fixtures" / "leakage" / "accept_history_run_count.sql").read_text()
SLOW_TOOLS = {"check_feature", "materialize_feature"}


def calls(eventlogs: Path) -> dict[str, dict[str, Any]]:
    """One representative argument set per tool."""
    feature = {"name": "run_count", "sql": FEATURE, "category": "history"}
    return {
        "describe_schema": {},
        "parse_event_log": {"path": str(eventlogs / "sparklens" / "local-1532512550423")},
        "query_metadata": {"entity": "runs", "job_id": "c3o:sort", "limit": 50},
        "run_readonly_sql": {"sql": "SELECT job_id, count(*) FROM runs GROUP BY 1"},
        "profile_script": {"job_id": "411"},
        "check_feature": feature,
        "materialize_feature": feature,
    }


async def time_calls(client: Client, tool: str, args: dict[str, Any], n: int) -> list[float]:
    await client.call_tool(tool, args)
    seconds = []
    for _ in range(n):
        started = time.perf_counter()
        result = await client.call_tool(tool, args)
        seconds.append(time.perf_counter() - started)
        if result.is_error:
            raise SystemExit(f"{tool} failed: {result.content}")
    return seconds


async def measure(server: Any, cases: dict[str, dict[str, Any]], n: int) -> dict[str, list[float]]:
    async with Client(server) as client:
        return {
            tool: await time_calls(client, tool, args, 5 if tool in SLOW_TOOLS else n)
            for tool, args in cases.items()
        }


def build(tmp: Path, external: Path) -> ServerConfig:
    db = tmp / "w.duckdb"
    inputs = [
        REPO_DIR / "examples" / "workspaces" / "mini",  # the gate tests' mix; has job 411
        external / "spark-eventlogs",
        REPO_DIR / "examples" / "mappings" / "c3o.toml",
    ]
    ingest(inputs, IngestSettings(db=db, workers=1))
    return ServerConfig(db=db, roots=(external / "spark-eventlogs",), store=tmp / "s.duckdb")


def report(results: dict[str, dict[str, list[float]]], n: int) -> str:
    lines = [
        f"Command: `.venv/bin/python benchmarks/mcp_latency.py --calls {n}`.",
        f"Machine: {machine()}.",
        "",
        "| tool | in-process p50 ms | in-process p95 ms | stdio p50 ms | stdio p95 ms |",
        "|---|---|---|---|---|",
    ]
    for tool in results["in-process"]:
        cells = [
            f"{percentile(results[mode][tool], q) * 1000:.1f}"
            for mode in ("in-process", "stdio")
            for q in (0.5, 0.95)
        ]
        lines.append(f"| {tool} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def run(n: int) -> str:
    external = external_data_dir()
    if external is None:
        raise SystemExit("benchmarks/mcp_latency.py needs ../shared/data/external beside the repo")
    with tempfile.TemporaryDirectory() as tmp:
        config = build(Path(tmp), external)
        cases = calls(external / "spark-eventlogs")
        argv = ["-m", "autofe", "mcp", "--db", str(config.db), "--store", str(config.store)]
        stdio = StdioServerParameters(
            command=sys.executable, args=[*argv, "--root", str(config.roots[0])]
        )
        modes: dict[str, Callable[[], Awaitable[dict[str, list[float]]]]] = {
            "in-process": lambda: measure(build_server(config), cases, n),
            "stdio": lambda: measure(stdio, cases, n),
        }
        results = {name: anyio.run(fn) for name, fn in modes.items()}
    return report(results, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--write", type=Path, help="update this results file's mcp section")
    args = parser.parse_args()
    body = run(args.calls)
    print(body)
    if args.write:
        write_section(args.write, "mcp", body)


if __name__ == "__main__":
    main()
