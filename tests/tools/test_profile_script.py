"""profile_script on the real TPC-H / TPC-DS Spark SQL texts, PySpark jobs and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from autofe.config import external_data_dir
from autofe.errors import ConfigError
from autofe.tools.profile_script import (
    MAX_CHARS,
    MAX_ITEMS,
    DateRange,
    JoinFact,
    ScriptProfile,
    profile_script,
)

_EXTERNAL = external_data_dir()
TPC = (_EXTERNAL or Path("/nonexistent")) / "tpc-queries"
TPC_FILES = sorted(TPC.glob("tpch/*.sql")) + sorted(TPC.glob("tpcds_2_4/*.sql"))


@pytest.fixture(scope="module")
def tpc(external: Path) -> Path:
    root = external / "tpc-queries"
    if not root.is_dir():
        pytest.skip("tpc-queries is not in ../shared/data/external")
    return root


def _profile(root: Path, name: str) -> ScriptProfile:
    return profile_script((root / name).read_text())


def _join_set(profile: ScriptProfile) -> set[tuple[str, str | None, str | None, frozenset[str]]]:
    """Joins as (kind, left, right, keys written ``a=b``), key order within a pair ignored."""
    return {
        (j.kind, j.left, j.right, frozenset("=".join(sorted(k)) for k in j.keys))
        for j in profile.joins
    }


def _range(profile: ScriptProfile, column: str) -> DateRange:
    found = [r for r in profile.date_ranges if r.column == column]
    assert len(found) == 1, profile.date_ranges
    return found[0]


# --------------------------------------------------------------------------- every TPC file


@pytest.mark.parametrize("path", TPC_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_tpc_query_profiles(path: Path) -> None:
    profile = profile_script(path.read_text())
    assert profile.language == "sql"
    assert profile.statements == 1
    assert profile.tables_read
    assert not profile.tables_written
    assert profile.warnings == []
    assert all(j.left and j.right for j in profile.joins), "every join side attributed"
    assert ScriptProfile.model_validate_json(profile.model_dump_json()) == profile


@pytest.mark.parametrize("path", TPC_FILES[::10], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_spark_sql_in_python_gives_the_same_facts(path: Path) -> None:
    sql = path.read_text()
    job = f'from pyspark.sql import SparkSession\ndf = spark.sql("""{sql}""")\ndf.show()\n'
    direct, wrapped = profile_script(sql).model_dump(), profile_script(job).model_dump()
    assert wrapped["language"] == "python"
    for key in ("language", "statements"):
        del direct[key], wrapped[key]
    assert wrapped == direct


def test_tpc_corpus_is_complete(tpc: Path) -> None:
    assert len(list(tpc.glob("tpch/*.sql"))) == 22
    assert len(list(tpc.glob("tpcds_2_4/*.sql"))) == 105


# --------------------------------------------------------------------------- TPC-H


def test_tpch_q1_scan_aggregate(tpc: Path) -> None:
    p = _profile(tpc, "tpch/1.sql")
    assert p.tables_read == ["lineitem"]
    assert p.joins == []
    [shipdate] = p.filters
    assert (shipdate.column, shipdate.table, shipdate.operator) == ("l_shipdate", "lineitem", "<=")
    assert shipdate.values == ["1998-09-02"]  # date '1998-12-01' - interval '90' day
    assert shipdate.partition_like
    assert _range(p, "l_shipdate") == DateRange(
        column="l_shipdate", table="lineitem", start=None, end="1998-09-02", days=None
    )
    assert p.aggregations == ["avg", "count", "sum"]
    assert p.group_by_columns == 2
    assert p.order_by and not p.distinct
    assert p.literals["dates"] == ["1998-09-02"]


def test_tpch_q3_comma_joins_with_keys_and_dates(tpc: Path) -> None:
    p = _profile(tpc, "tpch/3.sql")
    assert p.tables_read == ["customer", "lineitem", "orders"]
    assert _join_set(p) == {
        ("inner", "customer", "orders", frozenset({"c_custkey=o_custkey"})),
        ("inner", "orders", "lineitem", frozenset({"l_orderkey=o_orderkey"})),
    }
    assert _range(p, "o_orderdate").end == "1995-03-14"  # < date '1995-03-15'
    assert _range(p, "l_shipdate").start == "1995-03-16"  # > date '1995-03-15'
    segment = next(f for f in p.filters if f.column == "c_mktsegment")
    assert (segment.table, segment.operator, segment.values) == ("customer", "=", ["BUILDING"])
    assert p.group_by_columns == 3
    assert p.literals["limit"] == ["10"]


def test_tpch_q4_exists_is_a_correlated_join_and_interval_month(tpc: Path) -> None:
    p = _profile(tpc, "tpch/4.sql")
    assert _join_set(p) == {
        ("correlated", "orders", "lineitem", frozenset({"l_orderkey=o_orderkey"}))
    }
    assert _range(p, "o_orderdate") == DateRange(
        column="o_orderdate", table="orders", start="1993-07-01", end="1993-09-30", days=92
    )
    assert p.subqueries == 1


def test_tpch_q13_left_outer_join(tpc: Path) -> None:
    p = _profile(tpc, "tpch/13.sql")
    assert _join_set(p) == {("left", "customer", "orders", frozenset({"c_custkey=o_custkey"}))}
    comment = next(f for f in p.filters if f.column == "o_comment")
    assert (comment.operator, comment.values) == ("not like", ["%special%requests%"])
    assert p.subqueries == 1  # the derived table c_orders
    assert p.aggregations == ["count"]


def test_tpch_q19_join_key_repeated_in_every_or_branch(tpc: Path) -> None:
    p = _profile(tpc, "tpch/19.sql")
    assert _join_set(p) == {("inner", "lineitem", "part", frozenset({"l_partkey=p_partkey"}))}
    brands = {tuple(f.values) for f in p.filters if f.column == "p_brand"}
    assert brands == {("Brand#12",), ("Brand#23",), ("Brand#34",)}


def test_tpch_q2_prefix_tie_between_part_and_partsupp(tpc: Path) -> None:
    p = _profile(tpc, "tpch/2.sql")
    joins = _join_set(p)
    assert ("inner", "part", "partsupp", frozenset({"p_partkey=ps_partkey"})) in joins
    assert ("inner", "nation", "region", frozenset({"n_regionkey=r_regionkey"})) in joins
    assert p.aggregations == ["min"]


# --------------------------------------------------------------------------- TPC-DS


@pytest.mark.parametrize("query", ["q12", "q20", "q98"])
def test_tpcds_window_sum_over_partitions(tpc: Path, query: str) -> None:
    p = _profile(tpc, f"tpcds_2_4/{query}.sql")
    assert p.window_functions == ["sum"]
    assert p.aggregations == ["sum"]
    assert _range(p, "d_date") == DateRange(
        column="d_date", table="date_dim", start="1999-02-22", end="1999-03-24", days=31
    )
    assert {(j.kind, j.right) for j in p.joins} == {("inner", "item"), ("inner", "date_dim")}
    category = next(f for f in p.filters if f.column == "i_category")
    assert category.operator == "in" and "Books" in category.values


def test_tpcds_q12_joins(tpc: Path) -> None:
    p = _profile(tpc, "tpcds_2_4/q12.sql")
    assert _join_set(p) == {
        ("inner", "web_sales", "item", frozenset({"i_item_sk=ws_item_sk"})),
        ("inner", "web_sales", "date_dim", frozenset({"d_date_sk=ws_sold_date_sk"})),
    }


def test_tpcds_q1_cte_and_correlated_self_join(tpc: Path) -> None:
    p = _profile(tpc, "tpcds_2_4/q1.sql")
    assert p.ctes == 1
    assert "customer_total_return" not in p.tables_read
    assert p.tables_read == ["customer", "date_dim", "store", "store_returns"]
    assert (
        "correlated",
        "customer_total_return",
        "customer_total_return",
        frozenset({"ctr_store_sk=ctr_store_sk"}),
    ) in _join_set(p)
    assert _range(p, "d_year") == DateRange(
        column="d_year", table="date_dim", start="2000-01-01", end="2000-12-31", days=366
    )


def test_tpcds_q2_ctes_union_all_and_folded_year(tpc: Path) -> None:
    p = _profile(tpc, "tpcds_2_4/q2.sql")
    assert (p.ctes, p.unions) == (2, 1)
    assert p.tables_read == ["catalog_sales", "date_dim", "web_sales"]
    starts = sorted(r.start or "" for r in p.date_ranges if r.column == "d_year")
    assert starts == ["2001-01-01", "2002-01-01"]  # d_year = 2001 + 1 folded


def test_tpcds_q5_unions_and_interval_range(tpc: Path) -> None:
    p = _profile(tpc, "tpcds_2_4/q5.sql")
    assert (p.ctes, p.unions) == (3, 5)
    assert _range(p, "d_date").days == 15  # between 2000-08-23 and + interval '14' day
    assert "left" in {j.kind for j in p.joins}
    assert len(p.tables_read) == 10


def test_tpcds_q36_rollup_rank(tpc: Path) -> None:
    p = _profile(tpc, "tpcds_2_4/q36.sql")
    assert p.window_functions == ["rank"]
    assert p.aggregations == ["grouping", "sum"]
    assert p.group_by_columns == 2


def test_tpcds_q28_subqueries_cross_joined(tpc: Path) -> None:
    p = _profile(tpc, "tpcds_2_4/q28.sql")
    assert p.subqueries == 6
    assert {j.kind for j in p.joins} == {"cross"}
    assert {j.right for j in p.joins} == {"B2", "B3", "B4", "B5", "B6"}
    assert "count_distinct" in p.aggregations


@pytest.mark.parametrize(
    ("query", "join"),
    [
        ("q62", ("inner", "web_sales", "web_site", frozenset({"web_site_sk=ws_web_site_sk"}))),
        ("q21", ("inner", "inventory", "item", frozenset({"i_item_sk=inv_item_sk"}))),
        ("q40", ("left", "catalog_sales", "catalog_returns", None)),
    ],
)
def test_tpcds_join_attribution(
    tpc: Path, query: str, join: tuple[str, str, str, frozenset[str] | None]
) -> None:
    p = _profile(tpc, f"tpcds_2_4/{query}.sql")
    kind, left, right, keys = join
    matches = [j for j in _join_set(p) if j[:3] == (kind, left, right)]
    assert matches, _join_set(p)
    assert keys is None or matches[0][3] == keys


def test_tpcds_q14a_intersect_is_distinct(tpc: Path) -> None:
    p = _profile(tpc, "tpcds_2_4/q14a.sql")
    assert p.distinct
    assert p.ctes == 2
    years = {(r.start, r.end, r.days) for r in p.date_ranges if r.column == "d_year"}
    assert years == {("1999-01-01", "2001-12-31", 1096), ("2001-01-01", "2001-12-31", 365)}
    assert "dates" not in p.literals  # d_year = 1999 + 2 is a year, not a day
    assert ["2001"] in [f.values for f in p.filters if f.column == "d_year"]


# --------------------------------------------------------------------------- SQL scripts

SCRIPT = """
-- daily job
SET spark.sql.shuffle.partitions = 200;
INSERT OVERWRITE TABLE mart.daily PARTITION (ds = '${ds}')
SELECT /*+ BROADCAST(d) */ f.k, approx_count_distinct(f.user) AS u, my_lib.score(f.x) AS s
FROM raw.facts f JOIN dim.d d ON f.k = d.k
WHERE f.ds BETWEEN date_sub('${ds}', 6) AND '${ds}' AND f.region = :region
  AND f.ts >= '{{ start }}' AND f.kind NOT IN ('test')
