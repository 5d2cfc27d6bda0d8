"""The sandbox's check over DuckDB's own parse: the same allow-lists, on the tree that runs.

sqlglot and DuckDB tokenise comments, strings and dollar quotes independently, so a place where
the two parsers disagree could smuggle a statement or a call past
:func:`~autofe.sandbox.guard.guard_sql`. :func:`guard_duckdb_parse` reads DuckDB's parse tree of
the same text (``json_serialize_sql``) and applies the guard's lists to it:
:data:`~autofe.sandbox.guard.ALLOWED_FUNCTIONS`, :data:`~autofe.sandbox.guard.TABLE_FUNCTIONS`,
warehouse tables and CTEs.

Functions that build big values from a size argument (``repeat``, ``lpad``, ``printf`` widths,
scalar ``range``) must get small literal sizes (:data:`MAX_GENERATED`,
:func:`check_generated_size`): DuckDB neither counts such values against its memory limit nor
can interrupt one while it is being built, and only its own tree says which call runs.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import duckdb

from autofe.errors import SandboxViolation
from autofe.sandbox.guard import ALLOWED_FUNCTIONS, TABLE_FUNCTIONS
from autofe.sandbox.nesting import NestedTooDeeply
from autofe.sandbox.statements import Span
from autofe.warehouse.catalog import WarehouseCatalog

MAX_GENERATED = 100_000
"""Largest string, list or padding one call may build (``repeat``, ``lpad``, scalar ``range``).

