"""Run one read query in the sandbox and return its first rows as JSON-safe values.

Also home of the conversion every SQL-backed tool shares (:func:`json_value`,
:func:`json_rows`): DuckDB hands back datetimes, decimals, JSON text and arbitrarily long
strings; a tool's answer must be JSON and small enough for a model's context.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from autofe.errors import ConfigError
from autofe.sandbox.session import Sandbox

MAX_LIMIT = 1000
MAX_TEXT = 2000
"""Longer strings are cut (and say so): read the rest with ``substr()`` in another query."""
MAX_RESULT_BYTES = 1 << 20
"""Rows past this much JSON are dropped and the result marked truncated."""


class SqlResult(BaseModel):
    """The first rows of a query: one list per row, in ``columns`` order."""

    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool
    """More rows existed than were returned (the limit, or the size budget, cut them)."""
    seconds: float


def run_readonly_sql(sandbox: Sandbox, sql: str, limit: int = 100) -> SqlResult:
    """Run one guarded read query over the warehouse.

    Args:
        sandbox: the read-only, locked-down warehouse connection.
        sql: one SELECT (DuckDB dialect) over warehouse tables.
        limit: rows to return, 1 to 1000.

    Raises:
        ConfigError: ``limit`` is out of range.
        SandboxViolation: the sandbox refused the query or stopped it (timeout, memory).
        QueryError: DuckDB could not run it (unknown column, type error, ...).

    >>> import duckdb
    >>> from autofe.warehouse.catalog import code_catalog
    >>> with Sandbox.wrap(duckdb.connect(), code_catalog()) as box:
    ...     run_readonly_sql(box, "SELECT DATE '2024-01-31' AS day, 1.5 AS x").rows
    [['2024-01-31', 1.5]]
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    result = sandbox.query(sql, limit)
    rows, cut = json_rows(result.types, result.rows)
    return SqlResult(
        columns=list(result.columns),
        types=list(result.types),
        rows=rows,
        row_count=len(rows),
        truncated=result.truncated or cut,
        seconds=round(result.seconds, 4),
    )


def json_rows(
    types: Sequence[str], rows: Sequence[Sequence[Any]], budget: int = MAX_RESULT_BYTES
) -> tuple[list[list[Any]], bool]:
    """Rows as JSON-safe lists, and whether the size ``budget`` (bytes of JSON) cut any.

    >>> json_rows(["JSON", "VARCHAR"], [('{"a": [1]}', "x"), ("null", "y")], budget=20)
    ([[{'a': [1]}, 'x']], True)
    """
    out: list[list[Any]] = []
    used = 0
    for row in rows:
        converted = [json_value(v, is_json=t == "JSON") for t, v in zip(types, row, strict=False)]
        used += len(orjson.dumps(converted))
        if used > budget and out:
            return out, True
        out.append(converted)
    return out, False


def json_value(value: Any, *, is_json: bool = False, max_text: int = MAX_TEXT) -> Any:
    """One DuckDB value as JSON: ISO times, JSON text parsed, long strings cut.

    >>> json_value(datetime(2024, 1, 2, 3, 4)), json_value(Decimal("1.50")), json_value(math.inf)
    ('2024-01-02T03:04:00', 1.5, 'Infinity')
    >>> json_value("x" * 30, max_text=10)
    'xxxxxxxxxx…[+20 chars]'
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):  # HUGEINT sums can pass 64 bits, where JSON readers lose digits
        return value if -(1 << 63) <= value < 1 << 63 else str(value)
    if isinstance(value, str):
        return _parse_json(value, max_text) if is_json else _cut(value, max_text)
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list | tuple):
        return [json_value(v, max_text=max_text) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v, max_text=max_text) for k, v in value.items()}
    if isinstance(value, bytes | bytearray | memoryview):
        return _cut(bytes(value).hex(), max_text)
    if isinstance(value, timedelta | UUID):
        return to_jsonable_python(value)
    return _cut(str(value), max_text)


def _parse_json(text: str, max_text: int) -> Any:
    """Parsed JSON, or the text itself (cut) when it is too long or not JSON after all."""
    if len(text) > max_text:
        return _cut(text, max_text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _cut(text: str, max_text: int) -> str:
    return text if len(text) <= max_text else f"{text[:max_text]}…[+{len(text) - max_text} chars]"


def _non_finite(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
