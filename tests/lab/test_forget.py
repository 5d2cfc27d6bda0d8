"""autofe lab forget: finished runs (and their retries) deleted so a resume runs them again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.errors import ConfigError
from autofe.lab.forget import forget_runs
from autofe.lab.generate import MANIFEST, build_plan, load_jobs
from autofe.lab.plan import RunSpec
from autofe.lab.runner import Outcome
from autofe.lab.workspace_writer import cluster_id, event_log_dir, write_json, write_run


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, RunSpec, RunSpec, RunSpec]:
    """A failed spot attempt, its retry and one other run, written as the generator does."""
    plan = build_plan(load_jobs(), 40, seed=2, days=3, scale_factors=(0.01,))
    retry = next(s for s in plan if s.retry_of is not None)
    failed = next(s for s in plan if s.run_id == retry.retry_of)
    other = next(s for s in plan if s.run_id not in (retry.run_id, failed.run_id))
    runs = {}
    for spec, state in ((failed, "FAILED"), (retry, "SUCCESS"), (other, "SUCCESS")):
        logs = event_log_dir(tmp_path, spec)
        logs.mkdir(parents=True)
        (logs / "eventlog").write_text("{}\n")
        write_run(tmp_path, spec, Outcome(state, 0, 5_000, 10_000, ""))
        runs[str(spec.run_id)] = {"job": spec.job.name, "result_state": state}
    write_json(tmp_path / MANIFEST, {"settings": {"seed": 2}, "runs": runs})
    return tmp_path, failed, retry, other


def test_an_attempt_is_forgotten_with_its_retry_and_nothing_else(
    workspace: tuple[Path, RunSpec, RunSpec, RunSpec],
) -> None:
    root, failed, retry, other = workspace
    assert forget_runs(root, [failed.run_id]) == sorted([failed.run_id, retry.run_id])
    assert sorted(p.stem for p in (root / "runs").glob("*.json")) == [str(other.run_id)]
    assert sorted(p.stem for p in (root / "clusters").glob("*.json")) == [cluster_id(other)]
    assert [p.name for p in (root / "cluster-logs").iterdir()] == [cluster_id(other)]
    manifest = json.loads((root / MANIFEST).read_text())
    assert list(manifest["runs"]) == [str(other.run_id)] and manifest["settings"] == {"seed": 2}


def test_unknown_runs_and_folders_are_refused_and_nothing_is_deleted(
    workspace: tuple[Path, RunSpec, RunSpec, RunSpec], tmp_path_factory: pytest.TempPathFactory
) -> None:
    root, failed, _, _ = workspace
    with pytest.raises(ConfigError, match=r"no finished runs \[999\]"):
        forget_runs(root, [failed.run_id, 999])
    assert len(list((root / "runs").glob("*.json"))) == 3
    with pytest.raises(ConfigError, match="is not a lab workspace"):
        forget_runs(tmp_path_factory.mktemp("empty"), [1001])


def test_cli_prints_what_it_forgot_and_one_line_errors(
    workspace: tuple[Path, RunSpec, RunSpec, RunSpec],
) -> None:
    root, _, _, other = workspace
    args = ["lab", "forget", "--workspace", str(root), "--run", str(other.run_id), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and json.loads(result.stdout) == {"forgotten": [other.run_id]}
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and f"no finished runs [{other.run_id}]" in result.stderr
    assert "Traceback" not in result.output
