"""query_metadata over the real gates warehouse: filters, paging, the as-of view of snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

from autofe.errors import ConfigError
from autofe.sandbox.session import Sandbox
from autofe.tools.query_metadata import CONFIG_FIELDS, query_metadata


@pytest.fixture(scope="module")
def box(gates_warehouse: Path) -> Iterator[Sandbox]:
    with Sandbox.open(gates_warehouse) as sandbox:
        yield sandbox


def scalar(box: Sandbox, sql: str) -> Any:
    return box.query(sql).rows[0][0]


def busiest_job(box: Sandbox) -> str:
    return str(
        scalar(
            box, "SELECT job_id FROM runs GROUP BY job_id ORDER BY count(*) DESC, job_id LIMIT 1"
        )
    )


def test_runs_of_a_job_page_through_in_submit_order(box: Sandbox) -> None:
    job = busiest_job(box)
    expected = [
        r[0]
        for r in box.query(
            f"SELECT run_id FROM runs WHERE job_id = '{job}' ORDER BY submit_time, run_id"
        ).rows
    ]
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = query_metadata(box, "runs", job_id=job, limit=7, offset=offset)
        assert page.total == len(expected) and page.offset == offset
        seen.extend(row["run_id"] for row in page.rows)
        offset = page.next_offset
    assert seen == expected


def test_run_rows_are_json_and_carry_their_cluster_config(box: Sandbox) -> None:
    run = box.query(
        "SELECT r.run_id, c.node_type, c.num_workers FROM runs r "
        "JOIN cluster_configs c ON c.config_id = r.cluster_config_id "
        "WHERE r.parameters IS NOT NULL ORDER BY r.run_id LIMIT 1"
    ).rows[0]
    page = query_metadata(box, "runs", run_id=run[0])
    row = page.rows[0]
    assert (page.total, row["node_type"], row["num_workers"]) == (1, run[1], run[2])
    assert set(CONFIG_FIELDS) <= set(row)
    assert isinstance(row["parameters"], dict | list)  # JSON columns parsed
    datetime.fromisoformat(row["submit_time"])
    orjson.dumps(page.model_dump())


def test_filter_values_are_literals_not_sql(box: Sandbox) -> None:
    for hostile in ("x' OR '1'='1", "x'; DROP TABLE runs; --", 'x" OR 1=1 --'):
        assert query_metadata(box, "runs", job_id=hostile).total == 0
        assert query_metadata(box, "jobs", job_id=hostile).rows == []


def test_status_and_submit_window(box: Sandbox) -> None:
    lo, hi = box.query(
        "SELECT quantile_disc(submit_time, 0.25), quantile_disc(submit_time, 0.75) FROM runs"
    ).rows[0]
    expected = scalar(
        box,
        f"SELECT count(*) FROM runs WHERE status = 'SUCCEEDED' "
        f"AND submit_time >= '{lo}' AND submit_time < '{hi}'",
    )
    page = query_metadata(
        box, "runs", status="succeeded", submitted_after=lo, submitted_before=hi, limit=500
    )
    assert page.total == expected > 0
    for row in page.rows:
        assert row["status"] == "SUCCEEDED"
        assert lo <= datetime.fromisoformat(row["submit_time"]) < hi
    # an aware datetime means the same instant in UTC, the warehouse's zone
    plus_two = timezone(timedelta(hours=2))
    aware = query_metadata(
        box,
        "runs",
        status="SUCCEEDED",
        submitted_after=(lo + timedelta(hours=2)).replace(tzinfo=plus_two),
        submitted_before=hi,
    )
    assert aware.total == expected


def test_cluster_configs_of_a_job(box: Sandbox) -> None:
    job = busiest_job(box)
    expected = sorted(
        r[0]
        for r in box.query(
            f"SELECT DISTINCT cluster_config_id FROM runs WHERE job_id = '{job}' "
            "AND cluster_config_id IS NOT NULL"
        ).rows
    )
    page = query_metadata(box, "cluster_configs", job_id=job)
    assert [row["config_id"] for row in page.rows] == expected


def test_table_stats_as_of_is_the_latest_snapshot_at_or_before(box: Sandbox) -> None:
    snapshots = query_metadata(box, "table_stats", limit=500).rows
    assert snapshots, "the example workspace ships table snapshots"
    times = sorted({datetime.fromisoformat(s["as_of"]) for s in snapshots})
    probes = [times[0] - timedelta(seconds=1), *times, times[-1] + timedelta(days=1)]
    probes += [t + timedelta(minutes=1) for t in times]
    for probe in probes:
        latest: dict[str, dict[str, Any]] = {}
        for s in sorted(snapshots, key=lambda s: s["as_of"]):
            if datetime.fromisoformat(s["as_of"]) <= probe:
                latest[s["table_name"]] = s  # later snapshots overwrite earlier ones
        page = query_metadata(box, "table_stats", as_of=probe)
        assert page.rows == [latest[name] for name in sorted(latest)], probe
        assert page.total == len(latest)
    one = snapshots[0]["table_name"]
    page = query_metadata(box, "table_stats", table_name=one, as_of=probes[-1])
    assert [r["table_name"] for r in page.rows] == [one]


@pytest.mark.parametrize(
    ("entity", "filters", "message"),
    [
        ("jobs", {"status": "FAILED"}, "jobs cannot be filtered by status; its filters are job_id"),
        ("table_stats", {"run_id": "1"}, "table_stats cannot be filtered by run_id"),
        ("cluster_configs", {"as_of": datetime(2024, 1, 1)}, "cannot be filtered by as_of"),
        ("runs", {"table_name": "t"}, "runs cannot be filtered by table_name"),
    ],
)
def test_filters_the_entity_does_not_take_are_refused(
    box: Sandbox, entity: Any, filters: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        query_metadata(box, entity, **filters)


def test_bad_entity_and_page_bounds(box: Sandbox) -> None:
    with pytest.raises(ConfigError, match="unknown entity 'stages'; choose one of jobs, runs"):
        query_metadata(box, "stages")  # type: ignore[arg-type]
    for limit in (0, 501):
        with pytest.raises(ConfigError, match="limit must be between 1 and 500"):
            query_metadata(box, "jobs", limit=limit)
    with pytest.raises(ConfigError, match="offset must be 0 or more"):
        query_metadata(box, "jobs", offset=-1)
    total = query_metadata(box, "jobs").total
    past = query_metadata(box, "jobs", offset=total + 10)
    assert (past.rows, past.next_offset) == ([], None)
