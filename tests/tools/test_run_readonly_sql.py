"""run_readonly_sql: sandboxed reads with JSON-safe, size-bounded results; refusals propagate."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import duckdb
import orjson
import pytest

from autofe.errors import ConfigError, SandboxViolation
from autofe.sandbox.session import QueryError, Sandbox
from autofe.tools.run_readonly_sql import MAX_RESULT_BYTES, MAX_TEXT, json_value, run_readonly_sql
from autofe.warehouse.catalog import code_catalog


@pytest.fixture
def memory_box() -> Iterator[Sandbox]:
    with Sandbox.wrap(duckdb.connect(), code_catalog()) as box:
        yield box


def test_real_warehouse_query(gates_warehouse: Path) -> None:
    with Sandbox.open(gates_warehouse) as box:
        total = box.query("SELECT count(*) FROM runs").rows[0][0]
        result = run_readonly_sql(
            box, "SELECT run_id, submit_time, parameters FROM runs ORDER BY run_id", limit=5
        )
    assert total > 5
    assert result.columns == ["run_id", "submit_time", "parameters"]
    assert result.types == ["VARCHAR", "TIMESTAMP", "JSON"]
    assert (result.row_count, result.truncated) == (5, True)
    assert all(isinstance(row[1], str) for row in result.rows)
    orjson.dumps(result.model_dump())


def test_values_become_json(memory_box: Sandbox) -> None:
    result = run_readonly_sql(
        memory_box,
        "SELECT TIMESTAMP '2024-02-13 18:30:00' AS ts, 1.25 AS dec, 'nan'::DOUBLE AS nan, "
        "[1, 2] AS list, {'a': DATE '2024-01-01'} AS st, '{\"k\": [1]}'::JSON AS js, "
        "INTERVAL 90 SECOND AS iv, 170141183460469231731687303715884105727::HUGEINT AS big",
    )
    assert result.rows == [
        [
            "2024-02-13T18:30:00",
            1.25,
            "NaN",
            [1, 2],
            {"a": "2024-01-01"},
            {"k": [1]},
            "PT1M30S",
            "170141183460469231731687303715884105727",
        ]
    ]
    assert not result.truncated
    orjson.dumps(result.model_dump())


def test_long_text_is_cut_and_big_results_stop_at_the_budget(memory_box: Sandbox) -> None:
    one = run_readonly_sql(memory_box, "SELECT repeat('x', 5000) AS s").rows[0][0]
    assert one == "x" * MAX_TEXT + f"…[+{5000 - MAX_TEXT} chars]"
    big = run_readonly_sql(memory_box, "SELECT repeat('y', 1999) AS s FROM range(1000)", 1000)
    assert big.truncated and 0 < big.row_count < 1000
    assert len(orjson.dumps(big.rows)) <= MAX_RESULT_BYTES


def test_limit_bounds(memory_box: Sandbox) -> None:
    for limit in (0, 1001):
        with pytest.raises(ConfigError, match="limit must be between 1 and 1000"):
            run_readonly_sql(memory_box, "SELECT 1", limit)
    assert run_readonly_sql(memory_box, "SELECT * FROM range(1000)", 1000).row_count == 1000


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        ("DROP TABLE runs", SandboxViolation, "refused"),
        ("SELECT * FROM read_csv('/etc/passwd')", SandboxViolation, "read_csv"),
        ("SELECT 1; SELECT 2", SandboxViolation, "refused"),
        ("SELECT no_such_column", QueryError, "query failed"),
    ],
)
def test_refusals_and_sql_errors_propagate(
    memory_box: Sandbox, sql: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        run_readonly_sql(memory_box, sql)


def test_json_value_edge_cases() -> None:
    assert json_value(-math.inf) == "-Infinity"
    assert json_value(b"\x00\xff") == "00ff"
    assert json_value("{not json", is_json=True) == "{not json"
    assert json_value((1, None, "a")) == [1, None, "a"]
