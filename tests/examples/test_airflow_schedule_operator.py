"""The Airflow operator in ``examples/airflow/autofe_schedule_operator.py``: it submits a job
request to ``/v1/jobs``, polls the handle until the job has finished, and cancels it when
stopped; against a stub of the API on 127.0.0.1 that answers as ``autofe serve`` does.

Needs Apache Airflow, which is not in autofe's venv: ``make test-airflow`` runs this file in
``.venv-airflow`` without autofe installed (as ``test_airflow_dag.py``). The stub's bodies carry
the fields of the real API's ``JobOut`` (``tests/pipelines/test_serve_jobs.py`` checks those).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("airflow") is not None:
    # Airflow reads AIRFLOW_HOME when imported and writes logs there: never the user's ~/airflow
    os.environ.setdefault("AIRFLOW_HOME", str(Path(tempfile.gettempdir()) / "autofe-airflow-home"))
pytest.importorskip("airflow")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "airflow"
JOB = {
    "job_id": "etl-{{ ds_nodash }}",
    "tier": "P1",
    "account": "team-a",
    "deadline": "{{ data_interval_end }}",
    "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
}
PLAN = {
    "job_id": "etl-1",
    "shape": "m4.xlarge x4",
    "cloud": "aws",
    "region": "us-east-1",
    "market": "spot",
    "fallback_after": 2,
    "expected_cost_usd": 0.31,
    "p_deadline": 0.99,
    "p50_s": 2100.0,
    "high_s": 2900.0,
    "expected_preemptions": 0.05,
    "hourly_usd": 0.38,
}


@pytest.fixture(scope="module")
def module() -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module("autofe_schedule_operator")
    finally:
        sys.path.remove(str(EXAMPLES))


class StubApi:
    """``/v1/jobs`` with scripted states: each GET moves the job one step along ``states``."""

    def __init__(self, states: list[str], submit_status: int = 201) -> None:
        self.states = states
        self.submit_status = submit_status
        self.requests: list[tuple[str, str, str | None, Any]] = []
        self.polls = 0
        self.state = "queued"

    def answer(self, method: str, path: str) -> tuple[int, Any]:
        if method == "POST" and path == "/v1/jobs":
            if self.submit_status != 201:
                detail = "job 'etl-20240401': unknown instance type 'z9.huge'"
                return self.submit_status, {"error": "ScheduleError", "detail": detail}
            return 201, self.record()
        if path != "/v1/jobs/h1":
            return 404, {"error": "UnknownHandle", "detail": f"no job has handle {path}"}
        if method == "DELETE":
            if self.state in ("succeeded", "failed"):
                return 409, {"error": "StateConflict", "detail": "cannot cancel"}
            self.state = "cancelled"
        elif method == "GET":
            self.state = self.states[min(self.polls, len(self.states) - 1)]
            self.polls += 1
        return 200, self.record()

    def record(self) -> dict[str, Any]:
        spent = 0.1 * self.polls
        return {
            "handle": "h1", "job_id": "etl-20240401", "account": "team-a", "tier": "P1",
            "state": self.state, "plan": PLAN, "request": {}, "submitted_at": 1.0,
            "started_at": None, "finished_at": None, "hourly_usd": 0.38, "spend_usd": spent,
            "progress": None, "predicted_completion": 2101.0, "preemptions": 0,
            "fallbacks": 0, "upgrades": 0, "events": [], "as_of": 2.0,
        }  # fmt: skip


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start a stub on an ephemeral loopback port; yields a function (states) -> (url, stub)."""
    servers: list[ThreadingHTTPServer] = []

    def start(states: list[str], submit_status: int = 201) -> tuple[str, StubApi]:
        stub = StubApi(states, submit_status)

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                auth = self.headers.get("Authorization")
                stub.requests.append((self.command, self.path, auth, body))
                status, answer = stub.answer(self.command, self.path)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", stub

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class FakeTaskInstance:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def operator(module: Any, url: str, **kwargs: Any) -> Any:
    op = module.AutofeScheduleOperator(
        task_id="etl", job=JOB, api_url=url, poll_interval=0.01, **kwargs
    )
    context: dict[str, Any] = {"ds_nodash": "20240401", "data_interval_end": "2024-04-02T00:00Z"}
    op.render_template_fields(context)
    return op