GROUP BY f.k;
MERGE INTO mart.latest t USING (SELECT * FROM mart.daily WHERE ds = '${ds}') s ON t.k = s.k
WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *;
OPTIMIZE mart.latest ZORDER BY (k);
CREATE OR REPLACE TEMP VIEW recent AS
SELECT * FROM raw.other WHERE dt >= current_date() - INTERVAL 7 DAYS AND dt < current_date();
SELECT count(DISTINCT id) FROM recent ORDER BY 1;
DELETE FROM raw.facts WHERE ds < date_sub(current_date(), 90)
"""


def test_multi_statement_script_with_template_parameters() -> None:
    p = profile_script(SCRIPT)
    assert p.statements == 7
    assert p.parameters == ["${ds}", ":region", "{{ start }}"]
    assert p.tables_read == ["dim.d", "mart.daily", "raw.facts", "raw.other"]  # no view, no hint
    assert p.tables_written == ["mart.daily", "mart.latest", "raw.facts"]
    assert (
        JoinFact(kind="inner", left="raw.facts", right="dim.d", keys=[("k", "k")], broadcast=True)
        in p.joins
    )
    assert JoinFact(kind="left", left="s", right="mart.latest", keys=[("k", "k")]) in p.joins
    facts_ds = next(r for r in p.date_ranges if r.table == "raw.facts" and r.start)
    assert (facts_ds.start, facts_ds.end, facts_ds.days) == ("${ds} - 6 days", "${ds}", 7)
    recent = next(r for r in p.date_ranges if r.table == "raw.other")
    assert (recent.start, recent.end, recent.days) == (
        "current_date - 7 days",
        "current_date - 1 day",
        7,
    )
    region = next(f for f in p.filters if f.column == "region")
    assert region.values == [":region"]
    kind = next(f for f in p.filters if f.column == "kind")
    assert (kind.operator, kind.values) == ("not in", ["test"])
    assert p.aggregations == ["approx_count_distinct", "count_distinct"]
    assert p.udfs == ["my_lib.score"]
    assert p.order_by and p.subqueries == 1
    assert p.warnings == ["line 12: only the command name was understood: OPTIMIZE"]


def test_partial_failure_is_a_warning() -> None:
    p = profile_script("SELECT a FROM t1;\nSELECT * FROM t2 WHERE;\nSELECT b FROM t3")
    assert p.statements == 2
    assert p.tables_read == ["t1", "t3"]
    [warning] = p.warnings
    assert warning.startswith("statement skipped: line 2, col ")


def test_dates_in_filters_and_literals() -> None:
    p = profile_script(
        "SELECT * FROM logs WHERE ds IN ('20240101', '20240103') AND hour >= 6"
        " AND event_ts >= '2024-01-01 10:30:00' AND event_ts < '2024-01-02'"
    )
    assert _range(p, "ds") == DateRange(
        column="ds", table="logs", start="2024-01-01", end="2024-01-03", days=3
    )
    assert _range(p, "event_ts").days == 1  # a bound inside a day keeps that day
    assert p.literals["numbers"] == ["6"]
    assert p.literals["dates"] == ["2024-01-01", "2024-01-03", "2024-01-02"]


def test_output_is_bounded() -> None:
    tables = " UNION ALL ".join(f"SELECT id FROM db.t{i}" for i in range(MAX_ITEMS + 50))
    p = profile_script(tables)
    assert len(p.tables_read) == MAX_ITEMS
    assert any(w.startswith(f"tables_read: {MAX_ITEMS + 50} found") for w in p.warnings)
    values = ", ".join(f"'{i}'" for i in range(1000))
    long_literal = "x" * 1000
    p = profile_script(f"SELECT * FROM t WHERE a IN ({values}) AND b = '{long_literal}'")
    a = next(f for f in p.filters if f.column == "a")
    assert len(a.values) == 21 and a.values[-1] == "... 980 more"
    b = next(f for f in p.filters if f.column == "b")
    assert len(b.values[0]) == MAX_CHARS


def test_profile_is_frozen_and_json_round_trips() -> None:
    p = profile_script("SELECT 1 FROM t")
    with pytest.raises(ValidationError):
        p.statements = 2
    assert ScriptProfile.model_validate_json(p.model_dump_json()) == p


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("text", ["", "   \n\t", "-- nothing here\n/* at all */\n", "# a note\n"])
def test_empty_script_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="script is empty"):
        profile_script(text)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("SELEC * FROM t", "line 1, col 12"),
        ("SELECT *\n\nFROM", "line 3, col 4: Expected table name but got the end"),
        ("hello world", "line 1: not a SQL statement"),
    ],
)
def test_unparseable_sql_is_refused_with_position(text: str, where: str) -> None:
    with pytest.raises(ConfigError, match=f"SQL could not be parsed: {where}"):
        profile_script(text)


def test_broken_python_is_refused_with_position() -> None:
    with pytest.raises(ConfigError, match=r"Python could not be parsed: line 2, col \d+"):
        profile_script("import pyspark\ndf = spark.table(")
    with pytest.raises(ConfigError, match="Python could not be parsed"):
        profile_script("SELECT 1", language="python")


def test_unknown_language_is_refused() -> None:
    with pytest.raises(ConfigError, match="language must be"):
        profile_script("SELECT 1", language="scala")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- PySpark jobs

ETL_JOB = """
from pyspark.sql import SparkSession, functions as F

