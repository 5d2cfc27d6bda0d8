"""Deeply nested SQL and Python get a reasoned refusal from every tool, never a RecursionError.

Through the SDK's in-memory client, as a host sees it (issue #27), and through the pure
``profile_script`` for the Python parser's two ways of giving up (RecursionError, MemoryError).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_calls import call as _call
from mcp_calls import text as _text

from autofe.errors import ConfigError
from autofe.tools.profile_script import profile_script
from autofe.tools.server import ServerConfig

DEEP_SQL = "SELECT run_id, " + "(" * 5000 + "1" + ")" * 5000 + " AS value FROM runs"
DEEP_CASTS = "SELECT run_id, 1" + "::DOUBLE" * 3000 + " AS value FROM runs"
DEEP_LIST = "x = " + "[" * 3000 + "]" * 3000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def config(gates_warehouse: Path, eventlogs: Path, tmp_path: Path) -> ServerConfig:
    return ServerConfig(db=gates_warehouse, roots=(eventlogs,), store=tmp_path / "store.duckdb")


@pytest.mark.anyio
async def test_check_feature_rejects_deep_sql_with_a_reason(config: ServerConfig) -> None:
    result = await _call(
        config, "check_feature", {"name": "f", "sql": DEEP_SQL, "category": "history"}
    )
    assert not result.is_error, _text(result)  # a verdict, not "RecursionError: ..."
    verdict = result.structured_content
    assert verdict is not None and verdict["accepted"] is False
    assert [(r["code"], r["message"]) for r in verdict["reasons"]] == [
        ("parse_error", "statement nested too deeply to check")
    ]
    not_read = "not run: the completeness gate could not read the SQL "
    not_read += "(statement nested too deeply to check)"
    assert verdict["skipped"] == {"leakage": not_read, "cost": not_read}


@pytest.mark.anyio
async def test_check_feature_rejects_a_deep_cast_chain(config: ServerConfig) -> None:
    args = {"name": "f", "sql": DEEP_CASTS, "category": "history"}
    verdict = (await _call(config, "check_feature", args)).structured_content
    assert verdict is not None
    assert [r["message"] for r in verdict["reasons"]] == [
        "statement nested too deeply to check: 3003 levels, at most 100"
    ]


@pytest.mark.anyio
async def test_materialize_feature_rejects_deep_sql_and_stores_nothing(
    config: ServerConfig,
) -> None:
    args = {"name": "f", "sql": DEEP_SQL, "category": "history"}
    result = await _call(config, "materialize_feature", args)
    assert not result.is_error, _text(result)
    got = result.structured_content
    assert got is not None and got["accepted"] is False and got["rows"] == 0
    assert [r["message"] for r in got["reasons"]] == ["statement nested too deeply to check"]


@pytest.mark.anyio
async def test_run_readonly_sql_refuses_a_deep_cast_chain_itself(config: ServerConfig) -> None:
    result = await _call(config, "run_readonly_sql", {"sql": DEEP_CASTS})
    assert result.is_error
    assert _text(result) == (
        "run_readonly_sql: refused: statement nested too deeply to check: 3003 levels, at most 100"
    )  # DuckDB's own "Max expression depth limit of 1000 exceeded" on d2aa5f7


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (DEEP_SQL, "SQL could not be parsed: line 1: statement nested too deeply to parse"),
        (
            "import pyspark\n" + DEEP_LIST,
            "Python could not be parsed: line 2, col 205: too many nested parentheses",
        ),
        (
            "import pyspark\nx = spark" + ".f()" * 3000,
            "Python could not be parsed: code nested too deeply to parse",
        ),
    ],
    ids=["sql", "python_list", "python_calls"],
)
async def test_profile_script_refuses_deep_nesting_with_a_reason(
    config: ServerConfig, text: str, message: str
) -> None:
    result = await _call(config, "profile_script", {"text": text})
    assert result.is_error
    assert _text(result) == f"profile_script: {message}"


@pytest.mark.parametrize(
    "text",
    [
        "import pyspark\nx = " + "lambda: " * 4000 + "1",  # ast.parse: MemoryError, no message
        "import pyspark\nx = a" + ".b" * 8000,  # RecursionError during ast construction
    ],
    ids=["memory_error", "recursion_error"],
)
@pytest.mark.parametrize("language", ["python", "auto"])
def test_python_the_parser_gives_up_on_is_called_too_deep(text: str, language: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        profile_script(text, language)
    assert str(caught.value) == "Python could not be parsed: code nested too deeply to parse"


def test_deep_sql_inside_python_is_skipped_with_a_warning() -> None:
    text = "import pyspark\nspark.sql('SELECT " + "(" * 3000 + "1" + ")" * 3000 + " FROM t')"
    profile = profile_script(text)
    assert profile.language == "python"
    assert profile.warnings == ["line 2: SQL skipped: line 1: statement nested too deeply to parse"]


def test_deep_sql_that_parses_is_profiled_without_a_crash() -> None:
    profile = profile_script("SELECT 1" + "::INT" * 3000 + " FROM t", "sql")
    assert profile.tables_read == ["t"]


def test_one_deep_statement_is_skipped_and_the_rest_profiled() -> None:
    profile = profile_script("SELECT a FROM t; SELECT " + "(" * 5000 + "1" + ")" * 5000, "sql")
    assert profile.tables_read == ["t"]
    assert profile.warnings == ["statement skipped: line 1: statement nested too deeply to parse"]
