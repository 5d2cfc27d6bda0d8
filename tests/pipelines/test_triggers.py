"""Trigger checks on a home with the manual model serving: settings, the log, once per subject
and version, the skew profile on the example's real feature values, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_serve import make_home
from typer.testing import CliRunner

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.errors import ConfigError
from autofe.modeling.importance import gain_shares
from autofe.pipelines.home import Home
from autofe.pipelines.nightly import feature_values, read_labelled
from autofe.pipelines.served_log import Served, ServedLog
from autofe.pipelines.triggers import (
    after_actuals,
    check_triggers,
    fire,
    load_settings,
    read_triggers,
)
from autofe.pipelines.triggers_signals import Signal, TriggerSettings
from autofe.scheduler.store import JobStore
from autofe.warehouse.connect import schema_fingerprint

NOW = 1_800_000_000.0
runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, example_warehouse: Path, manual_model: Path) -> Home:
    return Home(make_home(tmp_path / "home", example_warehouse, manual_model))


def write_actuals(home: Home, rows: list[tuple[str, str, float, float]], version: str) -> None:
    with home.actuals.open("a") as out:
        for run, job, duration, p50 in rows:
            record = {
                "run_id": run,
                "job_id": job,
                "duration_s": duration,
                "reported_at": "2027-01-15T08:00:00+00:00",
                "predicted_p50_s": p50,
                "predicted_low_80": p50 / 1.5,
                "predicted_high_80": p50 * 1.5,
                "model_version": version,
            }
            out.write(json.dumps(record) + "\n")


def test_settings_come_from_the_home_and_bad_ones_name_the_file(home: Home) -> None:
    assert load_settings(home) == TriggerSettings()
    path = home.root / "triggers.json"
    path.write_text(json.dumps({"job_runs": 4, "budget_usd": 12.5, "deadline_s": {"P0": 900}}))
    settings = load_settings(home)
    assert (settings.job_runs, settings.budget_usd) == (4, 12.5)
    assert settings.deadline_s == {"P0": 900, "P1": 8 * 3600.0, "P2": 24 * 3600.0}
    for text, message in (
        ('{"job_run": 4}', r"triggers.json: unknown setting 'job_run'"),
        ('{"window": "50"}', r"triggers.json: 'window' must be a number, not '50'"),
        ("[1]", r"triggers.json: must be a JSON object"),
        ('{"shape": 4}', r"triggers.json: 'shape' must be text, not 4"),
        ('{"budget_usd": "12"}', r"triggers.json: 'budget_usd' must be a number, not '12'"),
        ('{"deadline_s": {"P9": 60}}', r"'deadline_s' must map tiers \(P0, P1, P2\) to positive"),
        ("{", r"triggers.json: not readable as JSON"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_settings(home)


def test_a_job_going_wrong_fires_once_for_the_served_version(home: Home) -> None:
    calm = [(f"r{i}", f"j{i % 5}", 100.0, 100.0) for i in range(30)]
    write_actuals(home, calm, "v0001")
    assert after_actuals(home.root, NOW) == []
    write_actuals(home, [(f"s{i}", "j2", 300.0, 100.0) for i in range(3)], "v0001")
    (fired,) = after_actuals(home.root, NOW + 60)
    assert (fired["kind"], fired["subject"], fired["tier"]) == ("degradation", "job:j2", "P0")
    assert fired["action"] == "submitted" and fired["plan"]["market"] == "on-demand"
    assert fired["model_version"] == "v0001" and fired["evidence"]["runs"] == ["s0", "s1", "s2"]
    write_actuals(home, [("s3", "j2", 300.0, 100.0)], "v0001")
    assert after_actuals(home.root, NOW + 120) == []  # already fired for v0001
    assert [r["subject"] for r in read_triggers(home.triggers)] == ["job:j2"]
    assert len(JobStore.in_home(home.root).handles()) == 1


def test_the_log_tolerates_a_torn_line(home: Home) -> None:
    signal = Signal("skew", "features", False, "planted", {})
    fire(home, [signal], "check", "v0001", TriggerSettings(), NOW)
    with home.triggers.open("a") as out:
        out.write('{"kind": "degr')
    assert [r["reason"] for r in read_triggers(home.triggers)] == ["planted"]


def test_scheduled_and_held_requests_through_the_check(home: Home) -> None:
    (home.root / "triggers.json").write_text(json.dumps({"budget_usd": 0.0001}))
    (held,) = check_triggers(home.root, NOW, scheduled=True)
    assert (held["kind"], held["tier"], held["action"]) == ("scheduled", "P2", "held")
    assert check_triggers(home.root, NOW + 60, scheduled=True) == []  # one per day, still held
    (home.root / "triggers.json").write_text(json.dumps({"budget_usd": 100.0}))
    (retried,) = check_triggers(home.root, NOW + 120)
    assert (retried["subject"], retried["action"], retried["tier"]) == ("held", "submitted", "P2")
    assert "retried the retraining held since" in retried["reason"]


def test_skew_compares_the_same_runs_served_and_ingested(home: Home) -> None:
    """Served as the warehouse computes them: no skew. The model's most important feature
    served in milliseconds instead of seconds (a caller's unit slip): skew, P1."""
    version = home.registry.active()
    assert version is not None
    artifact = home.registry.load(version.name, schema_fingerprint())
    values = feature_values(home.warehouse, artifact.specs)
    names = artifact.model.features
    top = max(gain_shares(artifact.model).items(), key=lambda kv: kv[1])[0]
    runs = [r[0] for r in read_labelled(home.warehouse)][-250:]
    log = ServedLog(home.served)
    for i, run in enumerate(runs):
        features = {name: values[name].get(run) for name in names}
        log.append(Served(NOW + i, version.name, run, "j", features))
    assert check_triggers(home.root, NOW + 300) == []
    for i, run in enumerate(runs):
        features = {name: values[name].get(run) for name in names}
        value = features[top]
        if isinstance(value, int | float):
            features[top] = value * 1000.0
        log.append(Served(NOW + 400 + i, version.name, run, "j", features))
    (fired,) = check_triggers(home.root, NOW + 700)
    assert (fired["kind"], fired["tier"], fired["subject"]) == ("skew", "P1", "features")
    assert top in fired["evidence"]["shifted"] and fired["evidence"]["served"] == 250
    assert after_actuals(home.root, NOW + 800) == []  # skew is not checked per actual


def test_the_cli_checks_and_lists(home: Home, tmp_path: Path) -> None:
    result = runner.invoke(app, ["triggers", "check", "--home", str(home.root), "--scheduled"])
    assert result.exit_code == 0, result.output
    assert "scheduled (P2, incremental)" in result.output and "open retraining" in result.output
    listed = runner.invoke(app, ["triggers", "list", "--home", str(home.root), "--json"])
    assert json.loads(listed.output)["open"]["tier"] == "P2"
    bad = runner.invoke(app, ["triggers", "check", "--home", str(tmp_path / "nowhere")])
    assert bad.exit_code == EXIT_USER_ERROR
    assert bad.output.strip().splitlines() == [
        f"error: --home {tmp_path / 'nowhere'}: not a folder"
    ]
