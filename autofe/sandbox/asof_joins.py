"""DuckDB's ``ASOF JOIN`` as Spark SQL: one sort of both sides' points, not a join per key.

``L ASOF [LEFT] JOIN R ON R.k = L.k AND R.t < L.s`` pairs each row of L with the row of R of
the same keys whose time is the latest before L's (``<=``: at or before; ``>`` / ``>=``: the
earliest after). Spark has no such join, and the plain form (join on the keys, keep the earlier
rows, take the latest) compares every row of L with every row of R of its key: quadratic in a
job's runs. The rewrite instead, for each distinct left point (L's keys and time):

1. puts the left points and R's rows (its keys, its time and the columns the query reads from
   R as one struct) in one union, NULL keys and times left out (they never match in DuckDB);
2. sorts it by time within the keys and carries the last R struct forward with
   ``last_value(... IGNORE NULLS)`` over ``ROWS UNBOUNDED PRECEDING``: at a tie in time a strict
   ``<`` sorts the left point before R's rows (they are not earlier), ``<=`` after them; ``>``
   and ``>=`` sort descending. R's rows of one key and time are ordered by their struct, so the
   one DuckDB may pick (it picks any) is here the greatest, the same on every run;
3. keeps the left points' rows that found one, and joins L to them on its keys and time
   (``LEFT JOIN`` for ``ASOF LEFT JOIN``, an inner join for ``ASOF JOIN``).

The lookup is a derived table with R's alias that exposes exactly the columns the query reads
from R, so the rest of the query is unchanged. The cost is a sort of |L| + |R| points per key
and an equi-join: ``n log n``. The left side is read a second time, so its key and time must
come from one table, CTE or derived table of the FROM before the join; otherwise the join is
refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from autofe.sandbox.spark_rules import refuse

POINTS, FOUND = "_asof_points", "_asof_found"
TIME, SIDE, HIT, RIGHT_TIME = "_asof_v", "_asof_side", "_asof_hit", "_asof_t"
FLIPPED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.EQ: exp.EQ,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
}


@dataclass(frozen=True)
class Asof:
    """An ASOF condition as ``R.time op L.time`` and ``R.keys = L.keys``, R written first."""

    right_keys: tuple[exp.Expr, ...]
    left_keys: tuple[exp.Expr, ...]
    right_time: exp.Expr
    left_time: exp.Expr
    op: type[exp.Expr]
    left: str

    @property
    def strict(self) -> bool:
        return self.op in (exp.LT, exp.GT)

    @property
    def descending(self) -> bool:
        return self.op in (exp.GT, exp.GTE)


def asof_joins(tree: exp.Expr) -> None:
    """Rewrite every ASOF join in ``tree`` (in place) as a join to a window lookup.

    ``tree``'s columns are qualified with their relation (as
    :func:`~autofe.sandbox.duck_types.typed_tree` leaves them). Innermost queries first, so a
    derived table copied as a left side is already rewritten.

    >>> import sqlglot
    >>> q = sqlglot.parse_one("SELECT t.a, r.b FROM t AS t ASOF JOIN r AS r "
    ...     "ON r.k = t.k AND r.at < t.at", read="duckdb")
    >>> asof_joins(q)
    >>> spark = q.sql("spark")
    >>> "ASOF" in spark, spark.count("IGNORE NULLS OVER (PARTITION BY _asof_points._asof_k0")
    (False, 1)
    >>> spark.endswith("AS r ON r._asof_k0 = t.k AND r._asof_v = t.at")
    True

    Raises:
        Untranspilable: the join's kind, condition or left side has no such rewrite.
    """
    for select in reversed(list(tree.find_all(exp.Select, bfs=False))):
        rewritten: set[str] = set()
        for join in list(select.args.get("joins") or []):
            if str(join.args.get("method") or "").upper() == "ASOF":
                _rewrite(tree, select, join, rewritten)


def _rewrite(root: exp.Expr, select: exp.Select, join: exp.Join, rewritten: set[str]) -> None:
    side = str(join.args.get("side") or "").upper()
    if side not in ("", "LEFT") or join.args.get("kind"):
        refuse(join, "only ASOF JOIN and ASOF LEFT JOIN are translated")
    right = join.this
    alias = right.alias_or_name
    asof = _condition(join, alias)
    if asof.left in rewritten:
        refuse(join, f"the left side reads {asof.left}, the result of another ASOF join")
    left_source = _source(_left_relation(select, join, asof.left), "left")
    lookup = _lookup(asof, left_source, _source(right, "right"), _read_columns(root, select, join))
    join.set("method", None)
    join.set("side", "LEFT" if side else None)
    join.set("this", exp.Subquery(this=lookup, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    join.set("on", _lookup_condition(asof, alias))
    rewritten.add(alias)


def _condition(join: exp.Join, right: str) -> Asof:
    """The join's ON as equalities and one inequality, each with R's side first."""
    on = join.args.get("on")
    if on is None or join.args.get("using"):
        refuse(join, "an ASOF join is translated with an ON condition only")
    keys: list[tuple[exp.Expr, exp.Expr]] = []
    times: list[tuple[exp.Expr, exp.Expr, type[exp.Expr]]] = []
    for part in _conjuncts(on):
        if type(part) not in FLIPPED:
            refuse(part, "an ASOF condition is translated as equalities and one <, <=, >, >=")
        theirs, ours, op = _oriented(part, right)
        if op is exp.EQ:
            keys.append((theirs, ours))
        else:
            times.append((theirs, ours, op))
    if len(times) != 1:
        refuse(on, "an ASOF condition needs exactly one of <, <=, >, >=")
    right_time, left_time, op = times[0]
    left_keys = tuple(ours for _, ours in keys)
    lefts = {c.table for side in (*left_keys, left_time) for c in side.find_all(exp.Column)}
    if len(lefts) != 1:
        refuse(on, "the left side of an ASOF condition must read one relation of the FROM")
    return Asof(tuple(k for k, _ in keys), left_keys, right_time, left_time, op, lefts.pop())


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    node = node.unnest()
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    return [node]


def _oriented(part: exp.Expr, right: str) -> tuple[exp.Expr, exp.Expr, type[exp.Expr]]:
    """(R's side, the left side, the operator as if R's side were written first)."""
    a, b = part.this, part.expression
    if _reads(a) == {right} and right not in _reads(b) and _reads(b):
        return a, b, type(part)
    if _reads(b) == {right} and right not in _reads(a) and _reads(a):
        return b, a, FLIPPED[type(part)]
    refuse(part, "each side of an ASOF comparison must read one side of the join")


def _reads(node: exp.Expr) -> set[str]:
    """The relations an operand reads; it must be a plain expression of columns."""
    if node.find(exp.Subquery, exp.Window, exp.AggFunc):
        refuse(node, "an ASOF comparison's operands must be plain expressions")
    return {c.table for c in node.find_all(exp.Column)}


def _left_relation(select: exp.Select, join: exp.Join, alias: str) -> exp.Expr:
    """The FROM item before ``join`` named ``alias``."""
    from_ = select.args.get("from_")
    items: list[exp.Expr] = [from_.this] if from_ else []
    for other in select.args.get("joins") or []:
        if other is join:
            break
        items.append(other.this)
    found = [item for item in items if item.alias_or_name == alias]
    if len(found) != 1:
        refuse(join, f"the left side of the ASOF join reads {alias}, not one relation before it")
    return found[0]


def _source(item: exp.Expr, which: str) -> exp.Expr:
    """A copy of a FROM item to read again: a table or CTE by name, or a derived table."""
    named = isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier)
    if not (named or isinstance(item, exp.Subquery)) or not item.alias_or_name:
        refuse(item, f"the {which} side of an ASOF join must be a table, a CTE or a subquery")
    return item.copy()


def _read_columns(root: exp.Expr, select: exp.Select, join: exp.Join) -> list[str]:
    """The names of the right side's columns the query reads outside the ASOF condition,
    including from subqueries correlated to it."""
    alias = join.this.alias_or_name
    scope = next(s for s in traverse_scope(root) if s.expression is select)
    for star in select.expressions:
        if isinstance(star, exp.Star) or (isinstance(star, exp.Column) and star.is_star):
            refuse(star, "a * beside an ASOF join is not translated")
    if unqualified := [c for c in scope.columns if not c.table]:
        refuse(unqualified[0], "a column beside an ASOF join must name its relation")
    columns = [c for c in scope.columns if c.table == alias and not _inside(c, join)]
    for inner in scope.traverse():
        if inner is not scope and _resolves_in(inner, alias) is scope:
            columns += [c for c in inner.external_columns if c.table == alias]
    names = sorted({c.name for c in columns})
    for name in names:
        if name.startswith("_asof_"):
            refuse(join, f"{alias}.{name}: the _asof_ prefix is the translation's own")
    return names


def _inside(node: exp.Expr, ancestor: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None and parent is not ancestor:
        parent = parent.parent
    return parent is ancestor


def _resolves_in(scope: Scope, alias: str) -> Scope | None:
    """The scope around ``scope`` whose FROM defines ``alias``."""
    current = scope.parent
    while current is not None and alias not in current.sources:
        current = current.parent
    return current


def _lookup(asof: Asof, left: exp.Expr, right: exp.Expr, columns: list[str]) -> exp.Select:
    """Per distinct left point (keys, time) with a match: the keys, the time and R's columns."""
    found = exp.select(
        *_keys(len(asof.left_keys), POINTS),
        _col(TIME, POINTS),
        _col(SIDE, POINTS),
        exp.alias_(_carried(asof), HIT),
    ).from_(exp.Subquery(this=_points(asof, left, right, columns), alias=_table_alias(POINTS)))
    payload = [exp.alias_(exp.column(c, table=HIT, db=FOUND), c) for c in columns]
    left_side = 0 if asof.strict else 1
    kept = exp.and_(
        exp.EQ(this=_col(SIDE, FOUND), expression=exp.Literal.number(left_side)),
        exp.Not(this=exp.Is(this=_col(HIT, FOUND), expression=exp.null())),
    )
    return (
        exp.select(*_keys(len(asof.left_keys), FOUND), _col(TIME, FOUND), *payload)
        .from_(exp.Subquery(this=found, alias=_table_alias(FOUND)))
        .where(kept)
    )


