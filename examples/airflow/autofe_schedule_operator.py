"""Apache Airflow operator: submit a job request to autofe's scheduler and wait for its handle.

``AutofeScheduleOperator`` posts one job request (the ``jobs`` entry of a jobs file,
docs/scheduler.md) to ``POST /v1/jobs`` of ``autofe serve``, pushes the returned handle and
chosen plan to XCom, then polls ``GET /v1/jobs/{handle}`` until the job has finished. It
succeeds when the job succeeded (the final record is its return value), fails when the job
failed or was cancelled, cancels the job (``DELETE``) when the task times out or is killed,
and fails at once, without retries, when the scheduler refuses the request (HTTP 422: the
message names the job and the field). Whatever runs the job reports its progress to the
scheduler (``POST /v1/jobs/{handle}/events``); this operator only hands off and waits.

Copy this file next to your DAGs (or into ``plugins/``) and use it from a DAG file::

    from autofe_schedule_operator import AutofeScheduleOperator

    etl = AutofeScheduleOperator(
        task_id="nightly_etl",
        api_url="http://autofe.internal:8000",
        job={
            "job_id": "etl-{{ ds_nodash }}",
            "tier": "P1",
            "account": "team-a",
            "deadline": "{{ (data_interval_end + macros.timedelta(hours=6)).isoformat() }}",
            "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
            "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py"},
        },
        poll_interval=60,
        execution_timeout=timedelta(hours=6),
    )

It needs nothing but the standard library on the workers (not autofe: the scheduler runs
where ``autofe serve`` runs). The bearer token is read from ``AUTOFE_API_TOKEN`` on the worker
(``token_env``) so it never lands in a rendered template.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

FINISHED = ("succeeded", "failed", "cancelled")


class AutofeJobsError(Exception):
    """The API answered with an error: ``status`` and its one-line ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"autofe API {status}: {detail}")


class AutofeJobs:
    """A minimal client of ``/v1/jobs`` (standard library only)."""

    def __init__(self, api_url: str, token: str | None = None, timeout_s: float = 30.0) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def submit(self, job: Mapping[str, Any], budgets: Sequence[Mapping[str, Any]] = ()) -> Any:
        document = {"format": "autofe-jobs/1", "budgets": list(budgets), "jobs": [dict(job)]}
        return self._call("POST", "/v1/jobs", document)

    def status(self, handle: str) -> Any:
        return self._call("GET", f"/v1/jobs/{handle}")

    def cancel(self, handle: str) -> Any:
        return self._call("DELETE", f"/v1/jobs/{handle}")

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.api_url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise AutofeJobsError(exc.code, _detail(exc)) from None


class AutofeScheduleOperator(BaseOperator):
    """Submit ``job`` to autofe's scheduler and wait until it has finished.

    Args:
        job: one job request (templated, nested values too).
        api_url: where ``autofe serve`` listens (templated).
        budgets: budgets to send along (``{"name", "usd", "period_s"}``).
        poll_interval: seconds between status requests.
        token_env: the worker's environment variable holding the API token.
    """

    template_fields = ("job", "api_url")
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        job: dict[str, Any],
        api_url: str = "http://127.0.0.1:8000",
        budgets: Sequence[Mapping[str, Any]] = (),
        poll_interval: float = 30.0,
        token_env: str = "AUTOFE_API_TOKEN",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.api_url = api_url
        self.budgets = list(budgets)
        self.poll_interval = poll_interval
        self.token_env = token_env
        self.handle: str | None = None

    def execute(self, context: Any) -> Any:
        client = self._client()
        try:
            record = client.submit(self.job, self.budgets)
        except AutofeJobsError as exc:
            if exc.status == 422:  # the request itself is wrong: a retry cannot help
                raise AirflowFailException(
                    f"autofe refused the job request: {exc.detail}"
                ) from None
            raise AirflowException(str(exc)) from None
        self.handle = record["handle"]
        plan = record["plan"]
        self.log.info(
            "autofe job %s: handle %s, plan %s %s/%s %s, expected $%.2f, P(deadline) %.3f",
            record["job_id"], self.handle, plan["shape"], plan["cloud"], plan["region"],
            plan["market"], plan["expected_cost_usd"], plan["p_deadline"],
        )  # fmt: skip
        ti = context.get("ti") if isinstance(context, Mapping) else None
        if ti is not None:
            ti.xcom_push(key="handle", value=self.handle)
            ti.xcom_push(key="plan", value=plan)
        final = self._wait(client, self.handle)
        if final["state"] != "succeeded":
            raise AirflowException(f"autofe job {final['job_id']} {final['state']} ({self.handle})")
        return final

    def on_kill(self) -> None:
        """The task was stopped (timeout, user): cancel the job so it stops spending."""
        if self.handle is not None:
            self._cancel(self._client(), self.handle)

    def _wait(self, client: AutofeJobs, handle: str) -> Any:
        while True:
            record = self._status(client, handle)
            if record is not None:
                self.log.info(
                    "autofe job %s %s, spent $%.2f so far",
                    record["job_id"], record["state"], record["spend_usd"],
                )  # fmt: skip
                if record["state"] in FINISHED:
                    return record
            try:
                time.sleep(self.poll_interval)
            except BaseException:  # Airflow's timeout arrives here while the task sleeps
                self._cancel(client, handle)
                raise

    def _status(self, client: AutofeJobs, handle: str) -> Any:
        try:
            return client.status(handle)
        except AutofeJobsError as exc:
            raise AirflowException(str(exc)) from None
        except OSError as exc:  # the API restarting: the job is in its store, ask again
            self.log.warning("autofe API unreachable (%s); asking again", exc)
            return None

    def _cancel(self, client: AutofeJobs, handle: str) -> None:
        try:
            client.cancel(handle)
            self.log.info("cancelled autofe job %s", handle)
        except AutofeJobsError as exc:  # 409: it finished meanwhile
            self.log.warning("could not cancel autofe job %s: %s", handle, exc)

    def _client(self) -> AutofeJobs:
        return AutofeJobs(self.api_url, os.environ.get(self.token_env) or None)


def _detail(error: urllib.error.HTTPError) -> str:
    """The API's one-line ``detail``, or the status line when the body is not the API's."""
    try:
        return str(json.loads(error.read())["detail"])
    except (ValueError, KeyError, TypeError):
        return f"{error.code} {error.reason}"
