"""Translate a feature's DuckDB SQL into Spark SQL that computes the same values, or refuse it.

The pipeline, as data flows:

1. the sandbox's guard (:func:`~autofe.sandbox.guard.guard_sql`): one read query over the
   warehouse tables calling allow-listed functions, the same check DuckDB features pass;
2. :func:`~autofe.sandbox.duck_types.parse_feature` and
   :func:`~autofe.sandbox.duck_types.typed_tree`: columns resolved, DuckDB types inferred;
3. :func:`~autofe.sandbox.spark_rules.spark_node` on every node, children first: keep, rewrite,
   or refuse (the allow-list);
4. :func:`~autofe.sandbox.asof_joins.asof_joins`: each ``ASOF JOIN`` as a join to a window
   lookup (Spark has no ASOF join; the rules keep the join's translated condition for it);
5. CTE names made unique (sqlglot's Spark writer lifts nested CTEs to the top level);
6. sqlglot writes Spark SQL, failing on anything it cannot express.

A feature's as-of semantics live in its SQL (``h.end_time < t.submit_time``): the sandbox runs
the SQL as written over whole tables, so a faithful translation keeps them.
"""

from __future__ import annotations

import itertools

from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError
from sqlglot.optimizer.scope import Scope, ScopeType, traverse_scope

from autofe.errors import SandboxViolation, Untranspilable
from autofe.sandbox.asof_joins import asof_joins
from autofe.sandbox.duck_types import parse_feature, typed_tree
from autofe.sandbox.guard import guard_sql, visible_ctes
from autofe.sandbox.spark_rules import spark_node
from autofe.warehouse.catalog import code_catalog

SPARK = "spark"


def to_spark_sql(sql: str) -> str:
    """Spark SQL computing, row for row, what ``sql`` computes in DuckDB.

    Raises:
        Untranspilable: the sandbox refuses the SQL, or part of it has no Spark form known to
            compute the same values (the message names the part and the difference).

    >>> print(to_spark_sql("SELECT run_id, duration_s / 60 AS value FROM runs"))
    SELECT runs.run_id AS run_id, (CAST(runs.duration_s AS DOUBLE) / CAST(60 AS DOUBLE)) ...
    """
    catalog = code_catalog()
    try:
        guard_sql(sql, catalog)
    except SandboxViolation as exc:
        raise Untranspilable(f"the sandbox refuses it: {exc.reason}", exc.span) from exc
    typed = typed_tree(parse_feature(sql))
    check_correlation(typed)
    tree = translate(typed)
    asof_joins(tree)
    unique_cte_names(tree, catalog.tables())
    try:
        return tree.sql(SPARK, unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        raise Untranspilable(f"sqlglot cannot write it as Spark SQL: {exc}") from exc


def check_correlation(tree: exp.Expr) -> None:
    """Refuse an outer reference that crosses two subquery expressions (or LATERALs).

    Spark resolves a correlated column only against the query directly around a subquery
    expression (derived tables in between are fine); DuckDB resolves it at any depth.

    Raises:
        Untranspilable: naming the column.
    """
    for scope in traverse_scope(tree):
        for column in scope.external_columns:
            if _crossings(scope, column.table) > 1:
                raise Untranspilable(
                    f"{column.sql('duckdb')} is referenced from two subqueries deep; Spark "
                    "resolves correlated columns only from the query directly around a subquery"
                )


def _crossings(scope: Scope, table: str) -> int:
    """Subquery-expression and LATERAL boundaries between ``scope`` and where ``table`` is."""
    crossings = 0
    current: Scope | None = scope
    while current is not None and table not in current.sources:
        if current.scope_type in (ScopeType.SUBQUERY, ScopeType.UDTF):
            crossings += 1
        current = current.parent
    return crossings


def translate(tree: exp.Query) -> exp.Query:
    """Apply the rules to every node, children before parents (a rule sees translated
    children, each still carrying the DuckDB type of what it replaced)."""
    for node in reversed(list(tree.walk())):
        if _inside_operand_spec(node):
            continue
        replacement = spark_node(node)
        if replacement is not node:
            if replacement.type is None:
                replacement.type = node.type
            node.replace(replacement)
    return tree


def _inside_operand_spec(node: exp.Expr) -> bool:
    """Parts of a JSON path or a type name: the rule of the node holding them judges them."""
    return node.find_ancestor(exp.JSONPath, exp.DataType) is not None


def unique_cte_names(tree: exp.Expr, tables: frozenset[str]) -> None:
    """Rename CTEs so that none shares a name with another, nor a nested one with a table.

    sqlglot writes Spark SQL with every CTE at the top level: two subqueries' ``conf`` CTEs
    would then clash, and a nested CTE named like a table would hide it from the whole query.

    >>> import sqlglot
    >>> q = sqlglot.parse_one("SELECT * FROM (WITH a AS (SELECT 1) SELECT * FROM a) "
    ...     "JOIN (WITH a AS (SELECT 2) SELECT * FROM a) ON TRUE")
    >>> unique_cte_names(q, frozenset())
    >>> [cte.alias for cte in q.find_all(exp.CTE)], q.find_all(exp.Table).__next__().name
    (['a', 'a_2'], 'a')
    """
    ctes = list(tree.find_all(exp.CTE))
    targets = {id(t): cte for t in tree.find_all(exp.Table) if (cte := resolve_cte(t))}
    used = {c.alias_or_name.lower() for c in ctes} | set(tables)
    seen: set[str] = set()
    for cte in ctes:
        name = cte.alias_or_name.lower()
        nested = cte.find_ancestor(exp.Subquery, exp.CTE) is not None
        if name in seen or (nested and name in tables):
            fresh = next(f"{name}_{n}" for n in itertools.count(2) if f"{name}_{n}" not in used)
            used.add(fresh)
            _rename(tree, cte, fresh, targets)
            name = fresh
        seen.add(name)


def _rename(tree: exp.Expr, cte: exp.CTE, fresh: str, targets: dict[int, exp.CTE]) -> None:
    for table in tree.find_all(exp.Table):
        if targets.get(id(table)) is cte:
            alias = table.alias or table.name
            table.set("this", exp.to_identifier(fresh))
            table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    cte.set("alias", exp.TableAlias(this=exp.to_identifier(fresh)))


def resolve_cte(table: exp.Table) -> exp.CTE | None:
    """The CTE a table name refers to where it stands (DuckDB's scoping), or None.

    >>> import sqlglot
    >>> q = sqlglot.parse_one("WITH a AS (SELECT 1) SELECT * FROM (WITH a AS (SELECT 2) "
    ...     "SELECT * FROM a) JOIN a ON TRUE")
    >>> sorted((t.find_ancestor(exp.Join) is None, resolve_cte(t).this.sql())
    ...        for t in q.find_all(exp.Table))
    [(False, 'SELECT 1'), (True, 'SELECT 2')]
    """
    if table.db or not isinstance(table.this, exp.Identifier):
        return None
    name = table.name.lower()
    found = (c for c in visible_ctes(table) if isinstance(c, exp.CTE))
    return next((cte for cte in found if cte.alias_or_name.lower() == name), None)
