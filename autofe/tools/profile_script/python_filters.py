"""PySpark ``filter`` / ``where`` on Columns or SQL text, and date expressions in them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from datetime import date

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from autofe.tools.profile_script.dates import (
    _fold_moment,
    _literal_moment,
    _Moment,
    _partition_like,
    _Ranges,
)
from autofe.tools.profile_script.models import MAX_VALUES, FilterFact
from autofe.tools.profile_script.placeholders import _TOKEN_RE, _Params, _substitute_parameters
from autofe.tools.profile_script.python_context import (
    _call_name,
    _chain_names,
    _display,
    _Py,
    _py_text,
    _receiver,
    _spark_function,
)
from autofe.tools.profile_script.python_joins import _py_column
from autofe.tools.profile_script.python_sources import _df_source
from autofe.tools.profile_script.sql_filters import _FLIPPED, _add_condition
from autofe.tools.profile_script.sql_scopes import _Scope, _Source

_PY_OPERATORS: dict[type[ast.cmpop], str] = {
    ast.Eq: "=",
    ast.NotEq: "!=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Lt: "<",
    ast.LtE: "<=",
}


def _py_filter(call: ast.Call, ctx: _Py) -> None:
    receiver = _receiver(call)
    if not call.args or receiver is None:
        return
    condition = call.args[0]
    if isinstance(condition, ast.Lambda):
        if "rdd" in _chain_names(receiver):
            ctx.facts.udfs.add("rdd.filter")
        return
    table = _df_source(receiver, ctx)
    text = _py_text(condition, ctx)
    if text is not None:
        _py_sql_condition(text, table, call.lineno, ctx)
        return
    ranges = ctx.ranges.setdefault(id(_statement_of(call, ctx)), _Ranges())
    for column, operator, values in _py_shapes(condition, ctx, negated=False):
        _py_add_filter(table, column, operator, values, ranges, ctx)


def _statement_of(node: ast.AST, ctx: _Py) -> ast.AST:
    """The statement a call sits in: filters of one statement bound one range together."""
    current: ast.AST = node
    while not isinstance(current, ast.stmt) and id(current) in ctx.parents:
        current = ctx.parents[id(current)]
    return current


def _py_sql_condition(text: str, table: str | None, line: int, ctx: _Py) -> None:
    """A filter written as a SQL string (``df.where("dt >= '2024-01-01'")``)."""
    sql = _substitute_parameters(text, ctx.facts.params)
    try:
        condition = exp.condition(sql, dialect="spark")
    except (ParseError, TokenError):
        ctx.facts.warnings.append(f"line {line}: filter text could not be parsed as SQL")
        return
    source = _Source("", table, None, True) if table else None
    _add_condition(condition, _Scope([source] if source else []), ctx.facts)


def _py_shapes(
    node: ast.expr, ctx: _Py, *, negated: bool
) -> Iterator[tuple[str, str, list[ast.expr]]]:
    """``(column, operator, value nodes)`` for each predicate of a Column expression."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd | ast.BitOr):
        yield from _py_shapes(node.left, ctx, negated=negated)
        yield from _py_shapes(node.right, ctx, negated=negated)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        yield from _py_shapes(node.operand, ctx, negated=not negated)
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        found = _py_comparison(node, ctx)
        if found:
            column, operator, value = found
            yield column, ("not " if negated else "") + operator, [value]
    elif isinstance(node, ast.Call):
        found_call = _py_method_predicate(node, ctx)
        if found_call:
            column, operator, values = found_call
            yield column, _negate(operator) if negated else operator, values


def _negate(operator: str) -> str:
    return operator.replace("is ", "is not ") if operator.startswith("is ") else "not " + operator


def _py_comparison(node: ast.Compare, ctx: _Py) -> tuple[str, str, ast.expr] | None:
    operator = _PY_OPERATORS.get(type(node.ops[0]))
    if operator is None:
        return None
    left, right = node.left, node.comparators[0]
    column = _py_column(left, ctx)
    if column is not None and _py_column(right, ctx) is None:
        return column, operator, right
    column = _py_column(right, ctx)
    if column is not None and _py_column(left, ctx) is None:
        return column, _FLIPPED.get(operator, operator), left
    return None


_METHOD_PREDICATES = {
    "between": "between",
    "isin": "in",
    "like": "like",
    "ilike": "ilike",
    "rlike": "rlike",
    "startswith": "like",
    "endswith": "like",
    "contains": "like",
    "isNull": "is null",
    "isNotNull": "is not null",
}


def _py_method_predicate(call: ast.Call, ctx: _Py) -> tuple[str, str, list[ast.expr]] | None:
    operator = _METHOD_PREDICATES.get(_call_name(call))
    receiver = _receiver(call)
    column = _py_column(receiver, ctx) if receiver is not None else None
    if operator is None or column is None:
        return None
    values: list[ast.expr] = list(call.args)
    if len(values) == 1 and isinstance(values[0], ast.List | ast.Tuple | ast.Set):
        values = list(values[0].elts)
    return column, operator, values


