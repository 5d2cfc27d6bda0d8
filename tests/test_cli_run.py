"""``autofe run``: one short round on the shipped example, its run directory, and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
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
    _assert_baselines_beside_the_holdout(out, metrics)
    assert "node evaluate finished" in (out / "run.log").read_text()
    again = runner.invoke(app, ["run", "--out", str(out)])
    assert again.exit_code == EXIT_USER_ERROR and "already holds a run" in again.output
    resumed = runner.invoke(app, ["run", "--resume", str(out), "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["holdout"] == metrics["holdout"]


def _assert_baselines_beside_the_holdout(out: Path, metrics: dict[str, Any]) -> None:
    """Eight baselines, finite, on exactly the holdout's runs; ``holdout.json`` row by row."""
    held = metrics["holdout"]["n"]
    assert metrics == json.loads((out / "metrics.json").read_text())
    assert [b["name"] for b in metrics["baselines"]] == [
        "job_median", "job_config_median", "last5_median", "job_config_median_online",
        "job_median_online", "raw_lightgbm", "raw_node_lightgbm", "ernest",
    ]  # fmt: skip
    for b in metrics["baselines"]:
        assert b["runs"] == held and b["label"], b
        assert all(math.isfinite(b[k]) for k in ("mape", "median_ape", "log_r2", "within_20"))
    best = min(metrics["baselines"], key=lambda b: b["mape"])
    assert metrics["best_baseline"] == best["name"] and "within_20" in metrics["holdout"]
    rows = json.loads((out / "holdout.json").read_text())["runs"]
    assert len(rows) == held == metrics["baselines"][0]["runs"]
    assert [r["submit_time"] for r in rows] == sorted(r["submit_time"] for r in rows)
    for level in ("80", "90"):
        assert all(r[f"low_{level}"] <= r["p50_s"] <= r[f"high_{level}"] for r in rows)
    inside = sum(r["low_80"] <= r["actual_s"] <= r["high_80"] for r in rows) / held
    assert inside == pytest.approx(metrics["holdout"]["coverage_80"], abs=0.02)


def test_resume_of_a_folder_without_a_run_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--resume", str(tmp_path)])
    assert result.exit_code == EXIT_USER_ERROR
    assert "holds no run to resume" in result.output and "Traceback" not in result.output
