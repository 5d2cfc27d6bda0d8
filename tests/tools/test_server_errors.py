"""Every failed tool call says which tool, which argument and why (issue #27, item 9).

In-process through the SDK's in-memory client, as a host sees it: the text of an ``isError``
result, never a bare ``Error executing tool <name>``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client import Client
from mcp_calls import call as _call
from mcp_calls import text as _text
from mcp_types import CallToolResult
from pydantic import ValidationError

from autofe.errors import ConfigError
from autofe.featurespec import FeatureSpec
from autofe.tools.server import MAX_NAME, ServerConfig, build_server

SPARKLENS_LOG = Path("sparklens") / "local-1532512550423"
BARE = "Error executing tool"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def config(gates_warehouse: Path, eventlogs: Path, tmp_path: Path) -> ServerConfig:
    return ServerConfig(db=gates_warehouse, roots=(eventlogs,), store=tmp_path / "store.duckdb")


def _error(result: CallToolResult) -> str:
    assert result.is_error
    text = _text(result)
    assert not text.startswith(BARE), text
    return text


@pytest.mark.anyio
async def test_nul_byte_in_a_path_names_the_argument(config: ServerConfig) -> None:
    absolute = await _call(config, "parse_event_log", {"path": "/tmp/a\x00b"})
    assert _error(absolute) == r"parse_event_log: path: embedded NUL byte in '/tmp/a\x00b'"
    relative = await _call(config, "parse_event_log", {"path": f"{SPARKLENS_LOG}\x00"})
    assert _error(relative) == (
        r"parse_event_log: path: embedded NUL byte in 'sparklens/local-1532512550423\x00'"
    )
    job = await _call(config, "profile_script", {"job_id": "41\x001"})
    assert _error(job) == r"profile_script: job_id: embedded NUL byte in '41\x001'"


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["check_feature", "materialize_feature"])
async def test_over_long_feature_name_names_the_limit(config: ServerConfig, tool: str) -> None:
    args = {
        "name": "a" * 100_000,
        "sql": "SELECT run_id, 1 AS value FROM runs",
        "category": "history",
    }
    result = await _call(config, tool, args)
    assert _error(result) == f"{tool}: name: 100000 characters, at most 80"
    assert not config.feature_store.exists()  # refused before anything was opened or written


@pytest.mark.anyio
async def test_name_limit_is_the_feature_catalogs(config: ServerConfig) -> None:
    """The tool refuses exactly the names ``FeatureSpec`` refuses for length, and says so."""
    sql = "SELECT run_id, 1 AS value FROM runs"
    longest, too_long = "a" * MAX_NAME, "a" * (MAX_NAME + 1)
    FeatureSpec(name=longest, sql=sql, category="history")
    with pytest.raises(ValidationError, match="snake_case"):
        FeatureSpec(name=too_long, sql=sql, category="history")
    ok = await _call(config, "check_feature", {"name": longest, "sql": sql, "category": "history"})
    assert ok.structured_content is not None
    assert ok.structured_content["name"] == longest
    refused = await _call(
        config, "check_feature", {"name": too_long, "sql": sql, "category": "history"}
    )
    assert _error(refused) == "check_feature: name: 81 characters, at most 80"


def _log_with_huge_timestamp(eventlogs: Path, root: Path) -> Path:
    """The real sparklens log with its application start at ``"Timestamp": 1e300``."""
    lines = (eventlogs / SPARKLENS_LOG).read_text().splitlines()
    for i, line in enumerate(lines):
        event = json.loads(line)
        if event["Event"] == "SparkListenerApplicationStart":
            event["Timestamp"] = 1e300
            lines[i] = json.dumps(event)
    path = root / "huge-timestamp"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.anyio
async def test_timestamp_1e300_is_an_issue_or_a_reasoned_error(
    gates_warehouse: Path, eventlogs: Path, tmp_path: Path
) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    log = _log_with_huge_timestamp(eventlogs, root)
    config = ServerConfig(db=gates_warehouse, roots=(root,), store=tmp_path / "store.duckdb")
    result = await _call(config, "parse_event_log", {"path": str(log)})
    if result.is_error:
        text = _error(result)
        assert text.startswith("parse_event_log: ")
        assert "path='" in text or str(log) in text  # the argument that triggered it
    else:
        summary = result.structured_content
        assert summary is not None
        assert summary["app_id"] == "local-1532512550423"
        assert summary["issues_total"] >= 1
        assert any("Timestamp" in issue["reason"] for issue in summary["issues"])


@pytest.mark.anyio
async def test_wrong_typed_arguments_name_the_argument_and_the_type(config: ServerConfig) -> None:
    sql = await _call(config, "run_readonly_sql", {"sql": 42})
    assert _error(sql) == "run_readonly_sql: sql: input should be a valid string, got int 42"
    table = await _call(config, "describe_schema", {"table": ["runs"]})
    assert (
        _error(table) == "describe_schema: table: input should be a valid string, got list ['runs']"
    )
    limit = await _call(config, "query_metadata", {"entity": "runs", "limit": "many"})
    assert _error(limit) == (
        "query_metadata: limit: input should be a valid integer, unable to parse string as an "
        "integer, got 'many'"
    )
    missing = await _call(config, "check_feature", {"sql": 1.5, "category": "history"})
    assert _error(missing) == (
        "check_feature: name: required, not given; sql: input should be a valid string, "
        "got float 1.5"
    )


@pytest.mark.anyio
async def test_unknown_argument_and_unknown_tool_are_named(config: ServerConfig) -> None:
    typo = await _call(config, "run_readonly_sql", {"sql": "SELECT 1", "limt": 5})
    assert _error(typo) == "run_readonly_sql: unknown argument 'limt'; it takes sql, limit"
    tool = await _call(config, "drop_tables", {})
    assert _error(tool).startswith("unknown tool 'drop_tables'; the tools are check_feature, ")


@pytest.mark.anyio
async def test_argument_bounds(config: ServerConfig) -> None:
    sql = await _call(config, "run_readonly_sql", {"sql": "SELECT 1 " + " " * 100_000})
    assert _error(sql) == "run_readonly_sql: sql: 100009 characters, at most 100000"
    path = await _call(config, "parse_event_log", {"path": "x" * 5000})
    assert _error(path) == "parse_event_log: path: 5000 characters, at most 4096"
    job = await _call(config, "query_metadata", {"entity": "runs", "job_id": "x" * 1_000_000})
    assert _error(job) == "query_metadata: job_id: 1000000 characters, at most 1000"
    offset = await _call(config, "query_metadata", {"entity": "runs", "offset": 10**30})
    assert _error(offset).startswith(
        "query_metadata: offset: input should be less than or equal to 1000000000, got int 1"
    )


@pytest.mark.anyio
async def test_refusals_keep_their_message_under_the_tool_name(config: ServerConfig) -> None:
    both = await _call(config, "profile_script", {"job_id": "411", "text": "SELECT 1"})
    assert _error(both) == "profile_script: give exactly one of job_id or text"
    table = await _call(config, "describe_schema", {"table": "nope"})
    assert _error(table).startswith("describe_schema: no table 'nope' in the warehouse; tables: ")


@pytest.mark.anyio
async def test_a_crash_names_its_class_and_arguments_and_is_logged(
    config: ServerConfig, caplog: pytest.LogCaptureFixture
) -> None:
    server = build_server(config)

    @server.tool()
    def explode(when: str) -> str:
        raise OverflowError("timestamp out of range for platform time_t")

    @server.tool()
    def refuse(what: str) -> str:
        raise ConfigError(f"{what} is not configured")

    with caplog.at_level(logging.INFO, logger="autofe.tools.server"):
        async with Client(server) as client:
            crash = await client.call_tool("explode", {"when": "1e300"})
            refusal = await client.call_tool("refuse", {"what": "--root"})
    assert _error(crash) == (
        "explode: OverflowError: timestamp out of range for platform time_t "
        "(called with when='1e300')"
    )
    assert _error(refusal) == "refuse: --root is not configured"
    logged = [r for r in caplog.records if r.name == "autofe.tools.server"]
    assert [r.levelname for r in logged] == ["ERROR"]  # the crash, with its traceback
    assert logged[0].getMessage() == _text(crash)
    assert logged[0].exc_info is not None
    assert logged[0].exc_info[0] is OverflowError


def _garbage_sets(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Argument sets no tool accepts: every argument of the wrong type, NUL-laden, over-long,
    negative, nested, or an argument the tool does not take."""
    names = list(schema.get("properties", {}))
    values: list[Any] = [{"nested": [None]}, "\x00\x00", "x" * 2_000_000, -1, 1e300, [1, "a"]]
    sets = [dict.fromkeys(names, value) for value in values]
    return [*sets, {"no_such_argument": 1}, {**dict.fromkeys(names, True), "\x00": 1}]


