"""Measure a generated workspace: its shape, runtime spread, and whether the hard effects are real.

Works on the warehouse an ingested lab workspace produces, so every number is computed from
the same rows a model trains on. Pruning: within one job, scale factor and core count, runs
over long date windows against runs over short ones. Skew: per stage, the longest task over
the median task, for jobs reading the Zipf-skewed tables against the rest.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from autofe.config import IngestSettings
from autofe.errors import ConfigError
from autofe.ingest.ingest import ingest

_SUCCESS = "r.status = 'SUCCEEDED'"
_ATTR = "(SELECT a.value FROM run_attributes a WHERE a.run_id = r.run_id AND a.name = '{}')"


@dataclass(frozen=True)
class Shape:
    runs: int
    succeeded: int
    jobs: int
    virtual_days: int
    min_configs_per_job: int
    sweep_points: int
    sweep_configs: int
    fastest_s: float
    median_s: float
    slowest_s: float

    @property
    def spread(self) -> float:
        return self.slowest_s / self.fastest_s


@dataclass(frozen=True)
class PruningGroup:
    job: str
    scale_factor: float
    cores: int
    runs: int
    window_ratio: float
    """Median window length of the long half over the short half."""
    runtime_ratio: float
    """Median duration of the long half over the short half."""


@dataclass(frozen=True)
class Effects:
    shape: Shape
    pruning: list[PruningGroup] = field(default_factory=list)
    skew_stage_ratio: float = 0.0
    """Median max/median task duration over stages of jobs reading the skewed tables."""
    plain_stage_ratio: float = 0.0
    """The same over stages of the other jobs."""
    durations: list[float] = field(default_factory=list)


def measure(con: duckdb.DuckDBPyConnection) -> Effects:
    """Every measurement of an ingested lab workspace."""
    skewed, plain = _stage_ratios(con)
    return Effects(
        shape=shape(con),
        pruning=pruning(con),
        skew_stage_ratio=skewed,
        plain_stage_ratio=plain,
        durations=[
            float(r[0])
            for r in con.execute(f"SELECT duration_s FROM runs r WHERE {_SUCCESS}").fetchall()
        ],
    )


def shape(con: duckdb.DuckDBPyConnection) -> Shape:
    """Counts the issue asks for, and the runtime range of successful runs."""
    runs, ok, jobs, days = con.execute(
        f"SELECT count(*), count(*) FILTER ({_SUCCESS}), count(DISTINCT job_id), "
        f"count(DISTINCT {_ATTR.format('tag.lab_virtual_day')}) FROM runs r"
    ).fetchall()[0]
    (min_configs,) = con.execute(
        "SELECT min(n) FROM "
        "(SELECT count(DISTINCT cluster_config_id) AS n FROM runs GROUP BY job_id)"
    ).fetchall()[0]
    points, configs = _sweeps(con)
    low, mid, high = con.execute(
        f"SELECT min(duration_s), median(duration_s), max(duration_s) FROM runs r WHERE {_SUCCESS}"
    ).fetchall()[0]
    return Shape(runs, ok, jobs, days, min_configs, points, configs, low, mid, high)


def _sweeps(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """Sweep points (same job, parameters, day, scale) and the fewest configurations any has."""
    row = con.execute(
        f"""SELECT count(*), min(n) FROM (
              SELECT count(DISTINCT r.cluster_config_id) AS n FROM runs r
              WHERE {_ATTR.format("tag.sweep")} = 1
              GROUP BY r.job_id, r.parameters::VARCHAR, {_ATTR.format("tag.lab_virtual_day")},
                       {_ATTR.format("tag.lab_scale_factor")})"""
    ).fetchall()[0]
    return int(row[0]), int(row[1] or 0)


def pruning(con: duckdb.DuckDBPyConnection, min_runs: int = 4) -> list[PruningGroup]:
    """Long-window against short-window runtime, per (job, scale factor, cores) group.

    Repeat runs are left out: they share one window, so they say nothing about pruning.
    """
    rows = con.execute(
        f"""SELECT j.name, {_ATTR.format("tag.lab_scale_factor")} AS sf,
                   CAST(regexp_extract(c.spark_conf->>'$."spark.master"', '\\d+') AS INTEGER),
                   CAST(r.parameters->'$.notebook_params'->>'days' AS DOUBLE), r.duration_s
            FROM runs r JOIN jobs j USING (job_id) JOIN cluster_configs c
              ON c.config_id = r.cluster_config_id
            WHERE {_SUCCESS} AND r.parameters->'$.notebook_params'->>'days' IS NOT NULL
              AND {_ATTR.format("tag.repeat")} IS NULL"""
    ).fetchall()
    groups: dict[tuple[str, float, int], list[tuple[float, float]]] = {}
    for name, sf, cores, days, duration in rows:
        groups.setdefault((name, sf, cores), []).append((days, duration))
    return [
        _halves(key, points) for key, points in sorted(groups.items()) if len(points) >= min_runs
    ]


def _halves(key: tuple[str, float, int], points: list[tuple[float, float]]) -> PruningGroup:
    ordered = sorted(points)
    half = len(ordered) // 2
    short, long = ordered[:half], ordered[len(ordered) - half :]
    windows = statistics.median(p[0] for p in long) / statistics.median(p[0] for p in short)
    runtimes = statistics.median(p[1] for p in long) / statistics.median(p[1] for p in short)
    return PruningGroup(key[0], key[1], key[2], len(points), windows, runtimes)


def _stage_ratios(con: duckdb.DuckDBPyConnection) -> tuple[float, float]:
    """Median longest/median task ratio for stages with ≥ 4 tasks: skewed jobs, other jobs."""
    rows = con.execute(
        """SELECT regexp_matches(j.script_text, '(lineitem|orders)_skew') AS skewed,
                  median(s.task_duration_max_ms / nullif(s.task_duration_p50_ms, 0))
           FROM stages s JOIN runs r ON r.run_id = s.run_id JOIN jobs j USING (job_id)
           WHERE s.task_count >= 4 AND s.status = 'succeeded'
           GROUP BY 1"""
    ).fetchall()
    ratios = {bool(k): float(v) for k, v in rows if v is not None}
    return ratios.get(True, 0.0), ratios.get(False, 0.0)


def measure_workspace(workspace: Path) -> Effects:
    """Ingest ``workspace`` into an in-memory warehouse and measure it."""
    if not (workspace / "runs").is_dir():
        raise ConfigError(f"{workspace} has no runs/ folder; is it a lab workspace?")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "effects.duckdb"
        ingest([workspace], IngestSettings(db=db, workers=1))
        con = duckdb.connect(str(db), read_only=True)
        try:
            return measure(con)
        finally:
            con.close()


def effects_text(effects: Effects) -> str:
    """A short human report."""
    s = effects.shape
    lines = [
        f"{s.runs} runs ({s.succeeded} succeeded) of {s.jobs} jobs over {s.virtual_days} days;"
        f" every job under >= {s.min_configs_per_job} configurations",
        f"{s.sweep_points} sweep points, each under >= {s.sweep_configs} configurations",
        f"runtime {s.fastest_s:.2f} s .. {s.slowest_s:.1f} s (spread {s.spread:.0f}x),"
        f" median {s.median_s:.1f} s",
        f"skew: longest/median task per stage {effects.skew_stage_ratio:.2f} (skewed tables)"
        f" vs {effects.plain_stage_ratio:.2f} (others)",
    ]
    ratios = [g.runtime_ratio for g in effects.pruning]
    if ratios:
        lines.append(
            f"pruning: {len(ratios)} (job, scale, cores) groups; long vs short windows run"
            f" {statistics.median(ratios):.2f}x longer (median), range"
            f" {min(ratios):.2f}..{max(ratios):.2f}x"
        )
    wide = [g.runtime_ratio for g in effects.pruning if g.window_ratio >= 4]
    if wide:
        lines.append(
            f"pruning, groups whose long windows are >= 4x the short ones: {len(wide)}; they run"
            f" {statistics.median(wide):.2f}x longer (median)"
        )
    return "\n".join(lines)
