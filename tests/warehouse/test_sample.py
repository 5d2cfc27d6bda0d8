"""The loop's sample of a large warehouse, on the shipped example: whole jobs, spread over
the history and over the code jobs run, the same every time, and nothing lost on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from autofe.errors import ConfigError
from autofe.warehouse.replicate import replicate_warehouse
from autofe.warehouse.sample import STRATA, count_runs, sample_warehouse


@pytest.fixture(scope="module")
def sampled(example_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sample") / "s.duckdb"
    sample = sample_warehouse(example_warehouse, out, 200)
    assert (sample.of_runs, sample.of_jobs, sample.strata) == (490, 25, STRATA)
    assert sample.runs == count_runs(out)
    return out


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_sample_holds_whole_jobs(sampled: Path, example_warehouse: Path) -> None:
    per_job = dict(_rows(sampled, "SELECT job_id, count(*) FROM runs GROUP BY 1"))
    full = dict(_rows(example_warehouse, "SELECT job_id, count(*) FROM runs GROUP BY 1"))
    assert per_job and all(full[j] == n for j, n in per_job.items())
    # about the runs asked for: a step of the systematic pick is 490 / 200 jobs' worth
    assert abs(sum(per_job.values()) - 200) <= max(full.values())


def test_sample_spans_the_history(sampled: Path, example_warehouse: Path) -> None:
    sql = "SELECT min(submit_time), max(submit_time) FROM runs"
    [(first, last)] = _rows(example_warehouse, sql)
    [(s_first, s_last)] = _rows(sampled, sql)
    span = last - first
    assert s_first - first < span / 10
    assert last - s_last < span / 10


def test_child_rows_follow_their_runs_and_shared_tables_stay_whole(
    sampled: Path, example_warehouse: Path
) -> None:
    for table in ("stages", "applications", "run_attributes"):
        orphans = f"SELECT count(*) FROM {table} WHERE run_id NOT IN (SELECT run_id FROM runs)"
        assert _rows(sampled, orphans) == [(0,)]
        assert _rows(sampled, f"SELECT count(*) FROM {table}")[0][0] > 0
    for table in ("cluster_configs", "table_stats"):
        count = f"SELECT count(*) FROM {table}"
        assert _rows(sampled, count) == _rows(example_warehouse, count)


def test_sample_is_the_same_every_time(
    sampled: Path, example_warehouse: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again.duckdb"
    sample_warehouse(example_warehouse, again, 200)
    ids = "SELECT run_id FROM runs ORDER BY 1"
    assert _rows(again, ids) == _rows(sampled, ids)


def test_bad_input_is_refused_and_loses_nothing(example_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.duckdb"
    with pytest.raises(ConfigError, match="at least one run"):
        sample_warehouse(example_warehouse, out, 0)
    out.write_bytes(b"kept")
    with pytest.raises(ConfigError, match="already exists"):
        sample_warehouse(example_warehouse, out, 200)
    assert out.read_bytes() == b"kept"


def test_every_family_of_jobs_gets_its_share(example_warehouse: Path, tmp_path: Path) -> None:
    """Four teams run the example's 25 jobs (the same scripts, their own job ids). A sample of
    a quarter of the runs takes each script once, whichever team's copy: the loop then weighs
    every kind of job as the workspace does. Jobs picked in hash order, as before, took 32
    jobs here."""
    four = tmp_path / "x4.duckdb"
    replicate_warehouse(example_warehouse, four, 4)
    out = tmp_path / "s.duckdb"
    sample = sample_warehouse(four, out, 490)
    assert (sample.of_runs, sample.of_jobs, sample.jobs) == (4 * 490, 100, 25)
    assert (sample.families, sample.of_families) == (25, 25)
    per_code = _rows(
        out,
        "SELECT coalesce(script_path, md5(script_text)), count(*) FROM jobs "
        "WHERE job_id IN (SELECT job_id FROM runs) GROUP BY 1",
    )
    codes = _rows(
        example_warehouse,
        "SELECT count(DISTINCT coalesce(script_path, md5(script_text))) FROM jobs",
    )[0][0]
    assert len(per_code) == codes == 25 and {n for _, n in per_code} == {1}
    assert sample.runs == 490
