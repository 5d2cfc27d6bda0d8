"""A time-stratified sample of whole jobs: the warehouse the loop scores candidates on when the
real one is too large to score every candidate on every run.

Whole jobs, so a feature's history ("the job's last 5 runs", "its runs on this cluster") is as
complete in the sample as in the warehouse. Time-stratified, so the sample spans the history:
jobs are grouped by when their first run was submitted (``STRATA`` equal-count groups), and
each group gives its share of the runs, taking its jobs in the order of a hash of their id (the
same choice on every machine, spread over teams and kinds of job). The loop's time-ordered CV
and holdout then cut the sample at the same points in time as the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from autofe.errors import ConfigError, WarehouseError, first_line
from autofe.warehouse.connect import BULK_MEMORY_LIMIT, open_warehouse
from autofe.warehouse.tables import TABLES

STRATA = 10
"""Groups of jobs by first submission; each contributes its share of the runs."""


@dataclass(frozen=True)
class WarehouseSample:
    """What a sample holds of its warehouse."""

    runs: int
    jobs: int
    of_runs: int
    of_jobs: int
    strata: int

    def as_dict(self) -> dict[str, int]:
        return {
            "runs": self.runs,
            "jobs": self.jobs,
            "of_runs": self.of_runs,
            "of_jobs": self.of_jobs,
            "strata": self.strata,
        }


def count_runs(db: Path) -> int:
    """Runs in the warehouse at ``db`` (read-only).

    Raises:
        WarehouseError: it cannot be read.
    """
    con = open_warehouse(db, read_only=True)
    try:
        return int(con.execute("SELECT count(*) FROM runs").fetchall()[0][0])
    finally:
        con.close()


def sample_warehouse(source: Path, out: Path, runs: int) -> WarehouseSample:
    """Write a warehouse at ``out`` holding whole jobs of ``source``, about ``runs`` runs.

    Raises:
        ConfigError: ``runs`` < 1, or ``out`` already exists.
        WarehouseError: ``source`` cannot be read or ``out`` written (nothing is left at ``out``).
    """
    if runs < 1:
        raise ConfigError(f"a warehouse sample needs at least one run, not {runs}")
    if out.exists():
        raise ConfigError(f"{out} already exists: remove it or sample into another file")
    try:
        con = open_warehouse(out)
        try:
            _fill(con, source, runs)
            counts = con.execute(
                "SELECT (SELECT count(*) FROM runs), (SELECT count(DISTINCT job_id) FROM runs), "
                "(SELECT count(*) FROM src.runs), (SELECT count(DISTINCT job_id) FROM src.runs)"
            ).fetchall()[0]
            con.execute("DETACH src")
        finally:
            con.close()
    except duckdb.Error as exc:
        for leftover in (out, out.with_name(out.name + ".wal")):
            leftover.unlink(missing_ok=True)
        raise WarehouseError(f"cannot sample {source} into {out}: {first_line(exc)}") from exc
    runs_in, jobs_in, of_runs, of_jobs = (int(c) for c in counts)
    return WarehouseSample(runs_in, jobs_in, of_runs, of_jobs, STRATA)


def _fill(con: duckdb.DuckDBPyConnection, source: Path, runs: int) -> None:
    # DuckDB's default (80 % of RAM) let sampling a 1 M-run warehouse reach 9.5 GiB resident
    con.execute(f"SET memory_limit = '{BULK_MEMORY_LIMIT}'")
    quoted = str(source).replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS src (READ_ONLY)")
    con.execute(CHOSEN_SQL, [STRATA, runs])
    con.execute("BEGIN")
    for t in TABLES:
        columns = {c.name for c in t.columns}
        if t.name in ("runs", "jobs"):
            where = "WHERE job_id IN (SELECT job_id FROM chosen)"
        elif "run_id" in columns:
            where = "WHERE run_id IN (SELECT run_id FROM src.runs WHERE job_id IN "
            where += "(SELECT job_id FROM chosen))"
        else:  # shared: node types, cluster configurations, table statistics, bookkeeping
            where = ""
        con.execute(f"INSERT INTO {t.name} BY NAME SELECT * FROM src.{t.name} {where}")
    con.execute("COMMIT")


CHOSEN_SQL = """
CREATE TEMP TABLE chosen AS
WITH per_job AS (
  SELECT job_id, count(*) AS n, min(submit_time) AS first
  FROM src.runs
  GROUP BY job_id
),
strata AS (
  SELECT job_id, n, ntile($1) OVER (ORDER BY first NULLS LAST, job_id) AS stratum
  FROM per_job
),
quota AS (
  SELECT stratum, sum(n) * $2 / (SELECT sum(n) FROM per_job) AS want
  FROM strata
  GROUP BY stratum
),
ordered AS (
  SELECT s.job_id, s.stratum, q.want,
    sum(s.n) OVER (PARTITION BY s.stratum ORDER BY hash(s.job_id), s.job_id
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
  FROM strata AS s
  JOIN quota AS q USING (stratum)
)
SELECT job_id FROM ordered WHERE coalesce(before, 0) < want
"""
"""Each stratum's jobs in hash order while the runs taken before each are short of its quota
(so a stratum takes at least one job, and overshoots by at most its last job's runs)."""
