"""Parse a feature for translation and give every node the type DuckDB gives it.

Whether a DuckDB expression has a faithful Spark form often depends on its operand types: a cast
from DOUBLE to BIGINT rounds in DuckDB and truncates in Spark, ``len`` counts characters of a
string but elements of a list. sqlglot's optimizer resolves columns against the warehouse schema
and infers types; this module adds the few DuckDB functions its type table leaves unknown.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from autofe.errors import Untranspilable
from autofe.warehouse.catalog import code_catalog

DIALECT = "duckdb"
TEXT = exp.DataType.build("VARCHAR")
TEXT_LIST = exp.DataType.build("VARCHAR[]", dialect=DIALECT)

_EXTRA_TYPES: dict[type[exp.Expr], dict[str, Any]] = {
    exp.RegexpExtract: {"returns": exp.DType.VARCHAR},
    exp.RegexpReplace: {"returns": exp.DType.VARCHAR},
    exp.JSONExtractScalar: {
        "annotator": lambda self, e: self._set_type(e, TEXT_LIST if json_wildcard(e) else TEXT)
    },
    exp.JSONExtract: {"returns": exp.DType.JSON},
    exp.MD5: {"returns": exp.DType.VARCHAR},
    exp.SplitPart: {"returns": exp.DType.VARCHAR},
    exp.Replace: {"returns": exp.DType.VARCHAR},
    exp.Substring: {"returns": exp.DType.VARCHAR},
    exp.RegexpExtractAll: {"annotator": lambda self, e: self._set_type(e, TEXT_LIST)},
    exp.Split: {"annotator": lambda self, e: self._set_type(e, TEXT_LIST)},
    exp.ArrayDistinct: {"annotator": lambda self, e: self._set_type(e, e.this.type)},
    exp.Anonymous: {"annotator": lambda self, e: self._set_type(e, _anonymous_type(e))},
    exp.Median: {"annotator": lambda self, e: self._set_type(e, _median_type(e))},
    exp.PercentileCont: {"annotator": lambda self, e: self._set_type(e, _median_type(e))},
    exp.ArgMax: {"annotator": lambda self, e: self._set_type(e, e.this.type)},
    exp.ArgMin: {"annotator": lambda self, e: self._set_type(e, e.this.type)},
    exp.UnixToTime: {"annotator": lambda self, e: self._set_type(e, _epoch_type(e))},
    exp.Literal: {"annotator": lambda self, e: self._set_type(e, literal_type(e))},
}


def json_wildcard(node: exp.Expr) -> bool:
    """Whether ``->>``'s path ends in ``[*]``: DuckDB then returns a list of strings.

    >>> json_wildcard(sqlglot.parse_one("j ->> '$.a[*]'", "duckdb"))
    True
    """
    parts = node.expression.expressions if isinstance(node.expression, exp.JSONPath) else []
    last = parts[-1] if parts else None
    return isinstance(last, exp.JSONPathSubscript) and isinstance(last.this, exp.JSONPathWildcard)


def literal_type(node: exp.Literal) -> exp.DataType:
    """DuckDB's type of a literal: ``1.0`` is a DECIMAL(2,1) (sqlglot would say DOUBLE), which
    decides how averages and divisions of it behave.

    >>> [literal_type(exp.Literal.number(n)).sql() for n in ("1.0", "1e6", "7", "3000000000")]
    ['DECIMAL(2, 1)', 'DOUBLE', 'INT', 'BIGINT']
    """
    text = str(node.this)
    if node.is_string:
        return exp.DataType.build("VARCHAR")
    if "e" in text.lower():
        return exp.DataType.build("DOUBLE")
    if node.is_int:
        return exp.DataType.build("INT" if abs(int(text)) < 2**31 else "BIGINT")
    whole, _, fraction = text.lstrip("-").partition(".")
    digits = len(whole.lstrip("0")) + len(fraction)
    return exp.DataType.build(f"DECIMAL({max(digits, len(fraction), 1)}, {len(fraction)})")


def _median_type(node: exp.Expr) -> exp.DataType | exp.DType:
    """DuckDB interpolates numbers as DOUBLE but keeps a DECIMAL (rounded to its scale)."""
    return node.this.type if kind(node.this) == "decimal" else exp.DType.DOUBLE


def _epoch_type(node: exp.Expr) -> exp.DType:
    """``epoch_ms(TIMESTAMP)`` is a BIGINT in DuckDB; sqlglot parses it as its inverse."""
    return exp.DType.BIGINT if kind(node.this) == "timestamp" else exp.DType.TIMESTAMP


_ANONYMOUS_TYPES = {name: exp.DType.BIGINT for name in ("list_position", "list_indexof")}


def _anonymous_type(node: exp.Anonymous) -> exp.DataType | exp.DType:
    """DuckDB's result type of the functions sqlglot leaves anonymous that rules translate."""
    name = str(node.this).lower()
    if name in ("list_extract", "list_element", "array_extract") and node.expressions:
        listed = node.expressions[0].type
        if listed is not None and listed.is_type(exp.DType.ARRAY) and listed.expressions:
            element: exp.DataType = listed.expressions[0]
            return element
    return _ANONYMOUS_TYPES.get(name, exp.DType.UNKNOWN)


