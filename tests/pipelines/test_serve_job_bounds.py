"""``POST /v1/jobs`` with numbers past the scheduler's bounds: a 422 naming the job and the field.

Issue #27: durations of 1e308 (finite JSON numbers, so the body parser lets them through)
overflowed the planner's Monte Carlo: a 500 under ``filterwarnings = error``, in production a
201 whose plan had ``expected_cost_usd: null``, against the response schema. A node count
written with a superscript digit or 400 digits, and a submit time past year 9999 by its UTC
offset, were 500s too. The home folder is bare (as in ``test_serve_jobs.py``): the jobs
endpoints need no model.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from autofe.pipelines.serve import create_app
from autofe.scheduler.store import STORE_FILE, JobStore

MAX_SECONDS = 315_360_000.0
"""10 years, the documented bound of durations (``docs/scheduler.md``)."""
MAX_NODES = 100_000
ESTIMATE = {"p50_s": 1800, "low_s": 1200, "high_s": 2700}


def document(**fields: Any) -> dict[str, Any]:
    now = time.time()
    job = {
        "job_id": "sort-events",
        "tier": "P1",
        "account": "team-a",
        "submit": now,
        "deadline": now + 3 * 3600,
        "shapes": {"m4.xlarge x4": ESTIMATE},
        "task": {"type": "spark_python", "python_file": "dbfs:/jobs/sort.py"},
        **fields,
    }
    return {"budgets": [{"name": "team-a", "usd": 40.0}], "jobs": [job]}


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    """A server error comes back as a 500 response, not an exception, so it can be asserted."""
    return TestClient(create_app(tmp_path, token="", poll_s=0), raise_server_exceptions=False)


TEN_YEARS = "is more than 10 years (315360000 s)"
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "durations of 1e308": (
        {"shapes": {"m4.xlarge x4": {"p50_s": 1e308, "low_s": 1e308, "high_s": 1e308}}},
        f"job 'sort-events': shape 'm4.xlarge x4' p50_s: 1e+308 s {TEN_YEARS}",
    ),
    "a 99 % bound of 1e308": (
        {"shapes": {"m4.xlarge x4": {**ESTIMATE, "high99_s": 1e308}}},
        f"job 'sort-events': shape 'm4.xlarge x4' high99_s: 1e+308 s {TEN_YEARS}",
    ),
    "a median of 5e-324 s": (
        {"shapes": {"m4.xlarge x4": {"p50_s": 5e-324, "high99_s": 3e8}}},
        "job 'sort-events': shape 'm4.xlarge x4' p50_s: 5e-324 s is less than 1 ms (0.001 s)",
    ),
    "a checkpoint write of 1e308": (
        {"checkpoint": {"interval_s": 600, "write_s": 1e308}},
        f"job 'sort-events': checkpoint write_s: 1e+308 s {TEN_YEARS}",
    ),
    "a node count of 400 digits": (
        {"shapes": {"m4.xlarge x" + "9" * 400: ESTIMATE}},
        "job 'sort-events': shape 'm4.xlarge x" + "9" * 29 + "…" + "9" * 20 + "': more than",
    ),
    "a node count with a superscript digit": (
        {"shapes": {"m4.xlarge x²": ESTIMATE}},
        "job 'sort-events': unknown instance type 'm4.xlarge x²'",
    ),
    "a submit time past year 9999": (
        {"submit": "9999-12-31T23:59:59-01:00", "deadline": None},
        "job 'sort-events': submit '9999-12-31T23:59:59-01:00' is not between "
        "0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_numbers_past_the_bounds_are_a_422_naming_the_field(
    client: TestClient, tmp_path: Path, case: str
) -> None:
    fields, detail = REFUSED[case]
    response = client.post("/v1/jobs", json=document(**fields))
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "ScheduleError"
    assert body["detail"].startswith(detail)
    assert JobStore(tmp_path / STORE_FILE).handles() == []  # nothing stored


def test_a_budget_of_1e308_is_a_422(client: TestClient) -> None:
    doc = document()
    doc["budgets"] = [{"name": "team-a", "usd": 1e308}]
    response = client.post("/v1/jobs", json=doc)
    assert response.status_code == 422, response.text
    assert (
        response.json()["detail"] == "budget 'team-a' usd: 1e+308 USD is more than 1000000000 USD"
    )


def test_a_job_at_the_bounds_is_planned_with_a_finite_cost(client: TestClient) -> None:
    """The longest estimates on the most nodes, due in (almost) 10 years: a 201 whose plan
    is all numbers (was ``expected_cost_usd: null`` for durations past any bound)."""
    top = {"p50_s": MAX_SECONDS, "low_s": MAX_SECONDS, "high_s": MAX_SECONDS}
    now = time.time()
    fields = {
        "submit": now,
        "deadline": now + MAX_SECONDS - 60.0,  # the server's now is a little later
        "shapes": {f"m4.xlarge x{MAX_NODES}": {**top, "high99_s": MAX_SECONDS}},
        "checkpoint": {"interval_s": 1, "write_s": MAX_SECONDS, "restore_s": MAX_SECONDS},
    }
    response = client.post("/v1/jobs", json=document(**fields))
    assert response.status_code == 201, response.text
    plan = response.json()["plan"]
    for key in ("expected_cost_usd", "p_deadline", "p50_s", "high_s", "hourly_usd"):
        assert isinstance(plan[key], float) and math.isfinite(plan[key]), (key, plan[key])
    assert plan["expected_cost_usd"] > 0