def _assert_reasoned(tool: str, result: CallToolResult) -> None:
    if not result.is_error:
        return
    text = _error(result)
    assert text.startswith(f"{tool}: ") and len(text) > len(tool) + 10, text
    assert text.strip() != f"{BARE} {tool}"


@pytest.mark.anyio
async def test_garbage_arguments_to_every_tool_get_a_reason(config: ServerConfig) -> None:
    async with Client(build_server(config)) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == 7
        for tool in tools:
            for args in _garbage_sets(tool.input_schema):
                result = await client.call_tool(tool.name, args)
                assert result.is_error, (tool.name, list(args))
                _assert_reasoned(tool.name, result)
                text = _text(result)
                named = [name for name in args if f"{name}:" in text or repr(name) in text]
                assert named or "give exactly one" in text, (tool.name, text)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
TOOL_ARGS = {
    "describe_schema": ["table"],
    "parse_event_log": ["path", "max_items"],
    "query_metadata": ["entity", "job_id", "limit", "offset", "submitted_after", "as_of"],
    "run_readonly_sql": ["sql", "limit"],
    "profile_script": ["job_id", "text"],
    "check_feature": ["name", "sql", "category", "value_type", "rationale"],
    "materialize_feature": ["name", "sql", "category", "value_type"],
}
KNOWN = {name for names in TOOL_ARGS.values() for name in names}


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    args=st.dictionaries(
        st.sampled_from(sorted(KNOWN)) | st.text(max_size=8),
        JSON,
        max_size=4,
    )
)
def test_any_arguments_to_any_tool_never_get_a_bare_error(
    config: ServerConfig, args: dict[str, Any]
) -> None:
    async def call_every_tool() -> None:
        async with Client(build_server(config)) as client:
            for tool, names in TOOL_ARGS.items():
                mine = {k: v for k, v in args.items() if k in names or k not in KNOWN}
                _assert_reasoned(tool, await client.call_tool(tool, mine))

    anyio.run(call_every_tool)
