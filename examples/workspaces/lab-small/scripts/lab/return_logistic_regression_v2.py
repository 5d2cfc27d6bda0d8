"""Version 2: adds per-ship-mode return rates as a feature (one more join) and L2 shrinkage."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

FEATURES = ("quantity", "discount", "tax", "days_late", "mode_rate")


def _margin(weights: list[float]) -> Column:
    from pyspark.sql import functions as F

    total = F.lit(weights[0])
    for name, w in zip(FEATURES, weights[1:], strict=True):
        total = total + F.col(name) * F.lit(w)
    return total


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

    lines = spark.table("lineitem").where(_between("l_shipmonth", "l_shipdate", params))
    mode_rate = lines.groupBy("l_shipmode").agg(
        F.avg((F.col("l_returnflag") == "R").cast("double")).alias("mode_rate")
    )
    train = (
        lines.join(mode_rate, "l_shipmode")
        .select(
            (F.col("l_returnflag") == "R").cast("double").alias("label"),
            (F.col("l_quantity") / 50).cast("double").alias("quantity"),
            (F.col("l_discount") * 10).cast("double").alias("discount"),
            (F.col("l_tax") * 10).cast("double").alias("tax"),
            (F.datediff("l_receiptdate", "l_commitdate") / 30).cast("double").alias("days_late"),
            F.col("mode_rate"),
        )
        .cache()
    )
    n = max(train.count(), 1)
    weights = [0.0] * (len(FEATURES) + 1)
    rate = float(params["learning_rate"])
    for _ in range(int(params["iterations"])):
        error = 1 / (1 + F.exp(-_margin(weights))) - F.col("label")
        grads = [F.sum(error)] + [F.sum(error * F.col(name)) for name in FEATURES]
        row = train.agg(*grads).first()
        assert row is not None
        weights = [
            w * (1 - rate * 0.01) - rate * float(g or 0.0) / n
            for w, g in zip(weights, row, strict=True)
        ]
    predicted = (_margin(weights) > 0).cast("double")
    train.agg(F.avg((predicted == F.col("label")).cast("double"))).collect()
    train.unpersist()
