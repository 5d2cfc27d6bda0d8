"""Cluster customers by balance, order frequency and basket size with a few k-means rounds.

Plain DataFrame operations (no MLlib, so no numpy): each round assigns every customer to its
nearest centre and recomputes the centres with one aggregation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

FEATURES = ("balance", "frequency", "basket")


def _nearest(centres: list[list[float]]) -> Column:
    from pyspark.sql import functions as F

    distances = [
        sum(((F.col(f) - F.lit(c)) ** 2 for f, c in zip(FEATURES, centre, strict=True)), F.lit(0.0))
        for centre in centres
    ]
    best = F.lit(0)
    smallest = distances[0]
    for i, d in enumerate(distances[1:], start=1):
        best = F.when(d < smallest, F.lit(i)).otherwise(best)
        smallest = F.least(smallest, d)
    return best


def _between(month: str, day: str, params: dict[str, str]) -> Column:
    """Window filter: the month partition column prunes files, the date column is exact."""
    from pyspark.sql import functions as F

    start, end = F.lit(params["start"]).cast("date"), F.lit(params["end"]).cast("date")
    return (
        (F.col(month) >= F.trunc(start, "month"))
        & (F.col(month) < end)
        & (F.col(day) >= start)
        & (F.col(day) < end)
    )


def run(spark: SparkSession, params: dict[str, str]) -> None:
    from pyspark.sql import functions as F

    orders = spark.table("orders").where(_between("o_ordermonth", "o_orderdate", params))
    per_customer = orders.groupBy("o_custkey").agg(
        F.count("*").alias("n_orders"), F.avg("o_totalprice").alias("avg_total")
    )
    points = (
        spark.table("customer")
        .where(F.col("c_mktsegment").isin(params["segment"]))
        .join(per_customer, F.col("c_custkey") == F.col("o_custkey"))
        .select(
            "c_custkey",
            (F.col("c_acctbal") / 10000).cast("double").alias("balance"),
            (F.log1p("n_orders")).cast("double").alias("frequency"),
            (F.col("avg_total") / 500000).cast("double").alias("basket"),
        )
        .cache()
    )
    k = int(params["k"])
    seeds = points.orderBy("c_custkey").limit(k).collect()
    centres = [[float(r[f]) for f in FEATURES] for r in seeds]
    for _ in range(int(params["iterations"])):
        if not centres:
            break
        assigned = points.withColumn("cluster", _nearest(centres))
        rows = assigned.groupBy("cluster").agg(*[F.avg(f).alias(f) for f in FEATURES]).collect()
        centres = [
            [float(r[f]) for f in FEATURES] for r in sorted(rows, key=lambda r: r["cluster"])
        ]
    if centres:
        points.withColumn("cluster", _nearest(centres)).groupBy("cluster").count().collect()
    points.unpersist()