def _points(asof: Asof, left: exp.Expr, right: exp.Expr, columns: list[str]) -> exp.Union:
    """The distinct left points and R's rows in one relation; side numbers the tie order."""
    left_side, right_side = (0, 1) if asof.strict else (1, 0)
    struct = exp.Struct(
        expressions=[
            exp.PropertyEQ(this=exp.to_identifier(RIGHT_TIME), expression=asof.right_time.copy()),
            *(
                exp.PropertyEQ(
                    this=exp.to_identifier(c), expression=exp.column(c, table=right.alias_or_name)
                )
                for c in columns
            ),
        ]
    )
    lefts = _branch(asof.left_keys, asof.left_time, left_side, exp.null(), left).distinct()
    rights = _branch(asof.right_keys, asof.right_time, right_side, struct, right)
    return exp.union(lefts, rights, distinct=False)


def _branch(
    keys: tuple[exp.Expr, ...], time: exp.Expr, side: int, hit: exp.Expr, source: exp.Expr
) -> exp.Select:
    known = [exp.Not(this=exp.Is(this=e.copy(), expression=exp.null())) for e in (*keys, time)]
    return (
        exp.select(
            *(exp.alias_(k.copy(), f"_asof_k{i}") for i, k in enumerate(keys)),
            exp.alias_(time.copy(), TIME),
            exp.alias_(exp.Literal.number(side), SIDE),
            exp.alias_(hit, HIT),
        )
        .from_(source)
        .where(exp.and_(*known))
    )


