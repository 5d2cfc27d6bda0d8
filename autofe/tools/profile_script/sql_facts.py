"""One parsed SQL statement's facts: tables read and written, views, functions, shape."""

from __future__ import annotations

import re

from sqlglot import exp

from autofe.tools.profile_script.facts import _Facts
from autofe.tools.profile_script.sql_joins import _add_merge_join, _add_scope
from autofe.tools.profile_script.sql_scopes import _scopes, _table_name


def _add_statement(tree: exp.Expr, facts: _Facts, line: int) -> None:
    facts.statements += 1
    if isinstance(tree, exp.Command):
        facts.warnings.append(f"line {line}: only the command name was understood: {tree.name}")
        return
    ctes = _cte_columns(tree)
    targets = _write_targets(tree)
    for target in targets:
        facts.written[_table_name(target, facts.params)] = None
    _add_reads(tree, targets, ctes, facts)
    _add_views(tree, facts)
    for node, scope in _scopes(tree, ctes, facts.params):
        _add_scope(node, scope, facts)
    if isinstance(tree, exp.Merge):
        _add_merge_join(tree, ctes, facts)
    _add_functions(tree, facts)
    _add_shape(tree, facts)


def _cte_columns(tree: exp.Expr) -> dict[str, frozenset[str]]:
    """CTE name (lower case) → the columns it produces."""
    found = {}
    for cte in tree.find_all(exp.CTE):
        body = cte.this
        columns = list(body.named_selects) if isinstance(body, exp.Query) else []
        alias = cte.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            columns = [c.name for c in alias.columns]
        found[cte.alias.lower()] = frozenset(c.lower() for c in columns)
    return found


def _write_targets(tree: exp.Expr) -> list[exp.Expr]:
    """The tables (or directories) a statement writes: DML, COPY INTO and CREATE TABLE AS."""
    ctas = isinstance(tree, exp.Create) and _kind(tree) == "TABLE" and tree.args.get("expression")
    dml = isinstance(tree, exp.Insert | exp.Merge | exp.Update | exp.Delete | exp.Copy)
    if not (ctas or dml):
        return []
    target = tree.this
    if isinstance(target, exp.Schema):
        target = target.this
    return [target] if isinstance(target, exp.Expr) else []


def _kind(tree: exp.Create) -> str:
    return str(tree.args.get("kind") or "").upper()


def _add_views(tree: exp.Expr, facts: _Facts) -> None:
    """Views and cached tables are named queries: reading them later is not a table scan."""
    if (isinstance(tree, exp.Create) and _kind(tree) == "VIEW") or isinstance(tree, exp.Cache):
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if isinstance(target, exp.Expr):
            facts.views.add(_table_name(target, facts.params).lower())


def _add_reads(
    tree: exp.Expr,
    targets: list[exp.Expr],
    ctes: dict[str, frozenset[str]],
    facts: _Facts,
) -> None:
    skip = {id(t) for t in targets}
    named = [tree.this] if isinstance(tree, exp.Create | exp.Cache) else []
    for node in [*named, *tree.find_all(exp.Hint)]:
        if isinstance(node, exp.Expr):
            skip.update(id(t) for t in node.find_all(exp.Table))
    for table in tree.find_all(exp.Table):
        if id(table) in skip or not isinstance(table.this, exp.Identifier):
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        facts.read[_table_name(table, facts.params)] = None
    if isinstance(tree, exp.Copy):
        for path in tree.args.get("files") or []:
            facts.read[facts.params.restore(path.name)] = None


def _add_shape(tree: exp.Expr, facts: _Facts) -> None:
    facts.ctes += sum(1 for _ in tree.find_all(exp.CTE))
    facts.unions += sum(1 for _ in tree.find_all(exp.Union))
    facts.subqueries += sum(
        1 for s in tree.find_all(exp.Subquery) if not isinstance(s.parent, exp.SetOperation)
    )
    facts.subqueries += sum(1 for _ in tree.find_all(exp.Exists))
    facts.distinct |= any(s.args.get("distinct") for s in tree.find_all(exp.Select))
    facts.distinct |= any(s.args.get("distinct") for s in tree.find_all(exp.SetOperation))
    facts.order_by |= any(
        isinstance(o.parent, exp.Query) for o in tree.find_all(exp.Order) if o.parent
    )
    for limit in tree.find_all(exp.Limit):
        value = limit.expression
        if isinstance(value, exp.Literal) and not value.is_string:
            facts.literal("limit", value.this)


_NAME_ALIASES = {"mean": "avg", "approx_distinct": "approx_count_distinct"}


def _function_name(node: exp.Expr) -> str:
    """The Spark spelling of a function call, ``_distinct`` appended for DISTINCT arguments.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("select count(distinct a), approx_count_distinct(b)", "spark")
    >>> [_function_name(f) for f in tree.expressions]
    ['count_distinct', 'approx_count_distinct']
    """
    if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
        return str(node.name).lower()
    match = re.match(r"\s*([A-Za-z_][\w.]*)\s*\(", node.sql(dialect="spark"))
    name = match[1].lower() if match else node.key.lower()
    name = _NAME_ALIASES.get(name, name)
    return name + "_distinct" if isinstance(node.this, exp.Distinct) else name


def _windowed(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.IgnoreNulls | exp.RespectNulls):
        parent = parent.parent
    return isinstance(parent, exp.Window) and (parent.this is node or parent.this is node.parent)


def _add_functions(tree: exp.Expr, facts: _Facts) -> None:
    for node in tree.find_all(exp.Func, exp.Window):
        if isinstance(node, exp.Window):
            inner = node.this
            while isinstance(inner, exp.IgnoreNulls | exp.RespectNulls):
                inner = inner.this
            facts.windows.add(_function_name(inner) if isinstance(inner, exp.Func) else "window")
        elif isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
            if isinstance(node.parent, exp.Dot):
                facts.udfs.add(node.parent.sql(dialect="spark").split("(")[0].lower())
            elif not isinstance(node.parent, exp.Table):
                facts.udfs.add(_function_name(node))
        elif isinstance(node, exp.AggFunc) and not _windowed(node):
            facts.aggregations.add(_function_name(node))