spark = SparkSession.builder.appName("daily_orders").getOrCreate()
run_date = dbutils.widgets.get("run_date")

orders = (
    spark.read.table("sales.orders")
    .filter(F.col("order_date") >= "2024-01-01")
    .filter(F.col("order_date") < "2024-02-01")
)
customers = spark.table("crm.customers").where("country = 'DE' AND signup_date >= '2020-01-01'")
enriched = orders.join(F.broadcast(customers), on="customer_id", how="left")
daily = enriched.groupBy("order_date", "segment").agg(
    F.sum("amount").alias("revenue"), F.countDistinct("customer_id").alias("buyers")
)
path = ",".join(["a", "b"])
daily.write.mode("overwrite").partitionBy("order_date").saveAsTable("mart.daily_revenue")
"""

SQL_JOB = '''
import sys

from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
end = sys.argv[1]
table = "analytics.events"
spark.conf.set("spark.sql.shuffle.partitions", 400)
top = spark.sql(f"""
    SELECT e.user_id, count(*) AS n,
           row_number() OVER (PARTITION BY e.country ORDER BY count(*) DESC) AS rk
    FROM {table} e
    JOIN analytics.users u ON e.user_id = u.id
    WHERE e.event_date BETWEEN '2024-03-01' AND '2024-03-07'
      AND e.kind IN ('click', 'view')
      AND e.ds <= '{end}'
    GROUP BY e.user_id, e.country