DuckDB's memory limit does not cover values built while evaluating an expression, and its
interrupt is only checked between chunks: ``repeat('x', 2e9)`` runs past both the timeout and
the memory limit. So the sizes such calls build must be literals, and small.
"""

SIZE_ARGUMENTS: dict[str, int] = {
    "repeat": 1,
    "lpad": 1,
    "rpad": 1,
    "list_resize": 1,
    "array_resize": 1,
}
"""Position of the argument that sets the size of what the function builds."""


def guard_duckdb_parse(con: duckdb.DuckDBPyConnection, sql: str, catalog: WarehouseCatalog) -> None:
    """Apply the same allow-lists to DuckDB's own parse tree of ``sql``.

    sqlglot and DuckDB tokenise comments, strings and dollar quotes independently; what runs is
    what DuckDB parsed, so its tree is checked too.

    Raises:
        SandboxViolation: DuckDB sees more than one statement, something other than a SELECT, or
            a table or function the lists do not allow.
        duckdb.ParserException: DuckDB cannot parse the text (an ordinary SQL error).

    >>> from autofe.warehouse.catalog import code_catalog
    >>> guard_duckdb_parse(duckdb.connect(), "SELECT lag(run_id) OVER () FROM runs", code_catalog())
    """
    statements = con.extract_statements(sql)
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(str(s.type).rsplit(".", 1)[-1] for s in statements) or "nothing"
        raise SandboxViolation(f"DuckDB parses this as {kinds}, not one SELECT", sql)
    nodes = list(_dict_nodes(_duckdb_tree(con, sql)))  # walked once: a world's tree is large
    ctes = {name.lower() for name in _cte_names(nodes)}
    in_from = {id(n.get("function")) for n in nodes if n.get("type") == "TABLE_FUNCTION"}
    for node in nodes:
        _check_duckdb_node(node, sql, catalog, ctes)
        if "function_name" in node and id(node) not in in_from:
            check_generated_size(node, sql)


def _duckdb_tree(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, Any]:
    row = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchone()
    try:
        tree: dict[str, Any] = json.loads(row[0]) if row else {"error": True}
    except RecursionError as exc:
        raise NestedTooDeeply(sql) from exc
    if tree.get("error"):
        raise SandboxViolation(f"DuckDB cannot check it: {tree.get('error_message')}", sql)
    return tree


def _dict_nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in ``tree``, without recursion (the tree can be deep)."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _cte_names(nodes: list[dict[str, Any]]) -> Iterator[str]:
    for node in nodes:
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            yield from (str(entry.get("key", "")) for entry in cte_map.get("map", []))


def _check_duckdb_node(
    node: dict[str, Any], sql: str, catalog: WarehouseCatalog, ctes: set[str]
) -> None:
    kind = node.get("type")
    if kind == "BASE_TABLE":
        _check_duckdb_table(node, sql, catalog, ctes)
    elif kind == "TABLE_FUNCTION":
        func = node.get("function") or {}
        name = str(func.get("function_name", "")).lower()
        if name not in TABLE_FUNCTIONS or _qualified(func):
            raise SandboxViolation(
                f"table function {name!r} is not allowed", sql, _duckdb_span(node, sql)
            )
    elif "function_name" in node and not node.get("is_operator"):
        _check_duckdb_function(node, sql)


def _check_duckdb_table(
    node: dict[str, Any], sql: str, catalog: WarehouseCatalog, ctes: set[str]
) -> None:
    name = str(node.get("table_name", "")).lower()
    schema = str(node.get("schema_name", "")).lower()
    if node.get("catalog_name") or schema not in ("", "main"):
        raise SandboxViolation(
            "only the warehouse's main schema is readable", sql, _duckdb_span(node, sql)
        )
    if name not in catalog.tables() and name not in ctes:
        raise SandboxViolation(
            f"table {name!r} is not in the warehouse catalog", sql, _duckdb_span(node, sql)
        )


def _check_duckdb_function(node: dict[str, Any], sql: str) -> None:
    name = str(node["function_name"]).lower()
    if _qualified(node):
        raise SandboxViolation(
            f"qualified call to {name!r} is not allowed", sql, _duckdb_span(node, sql)
        )
    # A table function's own node is checked with its TABLE_FUNCTION parent; range, unnest and
    # generate_series are in both lists, so finding them again here is harmless.
    if name not in ALLOWED_FUNCTIONS:
        raise SandboxViolation(f"function {name!r} is not allowed", sql, _duckdb_span(node, sql))


def _qualified(node: dict[str, Any]) -> bool:
    return bool(node.get("schema") or node.get("catalog"))


def _duckdb_span(node: dict[str, Any], sql: str) -> Span | None:
    start, length = node.get("query_location"), node.get("query_location_length")
    if isinstance(start, int) and isinstance(length, int) and 0 <= start < len(sql):
        return (start, min(start + max(length, 1), len(sql)))
    return None


def check_generated_size(func: dict[str, Any], sql: str) -> None:
    """Refuse a call (in DuckDB's parse tree) that could build a value over MAX_GENERATED.

    Row generators are bounded in FROM position only because there they stream, chunk by
    chunk, under the timeout; as scalars they build one list per row.

    >>> node = {"function_name": "repeat", "arguments": [_argument("ab"), _argument(10)]}
    >>> check_generated_size(node, "SELECT repeat('ab', 10)")
    >>> node["arguments"][1] = _argument(10**9)
    >>> check_generated_size(node, "")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    autofe.errors.SandboxViolation: refused: repeat(...) could build 2000000000 ... over 100000...
    """
    name = str(func.get("function_name", "")).lower()
    args = [a.get("expression", {}) for a in func.get("arguments") or []]
    size = _generated_size(name, args)
    if size <= MAX_GENERATED:
        return
    what = (
        "a value whose size is not a literal"
        if math.isinf(size)
        else f"{size:.0f} elements or characters"
    )
    raise SandboxViolation(
        f"{name}(...) could build {what}, over {MAX_GENERATED}; sizes must be small "
        "literals (generate rows in FROM instead)",
        sql,
        _duckdb_span(func, sql),
    )


def _generated_size(name: str, args: list[dict[str, Any]]) -> float:
    """Elements or characters ``name(*args)`` builds: 0 if it builds nothing big, inf if a
    size is not a literal."""
    if name in SIZE_ARGUMENTS and len(args) > SIZE_ARGUMENTS[name]:
        count = _literal_number(args[SIZE_ARGUMENTS[name]])
        if name != "repeat" or count is None:
            return math.inf if count is None else count
        value = _literal(args[0])  # repeat's value must be a literal too: a column can be huge
        return count * max(len(value), 1) if value is not None else math.inf
    if name in ("range", "generate_series"):
        return _series_length(args)
    if name in ("format", "printf"):
        return _format_width(args)
    return 0.0


def _series_length(args: list[dict[str, Any]]) -> float:
    numbers = [n for n in map(_literal_number, args) if n is not None]
    if not 1 <= len(numbers) == len(args) <= 3:
        return math.inf
    if len(numbers) == 1:  # range(stop)
        numbers = [0.0, *numbers]
    if len(numbers) == 2:  # range(start, stop)
        numbers = [*numbers, 1.0]
    start, stop, step = numbers
    return abs(stop - start) / abs(step) + 1 if step else math.inf


def _format_width(args: list[dict[str, Any]]) -> float:
    """The widest padding a format string asks for; a computed or ``*`` width is unbounded."""
    text = _literal(args[0]) if args else None
    if text is None or "*" in text or re.search(r"\{[^}]*\{", text):
        return math.inf
    return max((float(d) for d in re.findall(r"\d+", text)), default=0.0)


def _is_literal(node: dict[str, Any]) -> bool:
    return node.get("class") == "CONSTANT"


def _literal(node: dict[str, Any]) -> str | None:
    literal = node.get("literal") if _is_literal(node) else None
    return str(literal.get("text")) if isinstance(literal, dict) else None


def _literal_number(node: dict[str, Any]) -> float | None:
    text = _literal(node)
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _argument(value: object) -> dict[str, Any]:
    """A constant argument as DuckDB's parse tree writes it (for the doctests)."""
    return {"expression": {"class": "CONSTANT", "literal": {"kind": "X", "text": str(value)}}}
