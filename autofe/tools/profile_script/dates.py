"""Date literals and constant date arithmetic folded to days; bounds collected into ranges."""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, timedelta

from sqlglot import exp

from autofe.tools.profile_script.models import DateRange
from autofe.tools.profile_script.placeholders import _is_placeholder, _Params

_PARTITION_LIKE = re.compile(
    r"^(dt|ds|day|date|month|year|hour|partition\w*)$"
    r"|_(dt|ds|day|month|year|hour|partition)$|date$|date_sk$|^p_?date",
    re.I,
)
_DATE_LIKE = re.compile(r"date|time|day|_ts$|^ts$|^dt$|^ds$|_dt$|_ds$|year|month", re.I)


def _partition_like(column: str) -> bool:
    """Names tables are usually partitioned by (dates, days, ``*_date``, ``partition``).

    >>> [_partition_like(c) for c in ["dt", "l_shipdate", "event_date", "ss_sold_date_sk", "id"]]
    [True, True, True, True, False]
    """
    return bool(_PARTITION_LIKE.search(column))


@dataclass(frozen=True)
class _Moment:
    """A point in time: a literal day, or a symbol (``current_date``, a parameter), plus offsets.

    ``whole_year`` marks ``d_year = 2000``-style bounds: as a lower bound the year's first day,
    as an upper bound its last.
    """

    day: date | None
    symbol: str = ""
    days: int = 0
    months: int = 0
    whole_year: bool = False
    partial_day: bool = False

    def shift(self, days: int = 0, months: int = 0) -> _Moment:
        return replace(self, days=self.days + days, months=self.months + months)

    def resolve(self) -> date | None:
        if self.day is None:
            return None
        try:
            return _add_months(self.day, self.months) + timedelta(days=self.days)
        except (OverflowError, ValueError):
            return None

    def render(self) -> str:
        """ISO day, or the symbol with its offset (``current_date - 7 days``).

        >>> _Moment(date(2024, 1, 31), months=1).render(), _Moment(None, "${ds}", -1).render()
        ('2024-02-29', '${ds} - 1 day')
        """
        resolved = self.resolve()
        if resolved is not None:
            return resolved.isoformat()
        parts = [self.symbol]
        for amount, unit in ((self.months, "month"), (self.days, "day")):
            if amount:
                plural = "s" if abs(amount) != 1 else ""
                parts.append(f"{'+' if amount > 0 else '-'} {abs(amount)} {unit}{plural}")
        return " ".join(parts)


def _add_months(day: date, months: int) -> date:
    year, month = divmod(day.month - 1 + months, 12)
    year += day.year
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last))


_DATE_TEXT = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?\s*$")
_YEAR_COLUMN = re.compile(r"(^|_)year$", re.I)


def _literal_moment(text: str, is_string: bool, column: str, params: _Params) -> _Moment | None:
    """A literal as a point in time, when it is one for this column.

    >>> p = _Params()
    >>> _literal_moment("2024-03-01 10:00", True, "ts", p).partial_day
    True
    >>> _literal_moment("2000", False, "d_year", p).whole_year
    True
    """
    match = _DATE_TEXT.match(text) if is_string else None
    if match:
        partial = any(g and int(g) for g in match.groups()[1:])
        day = _iso_day(match[1])
        return _Moment(day, partial_day=partial) if day else None
    if is_string and params.display(text):
        return _Moment(None, params.display(text) or text)
    if _YEAR_COLUMN.search(column) and text.isdigit() and 1900 <= int(text) <= 2100:
        return _Moment(date(int(text), 1, 1), whole_year=True)
    if is_string and re.fullmatch(r"\d{8}", text) and _partition_like(column):
        day = _iso_day(f"{text[:4]}-{text[4:6]}-{text[6:]}")
        return _Moment(day) if day else None
    return None


def _iso_day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


_DATE_WRAPPERS = (
    exp.Cast,
    exp.TryCast,
    exp.TsOrDsToDate,
    exp.TsOrDsToTimestamp,
    exp.StrToDate,
    exp.StrToTime,
    exp.TimeStrToTime,
    exp.TimeStrToDate,
    exp.DateStrToDate,
    exp.Date,
    exp.Paren,
)
_NOW = (exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentDatetime)


