"""Write one run table's rows, ledger entry and issues in one transaction."""

from __future__ import annotations

from pathlib import Path

import duckdb

from autofe.ingest.run_table.run_rows import Batch, Row
from autofe.warehouse.ledger import record_ingested, record_issues
from autofe.warehouse.write import insert_rows, transaction


def write_batch(con: duckdb.DuckDBPyConnection, batch: Batch, digest: str, path: Path) -> int:
    """Write one table's rows in one transaction; returns how many jobs were new."""
    with transaction(con, str(path)):
        new_jobs = _insert_missing(con, "jobs", "job_id", list(batch.jobs.values()))
        _insert_missing(con, "cluster_configs", "config_id", list(batch.configs.values()))
        _replace_runs(con, batch)
        record_ingested(con, digest, path, "run_table")
        record_issues(con, batch.issues)
    return new_jobs


def _insert_missing(
    con: duckdb.DuckDBPyConnection, table_name: str, key: str, rows: list[Row]
) -> int:
    """Insert rows whose key is new; an existing job or config keeps its first source."""
    ids = [row[key] for row in rows]
    found = con.execute(
        f"SELECT {key} FROM {table_name} WHERE {key} IN (SELECT unnest(?::VARCHAR[]))", [ids]
    ).fetchall()
    existing = {r[0] for r in found}
    new = [row for row in rows if row[key] not in existing]
    insert_rows(con, table_name, new)
    return len(new)


def _replace_runs(con: duckdb.DuckDBPyConnection, batch: Batch) -> None:
    # A changed table replaces its runs; their old attributes go so dropped columns do not linger.
    ids = list(batch.runs)
    con.execute("DELETE FROM run_attributes WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
    insert_rows(con, "runs", list(batch.runs.values()), replace=True)
    insert_rows(con, "run_attributes", batch.attributes)
