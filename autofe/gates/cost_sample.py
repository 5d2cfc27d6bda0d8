"""Nested samples of whole jobs: the small warehouses the cost gate measures a feature on.

A feature's cost is measured twice, on a sample of the warehouse's jobs and on a larger one
that contains it, to see how it grows with the history. Whole jobs, not random runs: a
feature reads a run's job, cluster and node-type history, and a run sample would thin every
job's history instead of growing the warehouse the way it grows (more jobs sharing the same
cluster configurations and node types). The jobs are taken in the order of a hash of their id,
so the samples are the same on every machine and nested (the larger holds the smaller).

Job samples grow the number of jobs, not their histories: a feature that joins each run with
every earlier run of its job costs the same per job in both, and looks linear. A real
warehouse also grows in depth (a job run hourly has 8,760 runs a year). So a third sample,
``depth``, holds the largest sample's jobs with only their earliest runs, the smallest share's
part of its runs (a quarter at the default 10 % and 40 %): from it to the largest sample, each
job's history grows about as much as the number of jobs does from the smallest.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from autofe.errors import WarehouseError, first_line
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import Sandbox
from autofe.sandbox.work import counting
from autofe.warehouse.catalog import WarehouseCatalog

_FILE = "_cost_source"


@dataclass(frozen=True)
class Sample:
    """One sample warehouse, locked down like the real one, and how many runs it holds."""

    runs: int
    sandbox: Sandbox


@dataclass(frozen=True)
class Samples:
    """The nested samples, smallest first, and the warehouse's own size they project to."""

    samples: tuple[Sample, ...]
    warehouse_runs: int
    depth: Sample | None = None
    """The largest sample's jobs over the start of their history (the smallest share's part
    of its runs), or None when the largest sample is too small to cut."""


def sample_sizes(total: int, shares: Sequence[float], cap: int) -> tuple[int, ...]:
    """Runs each sample should hold: ``shares`` of the warehouse, the largest at most ``cap``
    (the others keep their ratio to it), each at least one run.

    >>> sample_sizes(490, (0.1, 0.4), 50_000)
    (49, 196)
    >>> sample_sizes(1_000_000, (0.1, 0.4), 50_000)
    (12500, 50000)
    """
    scale = min(1.0, cap / (max(shares) * total)) if total else 1.0
    return tuple(max(1, round(total * share * scale)) for share in shares)


def job_order(counts: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """Jobs in the order samples take them: by a hash of the id (the same everywhere).

    >>> [j for j, _ in job_order([("a", 1), ("b", 1), ("c", 1)])]
    ['c', 'b', 'a']
    """
    return sorted(counts, key=lambda jc: hashlib.sha256(jc[0].encode()).hexdigest())


def take_jobs(ordered: Sequence[tuple[str, int]], runs: int) -> list[str]:
    """The shortest prefix of ``ordered`` jobs with at least ``runs`` runs.

    >>> take_jobs([("a", 3), ("b", 5), ("c", 2)], 4)
    ['a', 'b']
    """
    taken, total = [], 0
    for job, count in ordered:
        if total >= runs:
            break
        taken.append(job)
        total += count
    return taken


def cost_samples(
    db: Path, catalog: WarehouseCatalog, shares: tuple[float, ...], cap: int, limits: SandboxLimits
) -> Samples:
    """The nested job samples of the warehouse at ``db``, built once per file version.

    Raises:
        WarehouseError: the warehouse cannot be read.
    """
    stat = os.stat(db)
    key = (Path(db).resolve(), stat.st_mtime_ns, stat.st_size, shares, cap, limits)
    with _LOCK:
        if key not in _BUILT:  # a rewritten warehouse (new mtime or size) gets new samples
            while len(_BUILT) >= _KEEP:
                _close(_BUILT.pop(next(iter(_BUILT))))
            _BUILT[key] = _build(Path(db).resolve(), catalog, shares, cap, limits)
        return _BUILT[key]


_KEEP = 2
"""Warehouses whose samples stay built (a run's and one a test or command opened beside it)."""
_BUILT: dict[tuple[object, ...], Samples] = {}
_LOCK = threading.Lock()


def _close(samples: Samples) -> None:
    for sample in (*samples.samples, *([samples.depth] if samples.depth else [])):
        sample.sandbox.close()


def _build(
    db: Path,
    catalog: WarehouseCatalog,
    shares: tuple[float, ...],
    cap: int,
    limits: SandboxLimits,
) -> Samples:
    one_thread = counting(limits)
    try:
        with duckdb.connect(":memory:") as con:
            con.execute(f"ATTACH '{_escaped(db)}' AS {_FILE} (READ_ONLY)")
            counts = con.execute(
                f"SELECT job_id, count(*) FROM {_FILE}.runs GROUP BY job_id"
            ).fetchall()
        ordered = job_order([(str(j), int(n)) for j, n in counts])
        total = sum(n for _, n in ordered)
        sizes = sample_sizes(total, shares, cap)
        samples = tuple(
            _sample(db, catalog, take_jobs(ordered, size), one_thread) for size in sizes
        )
        first = round(samples[-1].runs * sizes[0] / sizes[-1])
        depth = (
            _sample(db, catalog, take_jobs(ordered, sizes[-1]), one_thread, first_runs=first)
            if 0 < first < samples[-1].runs
            else None
        )
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot sample {db} for the cost gate: {first_line(exc)}") from exc
    return Samples(samples, total, depth)


def _escaped(path: Path) -> str:
    return str(path).replace("'", "''")


def _sample(
    db: Path,
    catalog: WarehouseCatalog,
    jobs: list[str],
    limits: SandboxLimits,
    first_runs: int | None = None,
) -> Sample:
    """An in-memory warehouse holding ``jobs`` and their runs' rows, and every shared table;
    with ``first_runs``, only that many of their runs, the first submitted (run id breaks
    ties)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"ATTACH '{_escaped(db)}' AS {_FILE} (READ_ONLY)")
        con.execute("CREATE TEMP TABLE _jobs (job_id VARCHAR)")
        con.executemany("INSERT INTO _jobs VALUES (?)", [(j,) for j in jobs])
        first = "" if first_runs is None else f" ORDER BY submit_time, run_id LIMIT {first_runs:d}"
        con.execute(
            f"CREATE TEMP TABLE _runs AS SELECT run_id FROM {_FILE}.runs "
            f"WHERE job_id IN (SELECT job_id FROM _jobs){first}"
        )
        for table in sorted(catalog.tables()):
            columns = {c for t, c in catalog.columns if t == table}
            where = (
                "WHERE run_id IN (SELECT run_id FROM _runs)"
                if "run_id" in columns
                else "WHERE job_id IN (SELECT job_id FROM _jobs)"
                if table == "jobs"
                else ""
            )
            # In one order whatever the file's: DuckDB's statistics, and so its plans and
            # their row counts, follow the order rows were inserted in.
            con.execute(
                f'CREATE TABLE "{table}" AS SELECT * FROM {_FILE}."{table}" {where} ORDER BY ALL'
            )
        runs = int(con.execute("SELECT count(*) FROM runs").fetchall()[0][0])
        con.execute("DROP TABLE _jobs")
        con.execute("DROP TABLE _runs")
        con.execute(f"DETACH {_FILE}")
        return Sample(runs, Sandbox.wrap(con, catalog, limits))
    except BaseException:
        con.close()
        raise
