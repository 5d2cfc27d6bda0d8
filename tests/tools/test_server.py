"""The MCP server through the SDK's own client: in-process for every tool, stdio end to end."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_calls import call as _call
from mcp_calls import text as _text
from mcp_types import CallToolResult

from autofe.tools.server import ServerConfig, build_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "leakage"
TOOLS = {
    "describe_schema",
    "parse_event_log",
    "query_metadata",
    "run_readonly_sql",
    "profile_script",
    "check_feature",
    "materialize_feature",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def config(gates_warehouse: Path, eventlogs: Path, tmp_path: Path) -> ServerConfig:
    return ServerConfig(db=gates_warehouse, roots=(eventlogs,), store=tmp_path / "store.duckdb")


def _error_text(result: CallToolResult) -> str:
    assert result.is_error
    return _text(result)


@pytest.mark.anyio
async def test_lists_every_tool_with_annotations(config: ServerConfig) -> None:
    async with Client(build_server(config)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (name != "materialize_feature")
    limit = tools["run_readonly_sql"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 1000)


@pytest.mark.anyio
async def test_describe_schema(config: ServerConfig) -> None:
    result = await _call(config, "describe_schema", {"table": "runs"})
    runs = result.structured_content["tables"][0]
    tags = {c["name"]: c["availability"] for c in runs["columns"]}
    assert tags["duration_s"] == "post_execution"
    assert tags["submit_time"] == "known_at_submit"
    bad = await _call(config, "describe_schema", {"table": "nope"})
    assert "nope" in _error_text(bad)


@pytest.mark.anyio
async def test_parse_event_log_and_path_confinement(config: ServerConfig, eventlogs: Path) -> None:
    log = eventlogs / "sparklens" / "local-1532512550423"
    result = await _call(config, "parse_event_log", {"path": str(log)})
    summary = result.structured_content
    assert summary["app_id"] == "local-1532512550423"
    assert summary["counts"]["tasks"] == 8
    escape = await _call(config, "parse_event_log", {"path": str(eventlogs / ".." / "README.md")})
    assert "outside the allowed roots" in _error_text(escape)


@pytest.mark.anyio
async def test_query_metadata_pages(config: ServerConfig) -> None:
    args = {"entity": "runs", "job_id": "c3o:sort", "limit": 5}
    page = (await _call(config, "query_metadata", args)).structured_content
    assert len(page["rows"]) == 5
    assert page["total"] == 630
    assert page["next_offset"] == 5
    bad = await _call(config, "query_metadata", {"entity": "jobs", "as_of": "2024-01-01T00:00"})
    assert bad.is_error


@pytest.mark.anyio
async def test_run_readonly_sql_and_its_refusals(config: ServerConfig, tmp_path: Path) -> None:
    sql = "SELECT count(*) AS n FROM runs WHERE job_id LIKE 'c3o:%'"
    result = (await _call(config, "run_readonly_sql", {"sql": sql})).structured_content
    assert result["rows"] == [[4650]]
    target = tmp_path / "x.csv"
    copy = await _call(config, "run_readonly_sql", {"sql": f"COPY (SELECT 1) TO '{target}'"})
    assert "refused" in _error_text(copy)
    assert not target.exists()


@pytest.mark.anyio
async def test_profile_script_by_text_and_job(config: ServerConfig) -> None:
    text = (
        "SELECT o_orderdate, sum(l_quantity) FROM orders JOIN lineitem ON l_orderkey = o_orderkey"
    )
    sql = text + " WHERE o_orderdate >= DATE '1995-01-01' GROUP BY 1"
    profile = (await _call(config, "profile_script", {"text": sql})).structured_content
    assert profile["tables_read"] == ["lineitem", "orders"]
    job = await _call(config, "profile_script", {"job_id": "411"})
    assert job.structured_content["language"] == "sql"
    both = await _call(config, "profile_script", {"job_id": "411", "text": sql})
    assert "exactly one" in _error_text(both)


def _fixture_args(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "sql": (FIXTURES / f"{name}.sql").read_text(),
        "category": "history",
    }


@pytest.mark.anyio
async def test_check_feature_verdicts(config: ServerConfig) -> None:
    clean = await _call(
        config, "check_feature", _fixture_args("accept_history_last_duration_ranked")
    )
    assert clean.structured_content["accepted"] is True
    leaky = await _call(config, "check_feature", _fixture_args("reject_label_duration_ms"))
    codes = {r["code"] for r in leaky.structured_content["reasons"]}
    assert "label_leak" in codes


@pytest.mark.anyio
async def test_materialize_feature_writes_only_accepted(config: ServerConfig) -> None:
    from autofe.warehouse.feature_store import read_feature_values

    done = await _call(
        config, "materialize_feature", _fixture_args("accept_history_last_duration_ranked")
    )
    result = done.structured_content
    assert result["accepted"] is True
    assert result["rows"] > 4000
    assert len(read_feature_values(config.feature_store, result["feature_id"])) == result["rows"]
    refused = await _call(config, "materialize_feature", _fixture_args("reject_label_duration_ms"))
    assert refused.structured_content["accepted"] is False
    assert refused.structured_content["rows"] == 0


@pytest.mark.anyio
async def test_stdio_end_to_end(gates_warehouse: Path, eventlogs: Path, tmp_path: Path) -> None:
    """`autofe mcp` as a subprocess over stdio, as an MCP host would launch it."""
    db = tmp_path / "w.duckdb"
    shutil.copy(gates_warehouse, db)
    target = tmp_path / "x.csv"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "autofe", "mcp", "--db", str(db), "--root", str(eventlogs)],
    )
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        count = await client.call_tool("run_readonly_sql", {"sql": "SELECT count(*) FROM jobs"})
        copy = await client.call_tool("run_readonly_sql", {"sql": f"COPY (SELECT 1) TO '{target}'"})
    assert names == TOOLS
    assert count.structured_content["rows"][0][0] > 5
    assert "refused" in _error_text(copy)
    assert not target.exists()


@pytest.mark.anyio
async def test_bad_arguments_are_tool_errors(config: ServerConfig) -> None:
    too_many = await _call(config, "run_readonly_sql", {"sql": "SELECT 1", "limit": 0})
    assert too_many.is_error
    bad_name = dict(_fixture_args("accept_history_last_duration_ranked"), name="Bad Name")
    assert (await _call(config, "materialize_feature", bad_name)).is_error
    unknown_table = await _call(config, "run_readonly_sql", {"sql": "SELECT * FROM secrets"})
    assert "secrets" in _error_text(unknown_table)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.anyio
async def test_streamable_http_on_loopback(gates_warehouse: Path, tmp_path: Path) -> None:
    """`autofe mcp --transport http` serves on 127.0.0.1; the SDK client talks to it."""
    import subprocess

    import anyio

    db = tmp_path / "w.duckdb"
    shutil.copy(gates_warehouse, db)
    port = _free_port()
    argv = [sys.executable, "-m", "autofe", "mcp", "--db", str(db), "--transport", "http"]
    proc = subprocess.Popen([*argv, "--port", str(port)], stderr=subprocess.DEVNULL)
    try:
        names: set[str] = set()
        for _ in range(100):  # wait up to ~10 s for the server to listen
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    names = {t.name for t in (await client.list_tools()).tools}
                break
            except Exception:
                await anyio.sleep(0.1)
        assert names == TOOLS
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_mcp_command_refuses_bad_input(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from autofe.cli import app
    from autofe.console import EXIT_USER_ERROR

    runner = CliRunner()
    missing = runner.invoke(app, ["mcp", "--db", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == EXIT_USER_ERROR
    assert "does not exist" in missing.stderr
    transport = runner.invoke(app, ["mcp", "--db", "x", "--transport", "carrier-pigeon"])
    assert transport.exit_code == EXIT_USER_ERROR
    assert "--transport must be stdio or http" in transport.stderr
