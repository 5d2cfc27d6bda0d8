"""Dashboard page loads: each ``/ui`` page of ``autofe serve`` with 10 k actuals and 1 k jobs.

Run: ``.venv/bin/python benchmarks/dashboard.py [--actuals 10000] [--jobs 1000] [--loads 20]
[--write docs/results.md]``

Setup (not timed), through the public code paths only: the home of ``benchmarks/api.py`` (the
shipped example workspace ingested, the manual baseline trained, registered and promoted);
``--actuals`` reports, each a prediction of a real example run from its real feature values
(``Service.predict`` with a ``run_id``, so the server remembers it) followed by that run's real
duration (``Service.report_actual``, which appends to ``HOME/actuals.jsonl``), one a minute over
the last days; ``--jobs`` job requests submitted one at a time as ``POST /v1/jobs`` does
(``submit_document`` on ``HOME/scheduler.sqlite``) over the last 20 hours, across four accounts
with daily budgets, most started, some preempted, moved to a fallback or upgraded, most of the
started ones finished; and 30 nightly records, each carrying the served model's real drift
report (computed once, as ``autofe nightly`` does, with the champion taken as trained through
the 80 % point of the runs).

Timed: ``--loads`` loads of each page through FastAPI's TestClient in-process (the app's whole
stack: the guard, routing, the data reads and the HTML) after 2 warm-up loads, and, for the
breakdown, the page's data read and its rendering called directly. The target is 300 ms server
time per page.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from api import _home as build_home
from fastapi.testclient import TestClient
from report import commit, machine, percentile, run_and_write

from autofe.pipelines.nightly import feature_values, jobs_and_runs, read_labelled
from autofe.pipelines.nightly_drift import drift_report
from autofe.pipelines.serve import create_app
from autofe.pipelines.serve_models import ActualReport, PredictRequest
from autofe.pipelines.serve_routes import service_of
from autofe.pipelines.serve_service import Loaded, Service
from autofe.pipelines.serve_ui_data import model_data, predictions_data, scheduler_data
from autofe.pipelines.serve_ui_pages import model_page, predictions_page, scheduler_page
from autofe.scheduler.catalog import load_catalog
from autofe.scheduler.store import JobStore, submit_document

TARGET_MS = 300.0
WARM_UP = 2
ACCOUNTS = ("team-a", "team-b", "team-c", "team-d")
SHAPES = {
    "m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700},
    "n2-standard-8 x3": {"p50_s": 1500, "low_s": 1000, "high_s": 2400},
}
PAGES: dict[str, tuple[Callable[[Service], Any], Callable[[Any], str]]] = {
    "/ui/model": (model_data, model_page),
    "/ui/predictions": (predictions_data, predictions_page),
    "/ui/scheduler": (scheduler_data, scheduler_page),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actuals", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--loads", type=int, default=20)
    parser.add_argument("--write", type=Path)
    run_and_write("dashboard", parser.parse_args(), run)


def run(tmp: Path, args: argparse.Namespace) -> str:
    home = build_home(tmp)
    app = create_app(home, token="", poll_s=1.0)
    service = service_of(app)
    loaded = service.live.current()
    assert loaded is not None
    started = time.perf_counter()
    report_actuals(service, loaded, home / "warehouse.duckdb", args.actuals)
    submit_jobs(home, args.jobs)
    write_nights(home, loaded, 30)
    setup_s = time.perf_counter() - started
    client = TestClient(app)
    rows = [time_page(client, service, path, args.loads) for path in PAGES]
    return _report(args, setup_s, home, rows)


def report_actuals(service: Service, loaded: Loaded, db: Path, n: int) -> None:
    """``n`` predictions of real runs from their real features, each followed by its actual."""
    values = feature_values(db, loaded.artifact.specs)
    with duckdb.connect(str(db), read_only=True) as con:
        runs = con.execute(
            "SELECT run_id, job_id, duration_s FROM runs WHERE status = 'SUCCEEDED' "
            "AND duration_s > 0 ORDER BY submit_time, run_id"
        ).fetchall()
    start = time.time() - n * 60
    for i in range(n):
        run_id, job_id, duration = runs[i % len(runs)]
        features = {name: column.get(run_id) for name, column in values.items()}
        key = f"{run_id}-{i}"
        service.predict(loaded, PredictRequest(job_id=job_id, run_id=key, features=features))
        finished = datetime.fromtimestamp(start + i * 60, UTC).isoformat().replace("+00:00", "Z")
        report = {"run_id": key, "job_id": job_id, "duration_s": duration}
        service.report_actual(ActualReport.model_validate({**report, "finished_at": finished}))


def submit_jobs(home: Path, n: int) -> None:
    """``n`` jobs over the last 20 hours; most started, some preempted, moved or upgraded."""
    store = JobStore(home / "scheduler.sqlite")
    catalog = load_catalog()
    rng = random.Random(0)
    now = time.time()
    budgets = [{"name": a, "usd": 50.0 + 50 * i, "period_s": 86400} for i, a in enumerate(ACCOUNTS)]
    for i in range(n):
        at = now - 20 * 3600 + i * (19 * 3600 / n)
        job = {
            "job_id": f"etl-{i}",
            "tier": ("P1", "P2", "P3")[i % 3],
            "account": ACCOUNTS[i % len(ACCOUNTS)],
            "submit": at,
            "deadline": at + 3 * 3600,
            "shapes": SHAPES,
            "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py"},
        }
        (record,) = submit_document(store, {"budgets": budgets, "jobs": [job]}, catalog, at)
        _run_job(store, record.handle, at, rng, min(now, at + 3600))


def _run_job(store: JobStore, handle: str, at: float, rng: random.Random, stop: float) -> None:
    if rng.random() < 0.2:
        return  # still queued
    store.report(handle, "started", at + 60)
    if rng.random() < 0.1:
        store.report(handle, "preempted", at + 300, reason="spot capacity reclaimed")
    if rng.random() < 0.05:
        store.report(handle, "fallback", at + 400, hourly_usd=3.2, reason="on-demand")
    elif rng.random() < 0.05:
        store.report(handle, "upgraded", at + 400, hourly_usd=4.8, reason="bigger shape")
    store.report(handle, "progress", at + 600, progress=0.5)
    if rng.random() < 0.85 and at + 1800 < stop:
        store.report(handle, "succeeded" if rng.random() < 0.95 else "failed", at + 1800)


def write_nights(home: Path, loaded: Loaded, n: int) -> None:
    """``n`` nightly records carrying the served model's real drift report."""
    db = home / "warehouse.duckdb"
    labelled = read_labelled(db)
    values = feature_values(db, loaded.artifact.specs)
    through = labelled[int(len(labelled) * 0.8)][2]
    names, runs = jobs_and_runs(db)
    artifact = loaded.artifact
    drift = drift_report(artifact, labelled, values, through, names, runs, home / "actuals.jsonl")
    for day in range(n):
        stamp = f"202501{day + 1:02d}T020000Z"
        record = {
            "stamp": stamp,
            "status": "done",
            "started": f"2025-01-{day + 1:02d}T02:00:00+00:00",
            "decision": "kept",
            "reason": "the challenger is not better",
            "challenger": {"window": {"mape": 0.45 - day * 0.002}},
            "champion": {"version": "v0001", "window": {"mape": 0.44}},
            "version": "v0001",
            "drift": drift,
        }
        (home / "nightly" / stamp).mkdir(parents=True)
        (home / "nightly" / stamp / "nightly.json").write_text(json.dumps(record, default=str))


