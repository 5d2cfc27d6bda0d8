"""Rewrites of a feature's query that every consumer shares: which tables it reads, one run's rows.

The gates compute a feature for a few target runs in perturbed worlds, and a prediction computes
it for one run; both need the same two facts about the SQL, derived the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from autofe.sandbox.guard import in_cte_scope
from autofe.sandbox.nesting import NestedTooDeeply, parse_statements

DIALECT = "duckdb"


def referenced_tables(tree: exp.Expr) -> set[str]:
    """Tables the query reads (CTE names excluded): the only ones a world needs.

    >>> sorted(referenced_tables(sqlglot.parse_one(
    ...     "WITH h AS (SELECT * FROM runs) SELECT * FROM h JOIN stages USING (run_id)")))
    ['runs', 'stages']
    """
    return {
        t.name.lower()
        for t in tree.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier) and not in_cte_scope(t)
    }


def restricted(tree: exp.Query, run_ids: Sequence[str], *, copy: bool = True) -> str:
    """The feature's SQL keeping only ``run_ids``' rows (DuckDB pushes the filter down).

    ``copy=False`` wraps ``tree`` itself, for a caller whose tree is already its own copy (a
    world's, from :func:`~autofe.gates.world.in_world`).

    >>> restricted(sqlglot.parse_one("SELECT run_id, 1 AS value FROM runs"), ["a"])
    "SELECT * FROM (SELECT run_id, 1 AS value FROM runs) AS _feature WHERE _feature.run_id IN ('a')"
    """
    names = tree.named_selects
    key = names[0] if names and names[0] != "*" else "run_id"
    ids = [exp.Literal.string(r) for r in run_ids]
    # One copy of the tree: with the builders' and the generator's default copies it was
    # copied about eight times per call, half of this function's time in the dynamic leakage
    # check, which calls it once per world.
    inner = tree.copy() if copy else tree
    query = exp.select("*").from_(inner.subquery("_feature", copy=False), copy=False)
    condition = exp.column(key, table="_feature").isin(*ids, copy=False)
    return query.where(condition, copy=False).sql(DIALECT, copy=False)


def check_rewritable(tree: exp.Query, sql: str) -> None:
    """Refuse a query (``tree``, parsed from ``sql``) whose rewrite sqlglot cannot parse back.

    The gates and predictions run :func:`restricted` rewrites, rendered by sqlglot and parsed
    again by the sandbox guard. A chain of casts ``x::DOUBLE::DOUBLE`` parses in a loop but
    renders as nested ``CAST(CAST(x AS DOUBLE) AS DOUBLE)`` calls, which the parser follows
    recursively and which are three levels deeper: with 95 casts the feature itself is 98 levels
    deep, its rewrite 101, more than :data:`~autofe.sandbox.nesting.MAX_DEPTH`, and the dynamic
    leakage check could not run it in any world (the pure-Python parser already failed at 60).

    Raises:
        NestedTooDeeply: the rewrite is nested too deeply to check.

    >>> check_rewritable(sqlglot.parse_one("SELECT run_id, 1::INT::INT AS value FROM runs"), "")
    >>> sql = "SELECT run_id, 1" + "::INT" * 95 + " AS value FROM runs"
    >>> check_rewritable(sqlglot.parse_one(sql), sql)
    Traceback (most recent call last):
    autofe.sandbox.nesting.NestedTooDeeply: refused: statement nested too deeply to check
    """
    try:
        parse_statements(restricted(tree, [""]))
    except NestedTooDeeply as exc:
        raise NestedTooDeeply(sql) from exc


def structure_key(sql: str) -> str:
    """The query with every literal replaced by ``?``: two features differing only in constants
    (a window of 5 runs or 10) have the same structure.

    >>> structure_key("SELECT run_id, 5 AS value FROM runs WHERE x = 'a'")
    'SELECT run_id, ? AS value FROM runs WHERE x = ?'
    >>> structure_key("SELECT run_id, 10 AS value FROM runs WHERE x = 'b'") == structure_key(
    ...     "SELECT run_id, 5 AS value FROM runs WHERE x = 'a'")
    True
    """
    try:  # nesting too deep for the transform and the generator below (they recurse) is refused
        statements = parse_statements(sql)
    except (sqlglot.errors.SqlglotError, NestedTooDeeply):
        statements = []
    if not statements or statements[0] is None:
        return " ".join(sql.split())
    tree = statements[0] if len(statements) == 1 else exp.Block(expressions=statements)
    normalized = tree.transform(
        lambda node: exp.Placeholder() if isinstance(node, exp.Literal) else node
    )
    # a key, not a query to run: a placeholder where DuckDB wants a literal (regexp flags) is
    # fine here, so sqlglot's "unsupported" warning about it would only be noise
    return normalized.sql(DIALECT, unsupported_level=sqlglot.ErrorLevel.IGNORE)
