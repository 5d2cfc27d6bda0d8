"""A home folder with something on every dashboard page: two real nights, then API traffic.

Shared by the browser tests (``tests/ui``) and ``scripts/dashboard_screenshots.py``. Night one
ingests the shipped example workspace as it stood on 2024-03-27 (``autofe lab cut``, as the
nightly demonstration in docs/lab.md does) and promotes its model; night two ingests the whole
workspace, so the 72 later runs are new to the warehouse: champion against challenger on
them, and a drift report. Everything after that goes through the HTTP API a scheduler would
use: predictions of real runs and their actual durations, and submitted jobs with events.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx

from autofe.agents.settings import EvalSettings, LoopSettings, Targets
from autofe.config import example_workspace
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.lab.cut import cut_workspace
from autofe.pipelines.nightly import NightlySettings, nightly

CUT = datetime(2024, 3, 27)
"""Night one's view of the example workspace: 418 of its 490 runs (docs/lab.md)."""
SHORT_LOOP = LoopSettings(
    Targets(r2=2.0, mape=None),  # unreachable: one round decides
    max_iterations=1,
    budget_seconds=120.0,
    per_round=12,
    evaluation=EvalSettings(folds=3),
)
"""A night's agent loop kept to one short round: the pages need a night, not a good model."""
SHAPES = {
    "m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700},
    "n2-standard-8 x3": {"p50_s": 1500, "low_s": 1000, "high_s": 2400},
}
"""Predicted durations per cluster shape of a submitted job (as the scheduler tests use)."""


def two_nights(
    root: Path, loop: LoopSettings = SHORT_LOOP, kb: KnowledgeBase | None = None
) -> Path:
    """``root/home`` after two real ``autofe nightly`` runs (``root/cut``: night one's input).

    Args:
        root: An empty folder.
        loop: Each night's agent loop.
        kb: The knowledge base the analyzer searches (default: the shipped one, MiniLM).
    """
    source = example_workspace()
    cut = cut_workspace(source, root / "cut", CUT).out
    home = root / "home"
    for workspace in (cut, source):
        nightly(NightlySettings(workspace, home, loop=loop), kb=kb)
    return home


def later_runs(db: Path, n: int) -> list[dict[str, Any]]:
    """The latest ``n`` successful runs: each as its job was described before its submit
    (``spec``), with its real duration and end (``duration_s``, ``finished_at``)."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT run_id, job_id, submit_time, cluster_config_id, parameters, duration_s, "
            "end_time FROM runs WHERE status = 'SUCCEEDED' "
            "ORDER BY submit_time DESC, run_id LIMIT ?",
            [n],
        ).fetchall()
        attrs = con.execute(
            "SELECT run_id, name, coalesce(CAST(value AS VARCHAR), value_text), "
            "value IS NOT NULL FROM run_attributes WHERE availability = 'known_at_submit'"
        ).fetchall()
    known: dict[str, dict[str, Any]] = {}
    for run_id, name, value, numeric in attrs:
        known.setdefault(run_id, {})[name] = float(value) if numeric else value
    return [
        {
            "spec": {
                "run_id": f"replay-{run_id}",
                "job_id": job_id,
                "submit_time": submit.isoformat(),
                "cluster_config_id": config,
                "parameters": json.loads(params) if params else {},
                "attributes": known.get(run_id, {}),
            },
            "duration_s": float(duration),
            "finished_at": end.isoformat() + ("" if end.tzinfo else "Z"),
        }
        for run_id, job_id, submit, config, params, duration, end in reversed(rows)
    ]


def replay(api: httpx.Client, runs: list[dict[str, Any]]) -> None:
    """Each run predicted, then its actual duration reported, oldest first."""
    for run in runs:
        checked(api.post("/v1/predict", json=run["spec"]))
        report = {
            "run_id": run["spec"]["run_id"],
            "job_id": run["spec"]["job_id"],
            "duration_s": run["duration_s"],
            "finished_at": run["finished_at"],
        }
        checked(api.post("/v1/actuals", json=report))


def submit(api: httpx.Client, job_id: str, tier: str = "P1", account: str = "team-a") -> str:
    """One job submitted to the scheduler (budget 40 USD a day per account); its handle."""
    now = time.time()
    job = {
        "job_id": job_id,
        "tier": tier,
        "account": account,
        "submit": now,
        "deadline": now + 3 * 3600,
        "shapes": SHAPES,
        "task": {"type": "spark_python", "python_file": f"dbfs:/jobs/{job_id}.py"},
    }
    budgets = [{"name": account, "usd": 40.0, "period_s": 86400}]
    body = checked(api.post("/v1/jobs", json={"budgets": budgets, "jobs": [job]}))
    return str(body["handle"])


def report(api: httpx.Client, handle: str, *events: dict[str, Any]) -> None:
    """Events of a submitted job, as whatever runs it reports them."""
    for event in events:
        checked(api.post(f"/v1/jobs/{handle}/events", json=event))


def checked(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON body.

    Raises:
        RuntimeError: the API refused the request (its status and body).
    """
    if response.status_code >= 400:
        raise RuntimeError(f"{response.request.url.path}: {response.status_code} {response.text}")
    body: dict[str, Any] = response.json()
    return body
