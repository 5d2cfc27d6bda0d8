"""The SQL shapes the static leakage check recognises: conjuncts, orderings, windows.

Pure questions about one sqlglot node (is this predicate ``x < T`` in disguise, does this
query pick rows, which frame does this window read), asked by the analysis in
:mod:`autofe.gates.leakage_static`.
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlglot  # noqa: F401 (the doctests parse with it)
from sqlglot import exp

from autofe.gates.leakage_lineage import SELECTORS, Env, Mode, WindowShape


def _conjuncts(predicate: exp.Expr | None) -> list[exp.Expr]:
    """Top-level AND operands; anything under OR / NOT stays one opaque conjunct.

    >>> [c.sql() for c in _conjuncts(sqlglot.parse_one("a < b AND (c = d AND (e OR f))"))]
    ['a < b', 'c = d', 'e OR f']
    """
    if predicate is None:
        return []
    if isinstance(predicate, exp.Paren):
        return _conjuncts(predicate.this)
    if isinstance(predicate, exp.And):
        return _conjuncts(predicate.this) + _conjuncts(predicate.expression)
    return [predicate]


_FLIPPED: dict[type[exp.Expr], tuple[bool, bool]] = {
    # comparison -> (operands swapped, strict) when read as "small < big" / "small <= big"
    exp.LT: (False, True),
    exp.LTE: (False, False),
    exp.GT: (True, True),
    exp.GTE: (True, False),
}
_NEGATED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.LT: exp.GTE,
    exp.LTE: exp.GT,
    exp.GT: exp.LTE,
    exp.GTE: exp.LT,
}


def orderings(predicate: exp.Expr) -> list[tuple[exp.Expr, exp.Expr, bool]]:
    """A conjunct read as ``(small, big, strict)``: ``small < big`` or ``small <= big``.

    >>> [(a.sql(), b.sql(), s) for a, b, s in orderings(sqlglot.parse_one("NOT (x > y)"))]
    [('x', 'y', False)]
    >>> [(a.sql(), b.sql(), s) for a, b, s in orderings(sqlglot.parse_one("x BETWEEN a AND b"))]
    [('x', 'b', False), ('a', 'x', False)]
    """
    predicate = strip(predicate)
    comparison = strip(predicate.this) if isinstance(predicate, exp.Not) else None
    if comparison is not None and type(comparison) in _NEGATED:
        predicate = _NEGATED[type(comparison)](
            this=comparison.this, expression=comparison.expression
        )
    if type(predicate) in _FLIPPED:
        swapped, strict = _FLIPPED[type(predicate)]
        a, b = predicate.this, predicate.expression
        return [(b, a, strict)] if swapped else [(a, b, strict)]
    if isinstance(predicate, exp.EQ):
        a, b = predicate.this, predicate.expression
        return [(a, b, False), (b, a, False)]
    if isinstance(predicate, exp.Between):
        low, high = predicate.args["low"], predicate.args["high"]
        return [(predicate.this, high, False), (low, predicate.this, False)]
    return []


def restrictions(
    select: exp.Select, everyone: frozenset[str]
) -> Iterator[tuple[exp.Expr, frozenset[str]]]:
    """Each WHERE / ON conjunct with the aliases whose rows it filters."""
    from_ = select.args.get("from_")
    seen: list[str] = [from_.this.alias_or_name] if from_ else []
    for join in select.args.get("joins") or []:
        name = join.this.alias_or_name
        filtered = _join_filters(join, name, seen)
        seen.append(name)
        for conjunct in _conjuncts(join.args.get("on")):
            yield conjunct, filtered
    where = select.args.get("where")
    for conjunct in _conjuncts(where.this if where else None):
        yield conjunct, everyone


def _join_filters(join: exp.Join, name: str, before: list[str]) -> frozenset[str]:
    """An ON clause filters only the null-supplying side of an outer join."""
    if join.kind == "ANTI" or join.side == "LEFT":
        return frozenset({name})
    if join.side == "RIGHT":
        return frozenset(before)
    if join.side == "FULL":
        return frozenset()
    return frozenset([*before, name])


def _has_aggregate(expression: exp.Expr) -> bool:
    """An aggregate outside windows and nested queries."""
    stack = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.AggFunc):
            return True
        if not isinstance(node, (exp.Window, exp.Query)) or node is expression:
            stack.extend(node.iter_expressions())
    return False


def _aggregated(select: exp.Select) -> bool:
    return bool(select.args.get("group")) or any(_has_aggregate(e) for e in select.expressions)


def _grouped_by(select: exp.Select, column: exp.Column) -> bool:
    group = select.args.get("group")
    if group is None:
        return False
    return bool(group.args.get("all")) or any(e == column for e in group.expressions)


def projection_of(select: exp.Select, key: str | int) -> exp.Expr | None:
    if isinstance(key, int):
        return select.expressions[key] if key < len(select.expressions) else None
    return next((e for e in select.expressions if e.alias_or_name == key), None)


def _index(query: exp.Query, key: str | int) -> int | None:
    if isinstance(key, int):
        return key
    names = query.named_selects
    return names.index(key) if key in names else None


def operand_key(env: Env, key: str | int) -> str | int | None:
    """The key to ask a branch for: set operations answer by position, a LATERAL by name."""
    expression = env.scope.expression
    return _index(expression, key) if isinstance(expression, exp.SetOperation) else key


def through_aggregate(select: exp.Select, projection: exp.Expr, mode: Mode) -> exp.Expr | None:
    """What a projection passes through: a column (a group key when aggregated, or picked by
    a selector aggregate in ``selected`` mode) or a scalar subquery."""
    expression = strip(projection.unalias())
    while isinstance(expression, (exp.IgnoreNulls, exp.RespectNulls)):
        expression = expression.this
    if isinstance(expression, SELECTORS) and mode == "selected":
        expression = strip(expression.this)
    elif isinstance(expression, exp.Column) and _aggregated(select):
        return expression if _grouped_by(select, expression) else None
    if isinstance(expression, exp.Subquery):
        return expression if mode != "filter" else None
    return expression if isinstance(expression, exp.Column) else None


def picks_rows(query: exp.Expr) -> bool:
    """LIMIT / OFFSET / DISTINCT ON choose rows after looking at all of them."""
    distinct = query.args.get("distinct")
    on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
    return any(query.args.get(k) is not None for k in ("limit", "offset", "fetch")) or bool(on)


def width(expression: exp.Expr) -> int:
    return len(expression.selects) if isinstance(expression, exp.Query) else 0


def reads_every_column(node: exp.Expr) -> bool:
    """DuckDB's ``COLUMNS(...)`` and stars left unexpanded (``* LIKE 'x%'``); not COUNT(*)."""
    if isinstance(node, exp.Columns):
        return True
    return isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count)