def test_the_operator_file_defines_no_dag_and_needs_no_autofe(module: Any) -> None:
    dagbag = importlib.import_module("airflow.dag_processing.dagbag")
    bag = dagbag.DagBag(dag_folder=str(EXAMPLES / "autofe_schedule_operator.py"))
    assert bag.import_errors == {} and list(bag.dags) == []
    assert "autofe" not in sys.modules


def test_submits_polls_until_done_and_returns_the_record(
    module: Any, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOFE_API_TOKEN", "s3cret")
    url, stub = serve(["queued", "running", "running", "succeeded"])
    op = operator(module, url, budgets=[{"name": "team-a", "usd": 40.0}])
    ti = FakeTaskInstance()
    final = op.execute({"ti": ti})
    assert final["state"] == "succeeded" and final["handle"] == "h1"
    assert ti.pushed == {"handle": "h1", "plan": PLAN}
    method, path, auth, body = stub.requests[0]
    assert (method, path, auth) == ("POST", "/v1/jobs", "Bearer s3cret")
    assert body == {
        "format": "autofe-jobs/1",
        "budgets": [{"name": "team-a", "usd": 40.0}],
        "jobs": [{**JOB, "job_id": "etl-20240401", "deadline": "2024-04-02T00:00Z"}],
    }
    polls = [(m, p) for m, p, _, _ in stub.requests[1:]]
    assert polls == [("GET", "/v1/jobs/h1")] * 4  # until finished, and no cancel


@pytest.mark.parametrize("state", ["failed", "cancelled"])
def test_a_job_that_did_not_succeed_fails_the_task(module: Any, serve: Any, state: str) -> None:
    exceptions = importlib.import_module("airflow.sdk.exceptions")
    url, _ = serve(["running", state])
    with pytest.raises(exceptions.AirflowException, match=f"etl-20240401 {state} \\(h1\\)"):
        operator(module, url).execute({})


def test_a_refused_request_fails_without_retry(module: Any, serve: Any) -> None:
    exceptions = importlib.import_module("airflow.sdk.exceptions")
    url, stub = serve([], submit_status=422)
    with pytest.raises(exceptions.AirflowFailException, match="job 'etl-20240401': unknown"):
        operator(module, url).execute({})
    assert len(stub.requests) == 1


def test_a_killed_or_timed_out_task_cancels_the_job(
    module: Any, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, stub = serve(["running"])
    op = operator(module, url)

    class Timeout(Exception):
        pass

    def stop(seconds: float) -> None:
        raise Timeout  # what Airflow's execution timeout raises in the sleeping task

    monkeypatch.setattr(module.time, "sleep", stop)
    with pytest.raises(Timeout):
        op.execute({})
    assert stub.requests[-1][:2] == ("DELETE", "/v1/jobs/h1") and stub.state == "cancelled"
    op.on_kill()  # cancelling again is harmless (the API answers the cancelled job)
    assert stub.requests[-1][:2] == ("DELETE", "/v1/jobs/h1")


def test_an_unreachable_api_is_asked_again(module: Any, serve: Any) -> None:
    url, _ = serve(["running", "succeeded"])
    client = module.AutofeJobs(url)
    calls = {"n": 0}
    status = client.status

    def flaky(handle: str) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionRefusedError("restarting")
        return status(handle)

    op = operator(module, url)
    op._client = lambda: client
    client.status = flaky
    assert op.execute({})["state"] == "succeeded" and calls["n"] == 3
