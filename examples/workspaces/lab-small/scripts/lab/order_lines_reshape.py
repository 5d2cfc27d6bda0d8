"""Nest each order's lines into an array, explode them back, rank within the order, write."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession


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
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    orders = spark.table("orders").where(
        _between("o_ordermonth", "o_orderdate", params)
        & F.col("o_orderpriority").isin(params["priority"])
    )
    lines = spark.table("lineitem").where(
        F.col("l_shipmonth") >= F.trunc(F.lit(params["start"]).cast("date"), "month")
    )
    nested = (
        orders.join(lines, lines.l_orderkey == orders.o_orderkey)
        .groupBy("o_orderkey", "o_custkey", "o_orderdate")
        .agg(
            F.collect_list(
                F.struct("l_partkey", "l_quantity", "l_extendedprice", "l_shipmode")
            ).alias("items")
        )
    )
    flat = nested.select("o_orderkey", "o_custkey", "o_orderdate", F.explode("items").alias("item"))
    by_price = Window.partitionBy("o_orderkey").orderBy(F.col("item.l_extendedprice").desc())
    ranked = flat.select(
        "o_orderkey",
        "o_custkey",
        F.col("item.l_partkey").alias("l_partkey"),
        F.col("item.l_shipmode").alias("l_shipmode"),
        F.col("item.l_extendedprice").alias("price"),
        F.row_number().over(by_price).alias("price_rank"),
        F.sum("item.l_quantity").over(Window.partitionBy("o_custkey")).alias("customer_units"),
    ).where(F.col("price_rank") <= int(params["top_k"]))
    out = f"{params['scratch']}/order_lines_reshape"
    ranked.write.mode("overwrite").partitionBy("l_shipmode").parquet(out)
    spark.read.parquet(out).groupBy("l_shipmode").count().collect()
