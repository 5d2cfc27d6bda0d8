"""Job files: what is written is read back unchanged, and every bad input names its job."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autofe.errors import ScheduleError
from autofe.scheduler.catalog import Catalog, Offer
from autofe.scheduler.jobfile import Budget, parse_jobs, read_jobs, write_jobs
from autofe.scheduler.jobs import Checkpointing, Estimate, JobRequest

CATALOG = Catalog([Offer("aws", "us-east-1", "m4.xlarge", 4, 16.0, 0.215, 0.0946, 0.0)])


def _doc() -> dict[str, Any]:
    return {
        "format": "autofe-jobs/1",
        "source": "test",
        "budgets": [{"name": "team-a", "usd": 120.0, "period_s": 86400}],
        "jobs": [
            {
                "job_id": "etl-1",
                "submit": 0,
                "tier": "P1",
                "account": "team-a",
                "deadline": 3600,
                "checkpoint": {"interval_s": 600, "write_s": 10, "restore_s": 30},
                "shapes": {"m4.xlarge x4": {"p50_s": 900, "low_s": 700, "high_s": 1300}},
            },
            {
                "job_id": "report-1",
                "submit": 0,
                "depends_on": ["etl-1"],
                "shapes": {"m4.xlarge x2": {"p50_s": 300, "low_s": 200, "high_s": 500}},
            },
        ],
    }


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    jobs = (
        JobRequest(
            "train",
            100.0,
            {
                "m4.xlarge x4": Estimate(900.0, 700.0, 1300.0, true_s=1010.0),
                "m4.xlarge x8": Estimate(500.0, 380.0, 760.0, high99_s=1100.0),
            },
            tier="P0",
            account="ml",
            deadline=7300.0,
            checkpoint=Checkpointing(600.0, 10.0, 30.0),
            labels={"team": "ml"},
        ),
        JobRequest(
            "score", 100.0, {"m4.xlarge x1": Estimate(60.0, 40.0, 90.0)}, depends_on=("train",)
        ),
    )
    budgets = (Budget("ml", 250.0, 3600.0), Budget("P3", 0.0))
    path = tmp_path / "jobs.json"
    write_jobs(path, jobs, budgets, source="round trip")
    back = read_jobs(path, CATALOG, now=0.0)
    assert back.jobs == jobs
    assert back.budgets == budgets
    assert back.source == "round trip"


def test_defaults_and_rfc3339_times() -> None:
    doc = _doc()
    doc["jobs"][0]["submit"] = "2024-05-01T08:00:00Z"
    doc["jobs"][0]["deadline"] = "2024-05-01T10:00:00+00:00"
    jobs = parse_jobs(doc).jobs
    assert jobs[0].deadline is not None
    assert jobs[0].deadline - jobs[0].submit == 7200.0
    assert jobs[0].submit == 1714550400.0
    assert (jobs[1].tier, jobs[1].account, jobs[1].deadline) == ("P2", "default", None)


def _bad(edit: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    doc = copy.deepcopy(_doc())
    edit(doc)
    return doc


def _job(doc: dict[str, Any], i: int = 0) -> dict[str, Any]:
    job: dict[str, Any] = doc["jobs"][i]
    return job


BAD_JOBS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "unknown instance type": (
        lambda d: _job(d)["shapes"].update({"m9.huge x2": {"p50_s": 60}}),
        r"job 'etl-1': unknown instance type 'm9.huge'",
    ),
    "dependency cycle": (
        lambda d: _job(d).update(depends_on=["report-1"]),
        r"job '(etl-1|report-1)': dependency cycle (etl-1|report-1) -> \S+ -> \1",
    ),
    "depends on itself": (
        lambda d: _job(d).update(depends_on=["etl-1"]),
        r"job 'etl-1': dependency cycle etl-1 -> etl-1",
    ),
    "unknown dependency": (
        lambda d: _job(d, 1).update(depends_on=["nightly"]),
        r"job 'report-1': depends on 'nightly', which is not a job",
    ),
    "deadline in the past": (
        lambda d: _job(d).update(deadline=500),
        r"job 'etl-1': deadline 500.0 is in the past \(now 1000\)",
    ),
    "deadline before submit": (
        lambda d: _job(d).update(submit=4000),
        r"job 'etl-1': deadline 3600.0 is not after its submit time 4000.0",
    ),
    "deadline not a time": (
        lambda d: _job(d).update(deadline="yesterday"),
        r"job 'etl-1': deadline 'yesterday' is not an RFC 3339 time",
    ),
    "time without a UTC offset": (
        lambda d: _job(d).update(deadline="2024-05-01T10:00:00"),
        r"job 'etl-1': deadline '2024-05-01T10:00:00' has no UTC offset",
    ),
    "unknown tier": (
        lambda d: _job(d).update(tier="P9"),
        r"job 'etl-1': tier 'P9' is not one of P0, P1, P2, P3",
    ),
    "duplicate id": (
        lambda d: _job(d, 1).update(job_id="etl-1"),
        r"job 'etl-1': job id appears twice",
    ),
    "no shapes": (
        lambda d: _job(d).update(shapes={}),
        r"job 'etl-1': 'shapes' must map at least one",
    ),
    "one shape twice": (
        lambda d: _job(d).update(
            shapes={"m4.xlarge": {"p50_s": 60}, "m4.xlarge x1": {"p50_s": 50}}
        ),
        r"job 'etl-1': shape 'm4.xlarge x1' appears twice",
    ),
    "zero nodes": (
        lambda d: _job(d).update(shapes={"m4.xlarge x0": {"p50_s": 60}}),
        r"job 'etl-1': shape 'm4.xlarge x0': needs at least one node",
    ),
    "interval out of order": (
        lambda d: _job(d).update(shapes={"m4.xlarge x4": {"p50_s": 900, "low_s": 1000}}),
        r"job 'etl-1': shape 'm4.xlarge x4': needs low_s <= p50_s <= high_s",
    ),
    "99 % bound below the 90 % one": (
        lambda d: _job(d).update(
            shapes={"m4.xlarge x4": {"p50_s": 900, "high_s": 1300, "high99_s": 1200}}
        ),
        r"job 'etl-1': shape 'm4.xlarge x4': needs high99_s >= high_s, got 1200.0 < 1300.0",
    ),
    "negative duration": (
        lambda d: _job(d).update(shapes={"m4.xlarge x4": {"p50_s": -5}}),
        r"job 'etl-1': shape 'm4.xlarge x4' p50_s must be positive, got -5.0",
    ),
    "duration not a number": (
        lambda d: _job(d).update(shapes={"m4.xlarge x4": {"p50_s": "fast"}}),
        r"job 'etl-1': shape 'm4.xlarge x4' p50_s must be a finite number, got 'fast'",
    ),
    "zero checkpoint interval": (
        lambda d: _job(d).update(checkpoint={"interval_s": 0}),
        r"job 'etl-1': checkpoint interval_s must be positive, got 0.0",
    ),
    "negative checkpoint write": (
        lambda d: _job(d).update(checkpoint={"interval_s": 60, "write_s": -1}),
        r"job 'etl-1': checkpoint write_s must be non-negative",
    ),
    "depends_on not a list": (
        lambda d: _job(d).update(depends_on="report-1"),
        r"job 'etl-1': 'depends_on' must be a list of job ids",
    ),
    "labels not an object": (
        lambda d: _job(d).update(labels=["nightly"]),
        r"job 'etl-1': 'labels' must be an object of strings",
    ),
    "markets not a list": (
        lambda d: _job(d).update(markets="spot"),
        r"job 'etl-1': 'markets' must be a non-empty list of on-demand and spot",
    ),
    "unknown market": (
        lambda d: _job(d).update(markets=["reserved"]),
        r"job 'etl-1': 'markets' must be a non-empty list",
    ),
    "a market twice": (
        lambda d: _job(d).update(markets=["spot", "spot"]),
        r"job 'etl-1': 'markets' lists a market twice",
    ),
    "empty id": (
        lambda d: _job(d).update(job_id=""),
        r"jobs\[0\]: needs a non-empty string 'job_id'",
    ),
}


@pytest.mark.parametrize("case", BAD_JOBS)
def test_each_bad_job_is_named(case: str) -> None:
    edit, message = BAD_JOBS[case]
    with pytest.raises(ScheduleError, match=message):
        parse_jobs(_bad(edit), CATALOG, now=1000.0)


def test_unix_times_read_back_as_rfc3339_in_messages() -> None:
    doc = _bad(
        lambda d: _job(d).update(submit="2026-12-01T01:00:00Z", deadline="2026-12-01T01:30:00Z")
    )
    with pytest.raises(ScheduleError) as caught:
        parse_jobs(doc, now=1796090400.25)
    assert str(caught.value) == (
        "job 'etl-1': deadline 2026-12-01T01:30:00Z is in the past (now 2026-12-01T02:00:00Z)"
    )


def test_the_error_carries_the_job_id() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_jobs(_bad(lambda d: _job(d, 1).update(tier="urgent")), CATALOG)
    assert caught.value.job_id == "report-1"


BAD_BUDGETS = [
    ({"name": "team-a", "usd": -5.0}, r"^budget 'team-a': negative budget -5.0 USD$"),
    ({"name": "team-a", "usd": 5.0, "period_s": 0}, r"budget 'team-a': period_s must be positive"),
    ({"usd": 5.0}, r"every budget needs a non-empty 'name'"),
    ({"name": "team-a", "usd": "lots"}, r"budget 'team-a' usd must be a finite number"),
]


@pytest.mark.parametrize(
    ("budget", "message"), BAD_BUDGETS, ids=["negative", "no period", "no name", "not a number"]
)
def test_each_bad_budget_is_named(budget: dict[str, Any], message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_jobs(_bad(lambda d: d.update(budgets=[budget])))


def test_a_file_that_is_not_a_jobs_file(tmp_path: Path) -> None:
    path = tmp_path / "jobs.json"
    path.write_text("{not json")
    with pytest.raises(ScheduleError, match=r"jobs\.json: cannot be read as JSON"):
        read_jobs(path)
    path.write_text(json.dumps({"format": "autofe-jobs/9", "jobs": []}))
    with pytest.raises(ScheduleError, match=r"format 'autofe-jobs/9' is not 'autofe-jobs/1'"):
        read_jobs(path)
    with pytest.raises(ScheduleError, match=r"cannot be read as JSON"):
        read_jobs(tmp_path / "missing.json")


def test_markets_restrict_the_plan_and_round_trip(tmp_path: Path) -> None:
    """A job that allows only on-demand is never planned on spot, though spot is cheaper."""
    from autofe.scheduler.plan import plan_job

    doc = _doc()
    _job(doc)["markets"] = ["on-demand"]
    jobs = parse_jobs(doc, CATALOG, now=0.0)
    assert jobs.jobs[0].markets == ("on-demand",)
    assert jobs.jobs[1].markets == ("on-demand", "spot")
    assert plan_job(jobs.jobs[0], CATALOG, 0.0).placement.market == "on-demand"
    assert plan_job(jobs.jobs[1], CATALOG, 0.0).placement.market == "spot"
    path = tmp_path / "jobs.json"
    write_jobs(path, jobs.jobs, jobs.budgets)
    assert "markets" not in json.loads(path.read_text())["jobs"][1]
    assert read_jobs(path, CATALOG, now=0.0).jobs == jobs.jobs
