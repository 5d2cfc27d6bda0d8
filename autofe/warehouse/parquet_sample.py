"""A DuckDB warehouse sampled from Parquet tables, for running the gates before Spark runs SQL.

The gates (completeness, static and dynamic leakage) are DuckDB code over a DuckDB warehouse.
When the warehouse lives only as Parquet tables (``spark_ingest``), they run on a sample:
whole jobs, with every run, application, stage and attribute of those jobs, so a feature's
history ("the last 5 runs of this job") is as complete in the sample as in the full tables.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from autofe.errors import WarehouseError
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.parquet_tables import read_manifest
from autofe.warehouse.tables import TABLES

DEFAULT_SAMPLE_RUNS = 2000

_BY_RUN = ("applications", "spark_jobs", "stages", "sql_executions", "executors", "run_attributes")
_WHOLE = ("table_stats",)


def gate_sample(tables: Path, out: Path, max_runs: int = DEFAULT_SAMPLE_RUNS) -> Path:
    """Write a DuckDB warehouse at ``out`` holding whole jobs, up to ``max_runs`` runs.

    Jobs are taken in the order of a hash of their id (a fixed, spread-out choice) while their
    runs fit; at least one job is taken, however large.

    Raises:
        ConfigError: ``tables`` is no table folder written by ``spark_ingest``.
        WarehouseError: a table cannot be read or the sample cannot be written.
    """
    read_manifest(tables)
    out.unlink(missing_ok=True)
    con = open_warehouse(out)
    try:
        _copy(con, tables, max_runs)
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot sample {tables} into {out}: {exc}") from exc
    finally:
        con.close()
    return out


def _copy(con: duckdb.DuckDBPyConnection, tables: Path, max_runs: int) -> None:
    for t in TABLES:
        source = _glob(tables, t.name).replace("'", "''")  # a view cannot take a parameter
        con.execute(f"CREATE TEMP VIEW src_{t.name} AS SELECT * FROM read_parquet('{source}')")
    con.execute(
        "CREATE TEMP TABLE chosen AS SELECT job_id FROM (SELECT job_id, sum(n) OVER "
        "(ORDER BY hash(job_id), job_id) AS upto, row_number() OVER (ORDER BY hash(job_id), "
        "job_id) AS k FROM (SELECT job_id, count(*) AS n FROM src_runs GROUP BY job_id)) "
        f"WHERE upto <= {int(max_runs)} OR k = 1"
    )
    con.execute("BEGIN")
    for name in ("runs", "jobs"):
        con.execute(
            f"INSERT INTO {name} BY NAME SELECT * FROM src_{name} "
            "WHERE job_id IN (SELECT job_id FROM chosen)"
        )
    con.execute(
        "INSERT INTO cluster_configs BY NAME SELECT * FROM src_cluster_configs "
        "WHERE config_id IN (SELECT cluster_config_id FROM runs)"
    )
    for name in _BY_RUN:
        con.execute(
            f"INSERT INTO {name} BY NAME SELECT * FROM src_{name} "
            "WHERE run_id IN (SELECT run_id FROM runs)"
        )
    for name in _WHOLE:
        con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM src_{name}")
    con.execute("COMMIT")


def _glob(tables: Path, name: str) -> str:
    return str(tables / name / "*.parquet")
