"""The result models of ``profile_script`` and the caps that keep them small."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict

MAX_ITEMS = 200
"""Longest list a profile carries; the rest is dropped with a warning."""

MAX_CHARS = 200
"""Longest string a profile carries (table names, literals, warnings)."""

MAX_VALUES = 20
"""Most literal values kept for one filter (a 5,000-item ``IN`` list says little more)."""


def _clip(text: str) -> str:
    """Cut ``text`` to :data:`MAX_CHARS`, marking the cut.

    >>> _clip("x" * 300)[-3:], len(_clip("x" * 300))
    ('...', 200)
    """
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


Text = Annotated[str, AfterValidator(_clip)]


JoinKind = Literal[
    "inner", "left", "right", "full", "cross", "left_semi", "left_anti", "correlated"
]


_FROZEN = ConfigDict(frozen=True, use_attribute_docstrings=True)


class JoinFact(BaseModel):
    """One join: which tables meet on which ``(left, right)`` key expressions."""

    model_config = _FROZEN

    kind: JoinKind
    """``correlated``: an equality reaching out of a subquery (EXISTS, scalar subquery)."""
    left: Text | None
    """Table, CTE or subquery alias as written; None when no table could be attributed."""
    right: Text | None
    keys: list[tuple[Text, Text]]
    """Equi-join keys, left column first; empty for cross joins."""
    broadcast: bool = False
    """A broadcast hint (``/*+ BROADCAST(t) */``, ``F.broadcast(df)``) covers a side."""


class FilterFact(BaseModel):
    """One predicate comparing a column with literals; partition-like columns drive pruning."""

    model_config = _FROZEN

    column: Text
    table: Text | None
    operator: Text
    """``=``, ``<``, ``between``, ``in``, ``like``, ``is null``..., ``not `` prefixed if negated."""
    values: list[Text]
    """Literals as text: dates folded to ISO, parameters as written, at most 20 plus a count."""
    partition_like: bool
    """Named like a partition column (``dt``, ``ds``, ``*_date``, ``year``, ``partition``...)."""


class DateRange(BaseModel):
    """The days a column is restricted to: inclusive ``start``/``end``, ``days`` between them."""

    model_config = _FROZEN

    column: Text
    table: Text | None
    start: Text | None
    """First day let through (ISO), or relative/parameter text; None when open."""
    end: Text | None
    """Last day let through (ISO), or relative/parameter text; None when open."""
    days: int | None
    """Whole days from start to end inclusive; None when an end is open or not literal."""


class ScriptProfile(BaseModel):
    """What a script reads, writes and computes, as far as reading it (not running it) tells."""

    model_config = _FROZEN

    language: Literal["sql", "python"]
    statements: int
    """SQL statements parsed; for Python, statements that do something (not imports/defs)."""
    tables_read: list[Text]
    """Tables and paths as written, sorted; CTEs, views and temp views left out."""
    tables_written: list[Text]
    joins: list[JoinFact]
    filters: list[FilterFact]
    date_ranges: list[DateRange]
    aggregations: list[Text]
    """Aggregate functions in Spark spelling (``count_distinct`` for COUNT(DISTINCT))."""
    group_by_columns: int
    """Grouping columns summed over every GROUP BY / groupBy."""
    window_functions: list[Text]
    distinct: bool
    """SELECT DISTINCT, UNION/INTERSECT/EXCEPT without ALL, distinct()/dropDuplicates()."""
    order_by: bool
    """A global ORDER BY / orderBy / sort (window ordering does not count)."""
    udfs: list[Text]
    """SQL: functions sqlglot does not know; Python: ``kind:name`` (``pandas_udf:score``)."""
    ml_estimators: list[Text]
    """MLlib (and Spark XGBoost/LightGBM) estimator classes constructed."""
    subqueries: int
    """Derived tables, scalar/IN subqueries and EXISTS."""
    ctes: int
    unions: int
    literals: dict[Text, list[Text]]
    """Notable literals by kind: dates, numbers (in filters), limit, ml_params, spark_conf..."""
    parameters: list[Text]
    """Inputs as written: ``${x}``, ``{{ x }}``, ``:x``, widgets, ``sys.argv[i]``, env vars."""
    warnings: list[Text]
    """What could not be read (and was skipped), and lists that were cut."""