def _carried(asof: Asof) -> exp.Window:
    """The last R struct at or before each point in the sort order, NULLs skipped."""
    order = [
        exp.Ordered(this=_col(TIME, POINTS), desc=asof.descending, nulls_first=False),
        exp.Ordered(this=_col(SIDE, POINTS), desc=False, nulls_first=False),
        exp.Ordered(this=_col(HIT, POINTS), desc=False, nulls_first=False),
    ]
    return exp.Window(
        this=exp.IgnoreNulls(this=exp.LastValue(this=_col(HIT, POINTS))),
        partition_by=_keys(len(asof.left_keys), POINTS, named=False),
        order=exp.Order(expressions=order),
        spec=exp.WindowSpec(
            kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"
        ),
        over="OVER",
    )


def _lookup_condition(asof: Asof, alias: str) -> exp.Expr:
    pairs = [(f"_asof_k{i}", k) for i, k in enumerate(asof.left_keys)]
    pairs.append((TIME, asof.left_time))
    return exp.and_(
        *(exp.EQ(this=exp.column(name, table=alias), expression=e.copy()) for name, e in pairs)
    )


def _keys(n: int, table: str, named: bool = True) -> list[exp.Expr]:
    columns = [_col(f"_asof_k{i}", table) for i in range(n)]
    return [exp.alias_(c, c.name) if named else c for c in columns]


def _col(name: str, table: str) -> exp.Column:
    return exp.column(name, table=table)


def _table_alias(name: str) -> exp.TableAlias:
    return exp.TableAlias(this=exp.to_identifier(name))