def time_page(client: TestClient, service: Service, path: str, loads: int) -> dict[str, Any]:
    """Load times through the app (ms), and the data read and the render called directly."""
    for _ in range(WARM_UP):
        assert client.get(path).status_code == 200
    through_app, data_ms, render_ms = [], [], []
    size = 0
    read, render = PAGES[path]
    for _ in range(loads):
        started = time.perf_counter()
        response = client.get(path)
        through_app.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
        size = len(response.content)
        started = time.perf_counter()
        data = read(service)
        read_done = time.perf_counter()
        render(data)
        data_ms.append((read_done - started) * 1000)
        render_ms.append((time.perf_counter() - read_done) * 1000)
    return {"path": path, "app": through_app, "data": data_ms, "render": render_ms, "bytes": size}


def _report(
    args: argparse.Namespace, setup_s: float, home: Path, rows: list[dict[str, Any]]
) -> str:
    at = commit()
    command = (
        f".venv/bin/python benchmarks/dashboard.py --actuals {args.actuals} --jobs {args.jobs} "
        f"--loads {args.loads}"
    )
    worst = max(percentile(r["app"], 0.95) for r in rows)
    target = "met" if worst <= TARGET_MS else "missed"
    lines = sum(1 for _ in (home / "actuals.jsonl").open())
    table = [
        "| page | loads | median ms | p95 ms | max ms | data read, median ms | render, median ms "
        "| page size |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| `{r['path']}` | {len(r['app'])} | {percentile(r['app'], 0.5):.1f} | "
            f"{percentile(r['app'], 0.95):.1f} | {max(r['app']):.1f} | "
            f"{percentile(r['data'], 0.5):.1f} | {percentile(r['render'], 0.5):.1f} | "
            f"{r['bytes'] / 1024:,.0f} KiB |"
            for r in rows
        ),
    ]
    return (
        "\n".join(
            [
                f"Commit {at}. Machine: {machine()}. Command: `{command}`.",
                "",
                f"Home: {lines:,} lines in actuals.jsonl, {args.jobs:,} jobs in scheduler.sqlite, "
                f"30 nightly records; setup {setup_s:.0f} s. Target (p95 ≤ {TARGET_MS:.0f} ms "
                f"per page, in-process through the app): {target}.",
                "",
                *table,
            ]
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
