"""``autofe schedule submit / status / cancel / export`` in-process (typer's CliRunner)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.scheduler.store import STORE_FILE, JobStore

runner = CliRunner()
TASK = {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py", "image": "ghcr.io/a/etl:1"}


def jobs_file(tmp_path: Path, **fields: Any) -> Path:
    """Two live jobs (deadlines two and six hours from now), the second after the first."""
    now = time.time()
    shapes = {
        "m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700},
        "m4.2xlarge x2": {"p50_s": 1700, "low_s": 1100, "high_s": 2600},
    }
    doc = {
        "format": "autofe-jobs/1",
        "budgets": [{"name": "team-a", "usd": 50.0, "period_s": 86400}],
        "jobs": [
            {"job_id": "etl-1", "tier": "P1", "account": "team-a", "submit": now,
             "deadline": now + 7200, "shapes": shapes, "task": TASK, **fields},
            {"job_id": "etl-2", "tier": "P3", "account": "team-a", "submit": now,
             "deadline": now + 21600, "depends_on": ["etl-1"], "shapes": shapes, "task": TASK},
        ],
    }  # fmt: skip
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(doc))
    return path


def run(*args: str) -> Any:
    return runner.invoke(app, ["schedule", *args])


def test_submit_status_cancel(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    submitted = run("submit", "--jobs", str(jobs_file(tmp_path)), "--home", str(home), "--json")
    assert submitted.exit_code == 0, submitted.output
    records = json.loads(submitted.output)
    assert [r["job_id"] for r in records] == ["etl-1", "etl-2"]
    assert all(r["state"] == "queued" for r in records)
    handle = records[0]["handle"]
    text = run("status", handle, "--home", str(home))
    assert text.exit_code == 0, text.output
    assert f"{handle}  etl-1 (P1, account team-a)" in text.output
    assert "state       queued" in text.output and "spend       $0.00 so far" in text.output
    status = json.loads(run("status", handle, "--home", str(home), "--json").output)
    assert status["plan"] == records[0]["plan"]
    cancelled = run("cancel", handle, "--home", str(home))
    assert cancelled.exit_code == 0 and "state       cancelled" in cancelled.output
    assert JobStore(home / STORE_FILE).get(handle).state == "cancelled"
    plain = run("submit", "--jobs", str(jobs_file(tmp_path)), "--home", str(home))
    lines = plain.output.splitlines()
    assert len(lines) == 2 and lines[0].split()[1:3] == ["etl-1", "queued"]


def test_user_errors_are_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    unknown = run("status", "nope", "--home", str(home))
    assert unknown.exit_code == 2 and "no job has handle 'nope'" in unknown.output
    bad = jobs_file(tmp_path, shapes={"z9.huge x2": {"p50_s": 10}})
    refused = run("submit", "--jobs", str(bad), "--home", str(home))
    assert refused.exit_code == 2
    assert "job 'etl-1': unknown instance type 'z9.huge'" in refused.output
    assert "Traceback" not in refused.output
    missing = run("submit", "--jobs", str(tmp_path / "none.json"), "--home", str(home))
    assert missing.exit_code == 2 and "cannot be read as JSON" in missing.output
    no_home = run("status", "x", "--home", str(tmp_path / "nowhere"))
    assert no_home.exit_code == 2 and "does not exist" in no_home.output
    wrong = run("export", "--jobs", str(jobs_file(tmp_path)), "--format", "yaml")
    assert wrong.exit_code == 2 and "format 'yaml': use one of databricks, k8s" in wrong.output


def test_export_a_jobs_file(tmp_path: Path) -> None:
    jobs = str(jobs_file(tmp_path))
    lines = run("export", "--jobs", jobs, "--format", "databricks")
    assert lines.exit_code == 0, lines.output
    bodies = [json.loads(line) for line in lines.output.splitlines()]
    assert [b["run_name"] for b in bodies] == ["etl-1", "etl-2"]
    assert all(b["tasks"][0]["new_cluster"]["aws_attributes"] for b in bodies)
    listed = run("export", "--jobs", jobs, "--format", "k8s")
    assert listed.exit_code == 0, listed.output
    doc = json.loads(listed.output)
    assert doc["kind"] == "List" and [j["kind"] for j in doc["items"]] == ["Job", "Job"]
    out = tmp_path / "out"
    written = run("export", "--jobs", jobs, "--format", "k8s", "--out", str(out))
    assert written.exit_code == 0, written.output
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 and all(f.startswith("autofe-etl-") for f in files)
    assert sorted(written.output.split()) == [str(out / f) for f in files]
    names = {json.loads((out / f).read_text())["metadata"]["name"] for f in files}
    assert names == {job["metadata"]["name"] for job in doc["items"]}


def test_export_a_submitted_job_uses_its_stored_plan(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    submitted = run("submit", "--jobs", str(jobs_file(tmp_path)), "--home", str(home), "--json")
    record = json.loads(submitted.output)[1]
    exported = run(
        "export", "--handle", record["handle"], "--home", str(home), "--format", "databricks"
    )
    assert exported.exit_code == 0, exported.output
    body = json.loads(exported.output)
    assert body["idempotency_token"] == record["handle"]  # a retried submit starts no twin
    cluster = body["tasks"][0]["new_cluster"]
    shape = record["plan"]["shape"].split(" x")
    assert cluster["node_type_id"] == shape[0] and cluster["num_workers"] == int(shape[1]) - 1
    neither = run("export", "--format", "k8s")
    assert neither.exit_code == 2 and "give --jobs FILE, or --handle H" in neither.output


@pytest.mark.parametrize("command", ["submit", "status", "cancel", "export"])
def test_help(command: str) -> None:
    assert run(command, "--help").exit_code == 0