def _py_add_filter(
    table: str | None,
    column: str,
    operator: str,
    values: list[ast.expr],
    ranges: _Ranges,
    ctx: _Py,
) -> None:
    rendered = [_py_value(v, column, ctx) for v in values[:MAX_VALUES]]
    if len(values) > MAX_VALUES:
        rendered.append(f"... {len(values) - MAX_VALUES} more")
    fact = FilterFact(
        column=column,
        table=table,
        operator=operator,
        values=rendered,
        partition_like=_partition_like(column),
    )
    ctx.facts.add(fact)
    if not operator.startswith("not "):
        moments = [_py_moment(v, column, ctx) for v in values]
        ranges.add(table, column, operator, moments)


def _py_value(node: ast.expr, column: str, ctx: _Py) -> str:
    """A filter value for the reader; numbers and days also go to ``literals``."""
    while isinstance(node, ast.Call) and _spark_function(node, ctx) == "lit" and node.args:
        node = node.args[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if not isinstance(node.value, bool):
            ctx.facts.literal("numbers", str(node.value))
        return str(node.value)
    moment = _py_moment(node, column, ctx)
    if moment is not None and moment.day and not moment.whole_year:
        ctx.facts.literal("dates", moment.render())
    if isinstance(node, ast.Constant):
        return str(node.value)
    text = _py_text(node, ctx)
    if text is not None:
        return _display(text, ctx)
    return moment.render() if moment else ast.unparse(node)


_PY_DATE_MAKERS = frozenset({"date", "datetime"})
_PY_WRAPPERS = frozenset({"lit", "to_date", "to_timestamp", "date", "timestamp"})
_PY_NOW = frozenset({"current_date", "current_timestamp", "now", "today", "utcnow"})


def _py_moment(node: ast.expr, column: str, ctx: _Py) -> _Moment | None:
    """A Python or PySpark date expression as a point in time, when it is constant enough."""
    params = ctx.facts.params
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int):
        text = str(node.value)
        return _literal_moment(text, isinstance(node.value, str), column, params)
    if isinstance(node, ast.Name | ast.JoinedStr):
        bound = _py_text(node, ctx)
        if bound is not None and not _TOKEN_RE.fullmatch(bound):
            return _literal_moment(bound, True, column, params)
        symbol = params.restore(bound) if bound else "{" + ast.unparse(node) + "}"
        return _Moment(None, symbol)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        return _py_moment_arithmetic(node, column, ctx)
    if isinstance(node, ast.Call):
        return _py_moment_call(node, column, ctx)
    return None


def _py_moment_call(call: ast.Call, column: str, ctx: _Py) -> _Moment | None:
    name = _spark_function(call, ctx) or _call_name(call)
    if name in _PY_NOW:
        return _Moment(None, "current_date")
    if name in _PY_DATE_MAKERS and len(call.args) >= 3:
        return _py_date(call.args[:3])
    if name in _PY_WRAPPERS and call.args:
        return _py_moment(call.args[0], column, ctx)
    if name in ("date_add", "date_sub", "add_months") and len(call.args) == 2:
        base = _py_moment(call.args[0], column, ctx)
        amount = call.args[1]
        if (
            base is None
            or not isinstance(amount, ast.Constant)
            or not isinstance(amount.value, int)
        ):
            return None
        sign = -1 if name == "date_sub" else 1
        if name == "add_months":
            return base.shift(months=amount.value)
        return base.shift(sign * amount.value)
    if name == "expr" and call.args:
        text = _py_text(call.args[0], ctx)
        return _sql_text_moment(text, column, ctx.facts.params) if text else None
    return None


def _py_date(args: list[ast.expr]) -> _Moment | None:
    """``date(2024, 1, 31)`` / ``datetime(2024, 1, 31, ...)``."""
    parts = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
    if len(parts) != 3:
        return None
    try:
        return _Moment(date(parts[0], parts[1], parts[2]))
    except ValueError:
        return None


def _sql_text_moment(text: str, column: str, params: _Params) -> _Moment | None:
    try:
        node: exp.Expr = exp.maybe_parse(_substitute_parameters(text, params), dialect="spark")
    except (ParseError, TokenError):
        return None
    return _fold_moment(node, column, params)


def _py_moment_arithmetic(node: ast.BinOp, column: str, ctx: _Py) -> _Moment | None:
    """``date(...) - timedelta(days=7)``."""
    base = _py_moment(node.left, column, ctx)
    delta = node.right
    if base is None or not isinstance(delta, ast.Call) or _call_name(delta) != "timedelta":
        return None
    days = 0
    for keyword in delta.keywords:
        value = keyword.value
        if not isinstance(value, ast.Constant) or not isinstance(value.value, int):
            return None
        days += value.value * {"days": 1, "weeks": 7}.get(keyword.arg or "", 0)
    first = delta.args[0] if delta.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, int):
        days += first.value
    return base.shift(days if isinstance(node.op, ast.Add) else -days)