def parse_feature(sql: str) -> exp.Query:
    """The feature's query, parsed with list indexes kept as written (1-based).

    sqlglot rewrites DuckDB's ``list[1]`` to a 0-based index when it can tell the index is an
    integer, and leaves ``list[i]`` alone, so the index a rule sees would depend on what sqlglot
    could infer; a dialect instance with no index offset keeps every index as DuckDB reads it.

    Raises:
        Untranspilable: the SQL is not one query.
    """
    dialect = sqlglot.Dialect.get_or_raise(DIALECT)
    keep_indexes = type(dialect)()
    keep_indexes.INDEX_OFFSET = 0
    try:
        statements = keep_indexes.parse(sql)
    except SqlglotError as exc:
        raise Untranspilable(f"the SQL does not parse: {exc}") from exc
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise Untranspilable("the SQL must be exactly one query")
    return statements[0]


def typed_tree(tree: exp.Query) -> exp.Query:
    """``tree`` with columns resolved against the warehouse and DuckDB types on every node.

    Raises:
        Untranspilable: sqlglot cannot resolve the query's columns.
    """
    schema: dict[str, object] = dict(code_catalog().schema)
    metadata = {**sqlglot.Dialect.get_or_raise(DIALECT).EXPRESSION_METADATA, **_EXTRA_TYPES}
    try:
        qualified = qualify(
            tree,
            schema=schema,
            dialect=DIALECT,
            validate_qualify_columns=False,
            quote_identifiers=False,
        )
        annotated: exp.Query = annotate_types(
            qualified, schema=schema, dialect=DIALECT, expression_metadata=metadata
        )
        # sqlglot types no column read from a LATERAL subquery: copy the subquery's select
        # types onto them, then re-annotate what depended on them, until nothing changes
        while _type_lateral_columns(annotated):
            annotated = annotate_types(
                annotated,
                schema=schema,
                dialect=DIALECT,
                expression_metadata=metadata,
                overwrite_types=False,
            )
    except (SqlglotError, KeyError, ValueError) as exc:
        raise Untranspilable(f"cannot resolve the query's columns: {exc}") from exc
    return annotated


def _type_lateral_columns(tree: exp.Expr) -> bool:
    """Give unknown-typed columns the type of the subquery select (or integer range) they
    read; True if any."""
    changed = False
    for scope in traverse_scope(tree):
        sources = {**scope.sources, **scope.lateral_sources}
        for column in scope.columns:
            source = sources.get(column.table)
            if kind(column) != "unknown":
                continue
            if isinstance(source, exp.Table):
                found = integer_range_type(source)
            elif isinstance(source, Scope):
                found = _select_type(source, column.name)
            else:
                continue
            if found is not None:
                column.type = found
                changed = True
    return changed


def integer_range_type(table: exp.Table) -> exp.DataType | None:
    """BIGINT for the column of ``range(n)`` or ``range(a, b)`` over integer literals (sqlglot
    types no table function's column), else None.

    >>> import sqlglot
    >>> t = sqlglot.parse_one("SELECT * FROM range(3) AS b(j)", read="duckdb").find(exp.Table)
    >>> integer_range_type(t).sql()
    'BIGINT'
    """
    series = table.this
    if not (isinstance(series, exp.GenerateSeries) and series.args.get("is_end_exclusive")):
        return None
    bounds = (series.args.get("start"), series.args.get("end"))
    if series.args.get("step") or not all(isinstance(b, exp.Literal) and b.is_int for b in bounds):
        return None
    return exp.DataType.build("BIGINT")


def _select_type(source: Scope, name: str) -> exp.DataType | None:
    query = source.expression
    while isinstance(query, exp.Lateral | exp.Subquery):
        query = query.this
    selects = query.selects if isinstance(query, exp.Query) else []
    for select in selects:
        if select.alias_or_name == name and kind(select) != "unknown":
            found: exp.DataType | None = select.type
            return found
    return None


def kind(node: exp.Expr) -> str:
    """The family of ``node``'s DuckDB type: the distinction the rules turn on.

    >>> node = exp.column("x")
    >>> node.type = "DECIMAL(2, 1)"
    >>> kind(node), kind(exp.column("y"))
    ('decimal', 'unknown')
    """
    dtype = node.type
    if dtype is None:
        return "unknown"
    return _FAMILIES.get(dtype.this, "other")


_FAMILIES: dict[exp.DType, str] = {
    **{t: "integer" for t in exp.DataType.INTEGER_TYPES},
    **{t: "decimal" for t in exp.DataType.REAL_TYPES},
    exp.DType.DOUBLE: "float",
    exp.DType.FLOAT: "float",
    **{t: "text" for t in exp.DataType.TEXT_TYPES},
    exp.DType.JSON: "json",
    exp.DType.BOOLEAN: "boolean",
    exp.DType.DATE: "date",
    exp.DType.TIMESTAMP: "timestamp",
    exp.DType.DATETIME: "timestamp",
    exp.DType.TIMESTAMPNTZ: "timestamp",
    exp.DType.INTERVAL: "interval",
    exp.DType.ARRAY: "list",
    exp.DType.NULL: "null",
    exp.DType.UNKNOWN: "unknown",
}
NUMERIC = frozenset({"integer", "float", "decimal"})
