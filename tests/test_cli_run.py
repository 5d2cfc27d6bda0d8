"""``autofe run``: one short round on the shipped example, its run directory, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR

runner = CliRunner()


def test_a_short_run_writes_the_run_directory(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "--out", str(out), "--max-iterations", "1", "--per-round", "12", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics["proposed"] == 12 and metrics["stop_reason"] in ("max_iterations", "targets_met")
    assert metrics["holdout"]["n"] > 0 and len(metrics["iterations"]) == 1
    assert 1 < metrics["structurally_distinct"] <= metrics["proposed"]
    for name in ("model.joblib", "metrics.json", "report.html", "run.log", "settings.json"):
        assert (out / name).is_file(), name
    assert (out / "features" / "catalog.json").is_file()
    assert "node evaluate finished" in (out / "run.log").read_text()
    again = runner.invoke(app, ["run", "--out", str(out)])
    assert again.exit_code == EXIT_USER_ERROR and "already holds a run" in again.output
    resumed = runner.invoke(app, ["run", "--resume", str(out), "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["holdout"] == metrics["holdout"]


def test_resume_of_a_folder_without_a_run_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--resume", str(tmp_path)])
    assert result.exit_code == EXIT_USER_ERROR
    assert "holds no run to resume" in result.output and "Traceback" not in result.output
