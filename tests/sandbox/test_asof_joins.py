"""ASOF joins rewritten as window lookups: the rewrite gives DuckDB's ASOF answer, or is refused.

The rewrite (:func:`~autofe.sandbox.asof_joins.asof_joins`) uses only a union, a window and
joins, which DuckDB runs too: here it runs on DuckDB beside DuckDB's own ``ASOF JOIN`` over edge
cases (ties at equal times, NULL keys and times, no earlier row, repeated left points). That it
computes the same on Spark is ``tests/pipelines/test_spark_asof.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
import sqlglot

from autofe.errors import Untranspilable
from autofe.knowledge_base.corpus import load_corpus, recipe_spec
from autofe.sandbox.asof_joins import asof_joins
from autofe.sandbox.transpile import to_spark_sql

ASOF_JOIN = re.compile(r"\bASOF\s+(LEFT\s+|RIGHT\s+)?JOIN\b", re.IGNORECASE)

# l: left points; (a, 20) twice, a NULL key, a NULL time, a key R lacks
# r: right rows; (a, 20) twice (same p, different q), NULL keys and times, a NULL p
TABLES = """
CREATE TABLE l AS SELECT * FROM (VALUES
  (1, 'a', 'x', 10), (2, 'a', 'x', 20), (3, 'a', 'x', NULL), (4, NULL, 'x', 20),
  (5, 'b', 'y', 5), (6, 'a', 'y', 30), (7, 'c', 'x', 10), (8, 'a', 'x', 20), (9, 'b', NULL, 9)
) v(id, k, k2, s);
CREATE TABLE r AS SELECT * FROM (VALUES
  ('a', 'x', 10, 'p10', 1), ('a', 'x', 20, 'p20', 2), ('a', 'x', 20, 'p20', 3),
  ('a', 'y', 25, 'p25', 4), ('a', NULL, 5, 'p5', 5), ('a', 'x', NULL, 'pn', 6),
  (NULL, 'x', 20, 'nk', 7), ('b', 'y', 7, 'b7', 8), ('b', 'y', 3, NULL, 9),
  ('c', 'x', NULL, 'cn', 10)
) v(k, k2, t, p, q);
"""


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    connection.execute(TABLES)
    yield connection
    connection.close()


def rewritten(sql: str) -> str:
    tree = sqlglot.parse_one(sql, read="duckdb")
    asof_joins(tree)
    out = tree.sql("duckdb")
    assert not ASOF_JOIN.search(out)
    return out


Rows = list[tuple[Any, ...]]


def both(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Rows, Rows]:
    """DuckDB's ASOF answer and the rewrite's, each sorted."""
    duck, ours = con.execute(sql).fetchall(), con.execute(rewritten(sql)).fetchall()
    return sorted(duck, key=repr), sorted(ours, key=repr)


CONDITIONS = [
    "r.k = l.k AND r.t < l.s",  # a tie at s is not earlier
    "r.k = l.k AND r.t <= l.s",  # a tie at s is
    "l.s > r.t AND l.k = r.k",  # written left side first
    "r.k = l.k AND r.t > l.s",  # the earliest later row
    "r.k = l.k AND l.s <= r.t",
    "r.t < l.s",  # no equality key: one sort over everything
    "r.k = l.k AND r.k2 = l.k2 AND r.t <= l.s",  # two keys, NULL in either never matches
    "(r.k = l.k) AND (r.t + 1 <= l.s - 1)",  # expressions on both sides
]


@pytest.mark.parametrize("kind", ["ASOF LEFT JOIN", "ASOF JOIN"])
@pytest.mark.parametrize("condition", CONDITIONS)
def test_rewrite_gives_duckdbs_asof_join(
    con: duckdb.DuckDBPyConnection, kind: str, condition: str
) -> None:
    duck, ours = both(con, f"SELECT l.id, r.t, r.p FROM l AS l {kind} r AS r ON {condition}")
    assert ours == duck
    assert any(t is None for _, t, _ in duck) == (kind == "ASOF LEFT JOIN")


def test_strict_and_inclusive_differ_at_a_tie(con: duckdb.DuckDBPyConnection) -> None:
    """Run 2 (a, 20): the row at 20 is not before it, but is at or before it."""
    lt = dict(con.execute(rewritten(SQL_AT.format(op="<"))).fetchall())
    le = dict(con.execute(rewritten(SQL_AT.format(op="<="))).fetchall())
    assert (lt[2], le[2], lt[3], lt[4]) == (10, 20, None, None)


SQL_AT = "SELECT l.id, r.t FROM l AS l ASOF LEFT JOIN r AS r ON r.k = l.k AND r.t {op} l.s"


def test_two_asof_joins_in_one_from(con: duckdb.DuckDBPyConnection) -> None:
    duck, ours = both(
        con,
        "SELECT l.id, a.p, b.p, b.t FROM l AS l "
        "ASOF LEFT JOIN r AS a ON a.k = l.k AND a.t < l.s "
        "ASOF JOIN r AS b ON b.t >= l.s - 10 AND b.k = l.k",
    )
    assert ours == duck and len(ours) > 3


def test_equal_times_give_one_row_and_the_same_one_every_time(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """DuckDB picks any of R's rows at the matched time; the rewrite one per left row, the
    greatest by the columns read, so its answer does not change between runs."""
    sql = "SELECT l.id, r.q FROM l AS l ASOF JOIN r AS r ON r.k = l.k AND r.t <= l.s"
    duck, ours = both(con, sql)
    assert [i for i, _ in ours] == [i for i, _ in duck]
    picked: dict[int, int] = dict(ours)
    either: dict[int, int] = dict(duck)
    assert picked[2] == 3 and either[2] in (2, 3)


def test_right_columns_read_anywhere_are_carried(con: duckdb.DuckDBPyConnection) -> None:
    """Columns of R read in WHERE, GROUP BY, ORDER BY and a correlated subquery."""
    duck, ours = both(
        con,
        "SELECT r.p, count(*) AS n, max((SELECT count(*) FROM r AS x WHERE x.p <= r.p)) AS m "
        "FROM l AS l ASOF LEFT JOIN r AS r ON r.k = l.k AND r.t <= l.s "
        "WHERE r.q IS DISTINCT FROM 9 GROUP BY r.p ORDER BY r.p",
    )
    assert ours == duck


def test_nested_queries_and_derived_tables(con: duckdb.DuckDBPyConnection) -> None:
    duck, ours = both(
        con,
        "WITH m AS (SELECT l.id, r.q FROM (SELECT id, k, s + 0 AS s FROM l) AS l "
        "  ASOF LEFT JOIN (SELECT k, t, q FROM r WHERE q > 1) AS r ON r.k = l.k AND r.t < l.s) "
        "SELECT m.id, m.q, (SELECT max(y.p) FROM l AS z ASOF JOIN r AS y "
        "  ON y.k = z.k AND y.t < z.s WHERE z.id = m.id) AS p FROM m AS m",
    )
    assert ours == duck


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("ASOF RIGHT JOIN r AS r ON r.k = l.k AND r.t < l.s", "only ASOF JOIN and ASOF LEFT"),
        ("ASOF JOIN r AS r ON r.k = l.k", "exactly one of <, <=, >, >="),
        ("ASOF JOIN r AS r ON r.t < l.s AND r.t > l.s - 5", "exactly one of <, <=, >, >="),
        ("ASOF JOIN r AS r ON r.t < l.s AND r.p = 'x'", "must read one side of the join"),
        ("ASOF JOIN r AS r ON r.t < l.s OR r.k = l.k", "equalities and one <, <=, >, >="),
        ("ASOF JOIN r AS r ON r.k <> l.k AND r.t < l.s", "equalities and one <, <=, >, >="),
        ("ASOF JOIN r AS r USING (k, t)", "with an ON condition only"),
        ("ASOF JOIN r AS r ON r.t < (SELECT max(s) FROM l)", "must be plain expressions"),
        ("JOIN l AS m ON m.id = l.id ASOF JOIN r AS r ON r.k = m.k AND r.t < l.s", "one relation"),
        ("ASOF JOIN r AS r ON r.t < l.s ASOF JOIN r AS r2 ON r2.t < r.t", "another ASOF join"),
        ("ASOF JOIN r AS r ON r.t < w.s", "reads w, not one relation before it"),
    ],
)
def test_refusals_name_the_reason(sql: str, why: str) -> None:
    with pytest.raises(Untranspilable, match=re.escape(why)):
        rewritten(f"SELECT l.id, r.p FROM l AS l {sql}")


def test_a_left_side_that_cannot_be_read_again_is_refused() -> None:
    with pytest.raises(Untranspilable, match="must be a table, a CTE or a subquery"):
        rewritten("SELECT u.i, r.p FROM unnest([1, 2]) AS u(i) ASOF JOIN r AS r ON r.t < u.i")


def test_an_unqualified_column_is_refused() -> None:
    """Without its relation a column may be the right side's, which the lookup must carry
    (``to_spark_sql`` qualifies every column first)."""
    with pytest.raises(Untranspilable, match="must name its relation"):
        rewritten("SELECT l.id, p FROM l AS l ASOF JOIN r AS r ON r.t < l.s")


def test_the_translation_prefix_is_refused_as_a_column() -> None:
    with pytest.raises(Untranspilable, match="the _asof_ prefix"):
        rewritten("SELECT r._asof_v FROM l AS l ASOF JOIN r AS r ON r.t < l.s")


# ------------------------------------------------------------------ through to_spark_sql


def test_a_feature_translates_with_one_window_per_asof_join() -> None:
    spark = to_spark_sql(
        "WITH e AS (SELECT job_id, end_time, count(*) OVER (PARTITION BY job_id ORDER BY "
        "end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n FROM runs) "
        "SELECT t.run_id, hi.n - coalesce(lo.n, 0) AS value FROM runs AS t "
        "ASOF LEFT JOIN e AS hi ON hi.job_id = t.job_id AND hi.end_time < t.submit_time "
        "ASOF LEFT JOIN e AS lo ON t.job_id = lo.job_id "
        "AND t.submit_time - INTERVAL 7 DAY > lo.end_time"
    )
    assert not ASOF_JOIN.search(spark)
    assert spark.count("LAST_VALUE(_asof_points._asof_hit) IGNORE NULLS OVER (PARTITION BY") == 2
    assert "lo._asof_v = t.submit_time - INTERVAL '7' DAY" in spark
    sqlglot.parse_one(spark, read="spark")


def _asof_recipes() -> list[tuple[str, str]]:
    specs = [recipe_spec(doc, r) for doc in load_corpus() for r in doc.recipes]
    return [(s.name, s.sql) for s in specs if ASOF_JOIN.search(s.sql)]


def test_asof_recipes_translate_or_are_refused_for_another_construct() -> None:
    """Whatever refuses an ASOF recipe is not its ASOF join (the Spark values of those that
    translate: ``tests/pipelines/test_spark_asof.py``)."""
    recipes = _asof_recipes()
    translated, refused = [], {}
    for name, sql in recipes:
        try:
            sqlglot.parse_one(to_spark_sql(sql), read="spark")
            translated.append(name)
        except Untranspilable as exc:
            refused[name] = exc.reason
    assert len(recipes) >= 20 and len(translated) >= 12
    assert {n: r for n, r in refused.items() if "ASOF" in r.upper()} == {}