def is_literal(node: exp.Expr | None, value: str) -> bool:
    return isinstance(node, exp.Literal) and node.is_string and node.this == value


def positive_interval(node: exp.Expr) -> bool:
    """``INTERVAL '3' DAY`` with a positive amount (subtracting it moves strictly earlier)."""
    if not isinstance(node, exp.Interval) or not isinstance(node.this, exp.Literal):
        return False
    try:
        return float(str(node.this.this).split()[0]) > 0
    except (ValueError, IndexError):
        return False


_TIME_CASTS = (
    exp.DataType.Type.DATE,
    exp.DataType.Type.TIMESTAMP,
    exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.DATETIME,
)


MONOTONE = (exp.TimeToUnix, exp.UnixToTime)
"""epoch() / epoch_ms(): order-preserving, so ``epoch(a) < epoch(b)`` is ``a < b``."""


def monotone(node: exp.Expr) -> exp.Expr | None:
    inner: exp.Expr | None = node.this if isinstance(node, MONOTONE) else None
    return inner


def below(node: exp.Expr) -> exp.Expr | None:
    """The argument of a transform whose result is at most that argument (truncation, casts
    between time types, epoch conversions), else None."""
    time_cast = isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type(*_TIME_CASTS)
    truncated = isinstance(node, (exp.TimestampTrunc, exp.DateTrunc))
    inner: exp.Expr | None = node.this if time_cast or truncated else monotone(node)
    return inner


def filtered_column(env: Env, node: exp.Expr, filtered: frozenset[str]) -> exp.Column | None:
    """``node`` if it is a column of a source of ``env`` whose rows the conjunct filters."""
    if isinstance(node, exp.Column) and node.table in filtered and node.table in env.sources:
        return node
    return None


def strip(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def span_of(*nodes: exp.Expr | None) -> tuple[int, int] | None:
    """Character span ``sql[start:end]`` of the first node that carries parser positions."""
    for node in nodes:
        if node is None:
            continue
        metas = [i.meta for i in node.find_all(exp.Identifier) if "start" in i.meta]
        if metas:
            return min(m["start"] for m in metas), max(m["end"] for m in metas) + 1
    return None


def window_shape(window: exp.Window, select: exp.Select | None) -> WindowShape:
    """Resolve ``OVER w`` against the SELECT's ``WINDOW w AS (...)`` definitions."""
    definition = window
    if window.alias and select is not None:
        named = (w for w in select.args.get("windows") or [] if w.name == window.alias)
        definition = next(named, window)
    fn = window.this
    while isinstance(fn, (exp.IgnoreNulls, exp.RespectNulls)):
        fn = fn.this
    order = definition.args.get("order")
    return WindowShape(
        window,
        fn,
        tuple(definition.args.get("partition_by") or ()),
        tuple(order.expressions) if order else (),
        definition.args.get("spec"),
    )


def preceding_only(shape: WindowShape) -> bool:
    """Whether every frame row sorts at or before the current row."""
    fn = shape.fn
    if isinstance(fn, (exp.Lead, exp.PercentRank, exp.CumeDist, exp.Ntile)) or not shape.order:
        return False
    if isinstance(fn, exp.Lag):
        offset = fn.args.get("offset")
        return offset is None or (offset.is_int and offset.to_py() >= 0)
    if isinstance(fn, (exp.RowNumber, exp.Rank, exp.DenseRank)) or shape.spec is None:
        return True
    return _frame_ends_by_current_row(shape.spec)


def _frame_ends_by_current_row(spec: exp.WindowSpec) -> bool:
    end, end_side = spec.args.get("end"), spec.args.get("end_side")
    if end is None:
        return spec.args.get("start_side") == "PRECEDING" or spec.args.get("start") == "CURRENT ROW"
    return end == "CURRENT ROW" or end_side == "PRECEDING"


def frame_includes_current(shape: WindowShape) -> bool:
    """Whether the frame contains the current row (so the window reads its own values)."""
    fn, spec = shape.fn, shape.spec
    if isinstance(fn, (exp.Lag, exp.Lead)):
        offset = fn.args.get("offset")
        return offset is not None and offset.is_int and offset.to_py() == 0
    if spec is None:
        return True
    if spec.args.get("exclude") == "CURRENT ROW":
        return False
    start_side, end = spec.args.get("start_side"), spec.args.get("end")
    end_before = spec.args.get("end_side") == "PRECEDING" and end != "UNBOUNDED"
    return start_side != "FOLLOWING" and not end_before


def ascending(ordered: exp.Ordered) -> bool:
    """Ascending with NULLs last, so earlier frame rows have non-NULL, smaller keys."""
    return not ordered.args.get("desc") and not ordered.args.get("nulls_first")
