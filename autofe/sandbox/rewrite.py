"""Rewrites of a feature's query that every consumer shares: which tables it reads, one run's rows.

The gates compute a feature for a few target runs in perturbed worlds, and a prediction computes
it for one run; both need the same two facts about the SQL, derived the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from autofe.sandbox.guard import in_cte_scope

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


def restricted(tree: exp.Query, run_ids: Sequence[str]) -> str:
    """The feature's SQL keeping only ``run_ids``' rows (DuckDB pushes the filter down).

    >>> restricted(sqlglot.parse_one("SELECT run_id, 1 AS value FROM runs"), ["a"])
    "SELECT * FROM (SELECT run_id, 1 AS value FROM runs) AS _feature WHERE _feature.run_id IN ('a')"
    """
    names = tree.named_selects
    key = names[0] if names and names[0] != "*" else "run_id"
    ids = [exp.Literal.string(r) for r in run_ids]
    query = exp.select("*").from_(tree.copy().subquery("_feature"))
    return query.where(exp.column(key, table="_feature").isin(*ids)).sql(DIALECT)


def structure_key(sql: str) -> str:
    """The query with every literal replaced by ``?``: two features differing only in constants
    (a window of 5 runs or 10) have the same structure.

    >>> structure_key("SELECT run_id, 5 AS value FROM runs WHERE x = 'a'")
    'SELECT run_id, ? AS value FROM runs WHERE x = ?'
    >>> structure_key("SELECT run_id, 10 AS value FROM runs WHERE x = 'b'") == structure_key(
    ...     "SELECT run_id, 5 AS value FROM runs WHERE x = 'a'")
    True
    """
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except sqlglot.errors.SqlglotError:
        return " ".join(sql.split())
    normalized = tree.transform(
        lambda node: exp.Placeholder() if isinstance(node, exp.Literal) else node
    )
    # a key, not a query to run: a placeholder where DuckDB wants a literal (regexp flags) is
    # fine here, so sqlglot's "unsupported" warning about it would only be noise
    return normalized.sql(DIALECT, unsupported_level=sqlglot.ErrorLevel.IGNORE)
