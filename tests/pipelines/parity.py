"""What "the same values" means between DuckDB and Spark, and a DuckDB warehouse as Parquet tables.

Exact for integers, text, booleans and NULL; 1e-9 relative for floats (summation order differs
between engines); NaN equals NaN, and an infinity only itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import duckdb

from autofe.modeling.dataset import Value
from autofe.warehouse.parquet_tables import duckdb_select, write_manifest
from autofe.warehouse.tables import TABLES

REL_TOL = 1e-9


def same(duck: Value, spark: Value) -> bool:
    """
    >>> same(0.1 + 0.2, 0.3), same(1, 1.0), same(float("nan"), float("nan")), same(None, 0.0)
    (True, True, True, False)
    >>> same(2**53 + 1, float(2**53)), same("a", "a"), same(True, 1.0)
    (False, True, False)
    """
    if (
        duck is None
        or spark is None
        or isinstance(duck, str | bool)
        or isinstance(spark, str | bool)
    ):
        return duck == spark and type(duck) is type(spark)
    if isinstance(duck, int) and isinstance(spark, int):
        return duck == spark
    if isinstance(duck, int) or isinstance(spark, int):  # an integer compares exactly
        whole, other = (duck, float(spark)) if isinstance(duck, int) else (spark, float(duck))
        return math.isfinite(other) and other.is_integer() and int(other) == whole
    a, b = float(duck), float(spark)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=REL_TOL)


def differences(
    duck: Mapping[str, Value], spark: Mapping[str, Value]
) -> list[tuple[str, Value, Value]]:
    """(run id, DuckDB's value, Spark's value) wherever the two differ, or a run is missing."""
    runs = sorted(set(duck) | set(spark))
    return [(r, duck.get(r), spark.get(r)) for r in runs if not same(duck.get(r), spark.get(r))]


def export_tables(db: Path, folder: Path) -> Path:
    """A DuckDB warehouse as a table folder (one Parquet file per table and the manifest), as
    ``spark_ingest`` writes it, so Spark computes over exactly DuckDB's rows."""
    con = duckdb.connect(str(db), read_only=True)
    counts = {}
    try:
        for t in TABLES:
            (folder / t.name).mkdir(parents=True, exist_ok=True)
            target = str(folder / t.name / "part-0.parquet")
            con.execute(f"COPY ({duckdb_select(t)}) TO '{target}' (FORMAT parquet)")
            counts[t.name] = int(con.execute(f"SELECT count(*) FROM {t.name}").fetchall()[0][0])
    finally:
        con.close()
    write_manifest(folder, counts)
    return folder