""")
query = open("extra.sql").read()
spark.sql(query)
top.repartition(64).write.mode("append").parquet("s3://bucket/out/top_users")
'''

ML_JOB = """
import numpy as np
import pandas as pd
from pyspark.ml import Pipeline
from pyspark.ml.classification import RandomForestClassifier
from pyspark.ml.evaluation import BinaryClassificationEvaluator
from pyspark.ml.feature import StringIndexer, VectorAssembler
from pyspark.ml.tuning import CrossValidator, ParamGridBuilder
from pyspark.sql.functions import col, pandas_udf


@pandas_udf("double")
def log_amount(amount: pd.Series) -> pd.Series:
    return np.log1p(amount)


train = spark.read.format("delta").load("/mnt/features/churn")
train = train.where(col("snapshot_date") == "2024-05-31")
train = train.withColumn("log_amount", log_amount(col("amount")))
indexer = StringIndexer(inputCol="plan", outputCol="plan_idx")
assembler = VectorAssembler(inputCols=["plan_idx", "log_amount"], outputCol="features")
rf = RandomForestClassifier(numTrees=200, maxDepth=8, labelCol="churned")
rf.setMaxIter(50)
grid = ParamGridBuilder().addGrid(rf.maxDepth, [4, 8, 12]).build()
cv = CrossValidator(
    estimator=Pipeline(stages=[indexer, assembler, rf]),
    estimatorParamMaps=grid,
    evaluator=BinaryClassificationEvaluator(),
    numFolds=3,
)
model = cv.fit(train)
model.write().overwrite().save("/mnt/models/churn_rf")
"""


def test_python_etl_job() -> None:
    p = profile_script(ETL_JOB)
    assert p.language == "python"
    assert p.tables_read == ["crm.customers", "sales.orders"]
    assert p.tables_written == ["mart.daily_revenue"]
    assert p.joins == [
        JoinFact(
            kind="left",
            left="sales.orders",
            right="crm.customers",
            keys=[("customer_id", "customer_id")],
            broadcast=True,
        )
    ]
    assert _range(p, "order_date") == DateRange(
        column="order_date", table="sales.orders", start="2024-01-01", end="2024-01-31", days=31
    )
    country = next(f for f in p.filters if f.column == "country")  # a SQL-string condition
    assert (country.table, country.operator, country.values) == ("crm.customers", "=", ["DE"])
    assert p.aggregations == ["count_distinct", "sum"]
    assert p.group_by_columns == 2
    assert p.parameters == ['dbutils.widgets.get("run_date")']
    assert p.statements == 8


def test_python_spark_sql_fstring_job() -> None:
    p = profile_script(SQL_JOB)
    assert p.tables_read == ["analytics.events", "analytics.users"]  # {table} filled in
    assert p.tables_written == ["s3://bucket/out/top_users"]
    assert _join_set(p) == {
        ("inner", "analytics.events", "analytics.users", frozenset({"id=user_id"}))
    }
    assert _range(p, "event_date") == DateRange(
        column="event_date", table="analytics.events", start="2024-03-01", end="2024-03-07", days=7
    )
    assert _range(p, "ds").end == "{end}"
    assert p.window_functions == ["row_number"]
    assert p.aggregations == ["count"]
    assert p.parameters == ["sys.argv[1]"]
    assert p.literals["spark_conf"] == ["spark.sql.shuffle.partitions=400"]
    assert p.literals["partitions"] == ["repartition=64"]
    assert any("SQL text is not a literal" in w for w in p.warnings)


def test_python_mllib_job_with_pandas_udf() -> None:
    p = profile_script(ML_JOB)
    assert p.ml_estimators == [
        "StringIndexer",
        "RandomForestClassifier",
        "Pipeline",
        "CrossValidator",
    ]
    assert p.udfs == ["pandas_udf:log_amount"]
    assert p.tables_read == ["/mnt/features/churn"]
    assert p.tables_written == ["/mnt/models/churn_rf"]
    assert set(p.literals["ml_params"]) == {
        "RandomForestClassifier.numTrees=200",
        "RandomForestClassifier.maxDepth=8",
        "RandomForestClassifier.maxIter=50",
        "grid.maxDepth=3 values",
        "CrossValidator.numFolds=3",
    }
    assert _range(p, "snapshot_date").days == 1


def test_python_dataframe_odds_and_ends() -> None:
    p = profile_script(
        """
