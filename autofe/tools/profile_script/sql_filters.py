"""SQL predicates read as column-versus-literal filters, and the date ranges they bound."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from autofe.tools.profile_script.dates import _fold_moment, _partition_like, _Ranges
from autofe.tools.profile_script.facts import _Facts
from autofe.tools.profile_script.models import MAX_VALUES, FilterFact
from autofe.tools.profile_script.placeholders import _is_placeholder
from autofe.tools.profile_script.sql_scopes import _resolve, _Scope

_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.NullSafeEQ: "<=>",
}
_FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
_LIKES: dict[type[exp.Expr], str] = {
    exp.Like: "like",
    exp.ILike: "ilike",
    exp.RegexpLike: "rlike",
}
_SUBQUERY_NODES = (exp.Subquery, exp.Select, exp.Exists)


@dataclass
class _Shape:
    """A predicate read as ``column-side operator values``."""

    side: exp.Expr
    operator: str
    values: list[exp.Expr]


def _split(node: exp.Expr, kind: type[exp.Expr]) -> Iterator[exp.Expr]:
    """Operands of nested AND (or OR) nodes in order, parentheses looked through.

    Iterative: generated SQL can chain thousands of ANDs.

    >>> import sqlglot
    >>> [c.sql() for c in _split(sqlglot.parse_one("a = 1 AND (b = 2 AND c = 3)"), exp.And)]
    ['a = 1', 'b = 2', 'c = 3']
    """
    stack = [node]
    while stack:
        current = stack.pop()
        while isinstance(current, exp.Paren):
            current = current.this
        if isinstance(current, kind):
            stack += [current.expression, current.this]
        else:
            yield current


def _columns(node: exp.Expr) -> list[exp.Column]:
    return [c for c in node.find_all(exp.Column) if not _is_placeholder(c)]


def _single_column(side: exp.Expr) -> exp.Column | None:
    """The one column an expression reads, unless it aggregates or holds a subquery."""
    if side.find(exp.AggFunc, exp.Window, *_SUBQUERY_NODES):
        return None
    columns = _columns(side)
    return columns[0] if len(columns) == 1 else None


def _is_constant(node: exp.Expr) -> bool:
    return not _columns(node) and not node.find(*_SUBQUERY_NODES)


def _shape(pred: exp.Expr) -> _Shape | None:
    """Read ``pred`` as column-vs-literals, the column side first."""
    operator = _COMPARISONS.get(type(pred))
    if operator:
        left, right = pred.this, pred.expression
        if _single_column(left) and _is_constant(right):
            return _Shape(left, operator, [right])
        if _single_column(right) and _is_constant(left):
            return _Shape(right, _FLIPPED.get(operator, operator), [left])
        return None
    if _single_column(pred.this) is None:
        return None
    return _special_shape(pred)


def _special_shape(pred: exp.Expr) -> _Shape | None:
    negate = "not " if pred.args.get("negate") else ""
    if isinstance(pred, exp.Between):
        values = [pred.args["low"], pred.args["high"]]
        return (
            _Shape(pred.this, negate + "between", values)
            if all(map(_is_constant, values))
            else None
        )
    if isinstance(pred, exp.In):
        if pred.args.get("query"):
            return _Shape(pred.this, negate + "in", [exp.Var(this="(subquery)")])
        values = pred.expressions
        return _Shape(pred.this, negate + "in", values) if all(map(_is_constant, values)) else None
    if type(pred) in _LIKES and _is_constant(pred.expression):
        return _Shape(pred.this, negate + _LIKES[type(pred)], [pred.expression])
    if isinstance(pred, exp.Is):
        return _Shape(pred.this, "is", [pred.expression])
    return None


def _predicates(condition: exp.Expr) -> Iterator[tuple[exp.Expr, bool]]:
    """Every predicate of a condition with whether a NOT wraps it; subqueries left out."""
    for node in condition.walk(bfs=False, prune=lambda n: isinstance(n, _SUBQUERY_NODES)):
        if type(node) in _COMPARISONS or isinstance(
            node, exp.Between | exp.In | exp.Is | exp.Like | exp.ILike | exp.RegexpLike
        ):
            yield node, isinstance(node.parent, exp.Not)


def _add_condition(condition: exp.Expr, scope: _Scope, facts: _Facts) -> None:
    for pred, negated in _predicates(condition):
        shape = _shape(pred)
        if shape is not None:
            _add_filter(shape, negated, scope, facts)
    for group in _conjunct_groups(condition):
        ranges = _Ranges()
        for pred in group:
            shape = _shape(pred)
            column = _date_column(shape.side) if shape else None
            if shape and column:
                moments = [_fold_moment(v, column.name, facts.params) for v in shape.values]
                ranges.add(_table_of(column, scope), column.name, shape.operator, moments)
        for found in ranges.date_ranges():
            facts.add(found)


def _table_of(column: exp.Column, scope: _Scope) -> str | None:
    source = _resolve(column, scope)
    return source.name if source else None


def _add_filter(shape: _Shape, negated: bool, scope: _Scope, facts: _Facts) -> None:
    column = _single_column(shape.side)
    if column is None:
        return
    if shape.operator == "is":
        operator = ("is not " if negated else "is ") + shape.values[0].sql("spark").lower()
        values = []
    else:
        operator = ("not " if negated else "") + shape.operator
        values = [_render_sql_value(v, column.name, facts) for v in shape.values[:MAX_VALUES]]
    if len(shape.values) > MAX_VALUES:
        values.append(f"... {len(shape.values) - MAX_VALUES} more")
    side = column.name if shape.side is column else shape.side.sql(dialect="spark")
    facts.add(
        FilterFact(
            column=facts.params.restore(side),
            table=_table_of(column, scope),
            operator=operator,
            values=values,
            partition_like=_partition_like(column.name),
        )
    )


def _render_sql_value(node: exp.Expr, column: str, facts: _Facts) -> str:
    """A filter value as a reader wants it: literal text, ISO date, parameter as written."""
    if isinstance(node, exp.Literal):
        if not node.is_string:
            facts.literal("numbers", node.this)
        moment = _fold_moment(node, column, facts.params)
        if moment and moment.day and not moment.whole_year:
            facts.literal("dates", moment.render())
        return facts.params.restore(node.this)
    if _is_placeholder(node):
        return facts.params.display(node.name) or node.name
    moment = _fold_moment(node, column, facts.params)
    if moment is not None and moment.whole_year and moment.day:
        return str(moment.day.year)
    if moment is not None:
        if moment.day:
            facts.literal("dates", moment.render())
        return moment.render()
    return facts.params.restore(node.sql(dialect="spark"))


def _conjunct_groups(condition: exp.Expr) -> Iterator[list[exp.Expr]]:
    """Predicates that hold together (AND); every OR branch is a group of its own."""
    group = []
    for part in _split(condition, exp.And):
        if isinstance(part, exp.Or):
            for branch in _split(part, exp.Or):
                yield from _conjunct_groups(branch)
        else:
            group.append(part)
    yield group


def _date_column(side: exp.Expr) -> exp.Column | None:
    """The column itself, or a column cast to a date: the sides a date range can bound."""
    while isinstance(side, exp.Cast | exp.TryCast | exp.TsOrDsToDate | exp.Date):
        side = side.this
    return side if isinstance(side, exp.Column) and not _is_placeholder(side) else None