def _fold_moment(node: exp.Expr, column: str, params: _Params) -> _Moment | None:
    """Evaluate a constant SQL date expression (casts, ``± INTERVAL``, ``date_add``...).

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("select date '1998-12-01' - interval '90' day", read="spark")
    >>> _fold_moment(tree.expressions[0], "l_shipdate", _Params()).render()
    '1998-09-02'
    """
    while isinstance(node, _DATE_WRAPPERS):
        node = node.this
    if isinstance(node, exp.Literal):
        return _literal_moment(str(node.this), node.is_string, column, params)
    if _is_placeholder(node):
        return _Moment(None, params.display(node.name) or node.name)
    if isinstance(node, _NOW):
        return _Moment(None, "current_date")
    if _YEAR_COLUMN.search(column) and (year := _fold_int(node)) is not None:
        return _literal_moment(str(year), False, column, params)
    if isinstance(node, exp.Add | exp.Sub):
        return _fold_arithmetic(node, column, params)
    if isinstance(node, exp.DateAdd | exp.DateSub | exp.TsOrDsAdd | exp.AddMonths):
        return _fold_date_function(node, column, params)
    return None


def _fold_arithmetic(node: exp.Add | exp.Sub, column: str, params: _Params) -> _Moment | None:
    base, delta = node.this, node.expression
    if isinstance(node, exp.Add) and _interval(base) is not None:
        base, delta = delta, base
    moment = _fold_moment(base, column, params)
    shift = _interval(delta)
    if shift is None and (days := _fold_int(delta)) is not None:
        shift = (days, 0)
    if moment is None or shift is None or moment.whole_year:
        return None
    sign = 1 if isinstance(node, exp.Add) else -1
    return moment.shift(sign * shift[0], sign * shift[1])


def _fold_date_function(node: exp.Expr, column: str, params: _Params) -> _Moment | None:
    moment = _fold_moment(node.this, column, params)
    amount_node = node.args.get("expression")
    amount = _fold_int(amount_node) if isinstance(amount_node, exp.Expr) else None
    if moment is None or amount is None:
        return None
    if isinstance(node, exp.AddMonths):
        return moment.shift(months=amount)
    unit = _unit_shift(str(node.args.get("unit") or "DAY"), amount)
    if unit is None:
        return None
    sign = -1 if isinstance(node, exp.DateSub) else 1
    return moment.shift(sign * unit[0], sign * unit[1])


_UNITS = {"day": (1, 0), "week": (7, 0), "month": (0, 1), "quarter": (0, 3), "year": (0, 12)}


def _unit_shift(unit: str, amount: int) -> tuple[int, int] | None:
    """``(days, months)`` for ``amount`` units; None for sub-day units.

    >>> _unit_shift("DAYS", 3), _unit_shift("year", 2), _unit_shift("HOUR", 1)
    ((3, 0), (0, 24), None)
    """
    step = _UNITS.get(unit.lower().rstrip("s"))
    return (step[0] * amount, step[1] * amount) if step else None


def _interval(node: exp.Expr) -> tuple[int, int] | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Interval):
        return None
    unit = node.args.get("unit")
    amount = node.this
    if isinstance(amount, exp.Literal) and unit is None:
        number, _, text = str(amount.this).strip().partition(" ")
        return _unit_shift(text, int(number)) if number.lstrip("-").isdigit() else None
    value = _fold_int(amount) if isinstance(amount, exp.Expr) else None
    return _unit_shift(str(unit.name if unit else "day"), value) if value is not None else None