import os
from pyspark.sql import Window
import pyspark.sql.functions as sf
from delta.tables import DeltaTable

start = os.environ.get("START_DATE")
events = spark.read.parquet("s3://raw/events")
recent = events.filter((sf.col("dt") >= sf.date_sub(sf.current_date(), 7)) & ~sf.col("bot"))
w = Window.partitionBy("user").orderBy("ts")
ranked = recent.withColumn("prev", sf.lag("ts").over(w)).dropDuplicates(["user", "ts"])
mapped = ranked.groupBy("user").applyInPandas(score, schema="user string, s double")
both = mapped.unionByName(spark.table("hist.scores")).orderBy("user")
target = DeltaTable.forName(spark, "mart.scores")
target.alias("t").merge(both.alias("s"), "t.user = s.user").whenMatchedUpdateAll().execute()
lookup = {"a": 1}
lookup.update({"b": 2})
"""
    )
    assert p.tables_read == ["hist.scores", "mart.scores", "s3://raw/events"]
    assert p.tables_written == ["mart.scores"]
    assert p.window_functions == ["lag"]
    assert p.udfs == ["applyInPandas:score"]
    assert p.distinct and p.order_by
    assert p.unions == 1
    assert p.parameters == ['os.environ["START_DATE"]']
    dt = _range(p, "dt")
    assert (dt.start, dt.end) == ("current_date - 7 days", None)


def test_auto_detection() -> None:
    assert profile_script("import os\nspark.table('x')").language == "python"
    assert profile_script("SELECT 1 FROM t").language == "sql"
    assert profile_script("select * from t", language="sql").tables_read == ["t"]
