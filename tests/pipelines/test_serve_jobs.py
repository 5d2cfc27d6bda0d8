"""``/v1/jobs``: job handles over HTTP (FastAPI's TestClient), planned on the shipped catalog.

The jobs endpoints need no model, so the home folder here is bare: the scheduler's store is
created in it by the first submit.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from autofe.pipelines.serve import create_app
from autofe.scheduler.catalog import load_catalog
from autofe.scheduler.jobfile import parse_jobs
from autofe.scheduler.plan import plan_jobs
from autofe.scheduler.store import STORE_FILE, JobStore

REPO = Path(__file__).resolve().parents[2]
SHAPES = {
    "m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700},
    "n2-standard-8 x3": {"p50_s": 1500, "low_s": 1000, "high_s": 2400},
}


def job(**fields: Any) -> dict[str, Any]:
    now = time.time()
    return {
        "job_id": "etl-1",
        "tier": "P1",
        "account": "team-a",
        "submit": now,
        "deadline": now + 3 * 3600,
        "shapes": SHAPES,
        "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py"},
        **fields,
    }


def document(**fields: Any) -> dict[str, Any]:
    return {
        "budgets": [{"name": "team-a", "usd": 40.0, "period_s": 86400}],
        "jobs": [job(**fields)],
    }


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def client(home: Path) -> TestClient:
    return TestClient(create_app(home, token="", poll_s=0))


def submit(client: TestClient, **fields: Any) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=document(**fields))
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_submit_returns_a_handle_the_plan_and_the_state(client: TestClient, home: Path) -> None:
    doc = document()
    response = client.post("/v1/jobs", json=doc)
    assert response.status_code == 201, response.text
    body = response.json()
    assert re.fullmatch(r"[0-9a-f]{32}", body["handle"]) and body["state"] == "queued"
    catalog = load_catalog()
    (expected,) = plan_jobs(parse_jobs(doc, catalog), catalog, time.time())
    chosen = body["plan"]
    placement = expected.placement
    assert (chosen["shape"], chosen["cloud"], chosen["region"], chosen["market"]) == (
        placement.shape.key,
        placement.cloud,
        placement.region,
        placement.market,
    )
    assert body["request"] == doc["jobs"][0] and body["spend_usd"] == 0.0
    assert body["predicted_completion"] == pytest.approx(time.time() + chosen["p50_s"], abs=5)
    assert (home / STORE_FILE).is_file()
    status = client.get(f"/v1/jobs/{body['handle']}")
    assert status.status_code == 200 and status.json()["plan"] == chosen


def test_a_restarted_server_knows_every_job(home: Path) -> None:
    first = TestClient(create_app(home, token=""))
    handles = [submit(first, job_id=f"job-{i}")["handle"] for i in range(3)]
    assert first.delete(f"/v1/jobs/{handles[1]}").status_code == 200
    restarted = TestClient(create_app(home, token=""))
    states = [restarted.get(f"/v1/jobs/{h}").json()["state"] for h in handles]
    assert states == ["queued", "cancelled", "queued"]


def test_cancel_is_idempotent_and_a_finished_job_is_a_conflict(client: TestClient) -> None:
    handle = submit(client)["handle"]
    assert client.delete(f"/v1/jobs/{handle}").json()["state"] == "cancelled"
    again = client.delete(f"/v1/jobs/{handle}")
    assert again.status_code == 200 and again.json()["state"] == "cancelled"
    done = submit(client)["handle"]
    for kind in ("started", "succeeded"):
        assert client.post(f"/v1/jobs/{done}/events", json={"kind": kind}).status_code == 200
    conflict = client.delete(f"/v1/jobs/{done}")
    assert conflict.status_code == 409
    assert conflict.json() == {
        "error": "StateConflict",
        "detail": conflict.json()["detail"],
    }
    assert conflict.json()["detail"].startswith("job 'etl-1': cannot cancel: the job already")


def test_unknown_handles_are_404(client: TestClient) -> None:
    for method, path in [("GET", "/v1/jobs/nope"), ("DELETE", "/v1/jobs/nope")]:
        response = client.request(method, path)
        assert response.status_code == 404 and response.json()["error"] == "UnknownHandle"
    submit(client)  # with a store, the answer is the same
    missing = client.post("/v1/jobs/nope/events", json={"kind": "started"})
    assert missing.status_code == 404
    assert "no job has handle 'nope'" in missing.json()["detail"]


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"shapes": {"z9.huge x2": {"p50_s": 60}}}, "job 'etl-1': unknown instance type 'z9.huge'"),
        ({"deadline": 1000.0, "submit": 10.0}, "job 'etl-1': deadline 1000.0 is in the past"),
        ({"tier": "P7"}, "job 'etl-1': tier 'P7' is not one of P0, P1, P2, P3"),
        ({"depends_on": ["etl-0"]}, "job 'etl-1': depends on 'etl-0', which is not a job"),
        ({"task": {"type": "jar"}}, "job 'etl-1': task type 'jar' is not one of"),
    ],
)
def test_bad_requests_are_422_naming_the_job(
    client: TestClient, home: Path, fields: dict[str, Any], detail: str
) -> None:
    response = client.post("/v1/jobs", json=document(**fields))
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "ScheduleError"
    assert response.json()["detail"].startswith(detail)
    assert JobStore(home / STORE_FILE).handles() == []  # a refused request stores nothing


def test_the_document_shape_is_checked_first(client: TestClient) -> None:
    two = {"jobs": [job(), job(job_id="etl-2")]}
    assert client.post("/v1/jobs", json=two).status_code == 422
    typo = client.post("/v1/jobs", json={**document(), "budget": []})
    assert typo.status_code == 422 and typo.json()["errors"][0]["field"] == "budget"
    fmt = client.post("/v1/jobs", json={**document(), "format": "autofe-jobs/2"})
    assert fmt.status_code == 422 and fmt.json()["errors"][0]["field"] == "format"


def test_token_and_body_limit_cover_the_jobs_endpoints(home: Path) -> None:
    guarded = TestClient(create_app(home, token="s3cret", max_body_bytes=2048))
    assert guarded.post("/v1/jobs", json=document()).status_code == 401
    assert guarded.get("/v1/jobs/x").status_code == 401
    headers = {"Authorization": "Bearer s3cret"}
    big = document(labels={"note": "x" * 4096})
    assert guarded.post("/v1/jobs", json=big, headers=headers).status_code == 413
    assert guarded.post("/v1/jobs", json=document(), headers=headers).status_code == 201


def test_reported_events_move_the_job_and_show_in_the_metrics(client: TestClient) -> None:
    first = submit(client)
    second = submit(client, job_id="etl-2", tier="P3")
    before = client.get("/metrics").text
    assert 'autofe_scheduler_queue_depth{tier="P1"} 1' in before
    assert 'autofe_scheduler_queue_depth{tier="P3"} 1' in before
    assert 'autofe_scheduler_queue_depth{tier="P0"} 0' in before
    h = first["handle"]
    events: list[dict[str, Any]] = [
        {"kind": "started"},
        {"kind": "preempted"},
        {"kind": "fallback", "hourly_usd": 4.0, "reason": "2 preemptions"},
        {"kind": "progress", "progress": 0.25},
        {"kind": "upgraded", "hourly_usd": 8.0},
    ]
    for event in events:
        response = client.post(f"/v1/jobs/{h}/events", json=event)
        assert response.status_code == 200, response.text
    body = client.get(f"/v1/jobs/{h}").json()
    assert body["state"] == "running" and body["progress"] == 0.25
    assert (body["preemptions"], body["fallbacks"], body["upgrades"]) == (1, 1, 1)
    assert [e["kind"] for e in body["events"]][1:] == [e["kind"] for e in events]
    assert body["events"][3]["reason"] == "2 preemptions"
    assert body["spend_usd"] > 0 and body["hourly_usd"] == 8.0
    again = client.post(f"/v1/jobs/{h}/events", json={"kind": "started"})
    assert again.status_code == 409 and "the job is running" in again.json()["detail"]
    bad = client.post(f"/v1/jobs/{h}/events", json={"kind": "progress", "progress": 2})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "progress"
    client.delete(f"/v1/jobs/{second['handle']}")
    text = client.get("/metrics").text
    spend = _sample(text, 'autofe_scheduler_spend_usd_total{account="team-a",tier="P1"}')
    assert 0 < spend <= body["spend_usd"] + 8.0 / 3600 * 60  # accrued until the scrape
    remaining = _sample(text, 'autofe_scheduler_budget_remaining_usd{budget="team-a"}')
    assert remaining == pytest.approx(40.0 - spend, abs=1e-6)
    assert 'autofe_scheduler_queue_depth{tier="P1"} 0' in text
    assert 'autofe_scheduler_jobs{tier="P1",state="running"} 1' in text
    assert 'autofe_scheduler_jobs{tier="P3",state="cancelled"} 1' in text
    for name in ("preemptions", "fallbacks", "upgrades"):
        assert _sample(text, f'autofe_scheduler_{name}_total{{account="team-a",tier="P1"}}') == 1
    requests = 'autofe_http_requests_total{endpoint="/v1/jobs/{handle}/events",method="POST"'
    assert _sample(text, requests + ',status="200"}') == len(events)


def test_metrics_before_any_submit_create_no_store(client: TestClient, home: Path) -> None:
    text = client.get("/metrics").text
    assert "# TYPE autofe_scheduler_spend_usd_total counter" in text
    assert 'autofe_scheduler_queue_depth{tier="P2"} 0' in text
    assert not (home / STORE_FILE).exists()
    assert client.get("/v1/jobs/abc").status_code == 404
    assert not (home / STORE_FILE).exists()


def test_the_api_and_the_cli_share_the_store(client: TestClient, home: Path) -> None:
    handle = submit(client)["handle"]
    JobStore(home / STORE_FILE).report(handle, "started")
    assert client.get(f"/v1/jobs/{handle}").json()["state"] == "running"


def _sample(text: str, prefix: str) -> float:
    (line,) = [line for line in text.splitlines() if line.startswith(prefix + " ")]
    return float(line.rsplit(" ", 1)[1])


def test_the_airflow_operator_reads_only_fields_the_api_returns(client: TestClient) -> None:
    """The operator example (run in Airflow's own venv) against the real response's fields."""
    source = REPO / "examples" / "airflow" / "autofe_schedule_operator.py"
    read: dict[str, set[str]] = {"record": set(), "final": set(), "plan": set()}
    for node in ast.walk(ast.parse(source.read_text())):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in read
            and isinstance(node.slice, ast.Constant)
        ):
            read[node.value.id].add(str(node.slice.value))
    body = submit(client)
    assert read["record"] | read["final"] <= set(body)
    assert read["plan"] and read["plan"] <= set(body["plan"])
    assert {"handle", "state", "spend_usd"} <= read["record"] | read["final"]