def _fold_int(node: exp.Expr) -> int | None:
    """Integer constant arithmetic (``2001 + 1``, ``7 * -1``, ``'90'``).

    >>> import sqlglot
    >>> _fold_int(sqlglot.parse_one("(2001 + 1) * -1"))
    -2002
    """
    if isinstance(node, exp.Paren):
        return _fold_int(node.this)
    if isinstance(node, exp.Literal):
        text = str(node.this).strip()
        return int(text) if text.lstrip("-").isdigit() else None
    if isinstance(node, exp.Neg):
        inner = _fold_int(node.this)
        return -inner if inner is not None else None
    ops: dict[type[exp.Expr], Callable[[int, int], int]] = {
        exp.Add: lambda a, b: a + b,
        exp.Sub: lambda a, b: a - b,
        exp.Mul: lambda a, b: a * b,
    }
    op = ops.get(type(node))
    if op is None:
        return None
    left, right = _fold_int(node.this), _fold_int(node.expression)
    return op(left, right) if left is not None and right is not None else None


_Bound = tuple[_Moment, bool]


class _Ranges:
    """Lower and upper bounds per column, collected over predicates that hold together."""

    def __init__(self) -> None:
        self.bounds: dict[tuple[str | None, str], list[_Bound | None]] = {}

    def add(
        self, table: str | None, column: str, operator: str, moments: list[_Moment | None]
    ) -> None:
        usable = [m for m in moments if m is not None and _usable(m, column)]
        if not usable or len(usable) != len(moments):
            return
        lower, upper = _bounds_for(operator, usable)
        current = self.bounds.setdefault((table, column), [None, None])
        current[0] = current[0] or lower
        current[1] = current[1] or upper

    def date_ranges(self) -> list[DateRange]:
        found = []
        for (table, column), (lower, upper) in self.bounds.items():
            if lower is None and upper is None:
                continue
            start = _inclusive(lower, lower=True) if lower else None
            end = _inclusive(upper, lower=False) if upper else None
            found.append(
                DateRange(
                    column=column,
                    table=table,
                    start=start.render() if start else None,
                    end=end.render() if end else None,
                    days=_span_days(start, end),
                )
            )
        return found


def _usable(moment: _Moment, column: str) -> bool:
    """Literal days always bound a range; symbols only on columns named like dates."""
    return moment.day is not None or moment.symbol == "current_date" or _date_named(column)


def _date_named(column: str) -> bool:
    return bool(_DATE_LIKE.search(column))


def _bounds_for(operator: str, moments: list[_Moment]) -> tuple[_Bound | None, _Bound | None]:
    """Lower and upper bound (moment, inclusive) a comparison sets.

    >>> low, high = _bounds_for("<", [_Moment(date(2024, 2, 1))])
    >>> low, high[1]
    (None, False)
    """
    first = moments[0]
    if operator in ("=", "<=>"):
        return (first, True), (first, True)
    if operator in (">", ">="):
        return (first, operator == ">="), None
    if operator in ("<", "<="):
        return None, (first, operator == "<=")
    if operator == "between" and len(moments) == 2:
        return (moments[0], True), (moments[1], True)
    if operator == "in" and all(m.day for m in moments):
        ordered = sorted(moments, key=lambda m: m.resolve() or date.min)
        return (ordered[0], True), (ordered[-1], True)
    return None, None


def _inclusive(bound: _Bound, *, lower: bool) -> _Moment:
    """The first (or last) day a bound lets through."""
    moment, inclusive = bound
    if moment.whole_year and moment.day:
        year = moment.day.year + (0 if inclusive else 1 if lower else -1)
        return _Moment(date(year, 1, 1) if lower else date(year, 12, 31))
    if inclusive or moment.partial_day:
        return moment
    return moment.shift(1 if lower else -1)


def _span_days(start: _Moment | None, end: _Moment | None) -> int | None:
    """Whole days from ``start`` to ``end`` inclusive; months count 30.44 days when symbolic.

    >>> _span_days(_Moment(date(2024, 1, 1)), _Moment(date(2024, 1, 31)))
    31
    >>> _span_days(_Moment(None, "current_date", -7), _Moment(None, "current_date", -1))
    7
    """
    if start is None or end is None:
        return None
    first, last = start.resolve(), end.resolve()
    if first is not None and last is not None:
        return max((last - first).days + 1, 0)
    if start.day is None and end.day is None and start.symbol == end.symbol:
        months = end.months - start.months
        return max(end.days - start.days + round(months * 30.44) + 1, 0)
    return None
