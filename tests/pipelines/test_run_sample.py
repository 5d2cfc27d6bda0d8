"""``autofe run`` on a history above ``sample_runs``: the rounds score on a sample of whole
jobs, the shipped catalog, holdout and model are the whole warehouse's."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.run_dir import RunDir

pytestmark = pytest.mark.slow  # a loop round and a final fit: ~1 min (make test-scale)

runner = CliRunner()


@pytest.fixture(scope="module")
def sampled_run(example_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sampled") / "run"
    args = ["run", "--out", str(out), "--warehouse", str(example_warehouse), "--json"]
    args += ["--sample-runs", "200", "--per-round", "12", "--max-iterations", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


def test_rounds_scored_a_sample_and_the_report_says_so(sampled_run: Path) -> None:
    metrics = json.loads(RunDir(sampled_run).metrics.read_text())
    sample = metrics["sample"]
    assert (sample["of_runs"], sample["of_jobs"]) == (490, 25)
    assert 200 <= sample["runs"] < 490
    with duckdb.connect(str(RunDir(sampled_run).sample), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(sample["runs"],)]
    page = RunDir(sampled_run).report.read_text()
    assert f"a sample of {sample['runs']:,} of the 490 runs" in page


def test_final_features_model_and_holdout_are_on_every_run(sampled_run: Path) -> None:
    run_dir = RunDir(sampled_run)
    metrics = json.loads(run_dir.metrics.read_text())
    assert metrics["accepted"] > 0 and metrics["model"]
    assert len(json.loads(run_dir.holdout_predictions.read_text())["runs"]) == 96  # 20 % of 490
    assert metrics["holdout"]["n"] == 96
    with duckdb.connect(str(run_dir.feature_store), read_only=True) as con:
        per_feature = con.execute(
            "SELECT feature_id, count(DISTINCT run_id) FROM feature_values GROUP BY 1"
        ).fetchall()
    catalog = json.loads((run_dir.features / "catalog.json").read_text())
    shipped = {f["feature_id"] for f in catalog["features"]}
    counts = dict(per_feature)
    assert shipped and all(counts[f] > metrics["sample"]["runs"] for f in shipped)
