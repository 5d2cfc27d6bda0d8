"""The loop's sample of a large warehouse, on the shipped example: whole jobs, spread over
the history, the same every time, and nothing lost on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from autofe.errors import ConfigError
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
    assert 200 <= sum(per_job.values()) < 490


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
