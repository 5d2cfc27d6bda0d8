"""``autofe run`` on a history above ``sample_runs``: the rounds score on a sample of whole
jobs, the shipped catalog, holdout and model are the whole warehouse's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import cast

import duckdb
import pytest
from typer.testing import CliRunner

from autofe.agents.state import Dropped, Feature
from autofe.cli import app
from autofe.feature_catalog import load_catalog
from autofe.featurespec import FeatureSpec
from autofe.pipelines.run import partial_fields
from autofe.pipelines.run_sample import refit_on_all_runs
from autofe.run_dir import RunDir
from autofe.sandbox.limits import SandboxLimits

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
    assert 25 > sample["jobs"] > 0
    with duckdb.connect(str(RunDir(sampled_run).warehouse), read_only=True) as con:
        [(largest,)] = con.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM runs GROUP BY job_id)"
        ).fetchall()
    assert abs(sample["runs"] - 200) <= largest  # about the runs asked for: one job's worth
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


def test_a_kept_feature_that_fails_on_every_run_is_left_out(
    sampled_run: Path, tmp_path: Path
) -> None:
    """The loop kept it on the sample; on every run it fails (here: a bad cast on a run the
    sample does not hold). The model is fit without it and the result names it."""
    out = tmp_path / "run"
    shutil.copytree(sampled_run, out)
    specs = load_catalog(RunDir(out).features)
    outside = _run_outside_the_sample(out)
    failing = FeatureSpec(
        name="fails_on_all_runs",
        sql=(
            "SELECT run_id, CASE WHEN run_id = '"
            + outside
            + "' THEN CAST('x' AS DOUBLE) ELSE 1.0 END AS value FROM runs"
        ),
        category="static-config",
    )
    kept = [_kept(s) for s in [*specs, failing]]
    final = refit_on_all_runs(out, kept, [*specs, failing], 0.2, SandboxLimits())
    assert [u["name"] for u in final["unfit"]] == ["fails_on_all_runs"]
    assert "cannot be computed" in final["unfit"][0]["reason"]
    assert final["features"] == len(specs)
    shipped = json.loads((RunDir(out).features / "catalog.json").read_text())["features"]
    assert "fails_on_all_runs" not in {f["name"] for f in shipped}
    assert final["holdout"]["n"] == 96


def test_a_feature_left_out_makes_the_result_partial_and_says_which() -> None:
    dropped = [Dropped(name="x_s", stage="all-runs", reason="feature x_s cannot be", iteration=1)]
    fields = partial_fields("max_iterations", dropped)
    assert fields["partial"] is True
    assert "(x_s)" in fields["partial_reasons"][0]


def _run_outside_the_sample(out: Path) -> str:
    with duckdb.connect(str(RunDir(out).sample), read_only=True) as con:
        inside = {str(r[0]) for r in con.execute("SELECT run_id FROM runs").fetchall()}
    with duckdb.connect(str(RunDir(out).warehouse), read_only=True) as con:
        every = sorted(str(r[0]) for r in con.execute("SELECT run_id FROM runs").fetchall())
    return next(r for r in every if r not in inside)


def _kept(spec: FeatureSpec) -> Feature:
    return cast(Feature, {"name": spec.name, "gate": {"feature_id": spec.feature_id}})


def test_a_sampled_loop_tells_the_what_if_rule_its_share_of_the_families() -> None:
    """The rule judges a sample's what-if differences against the noise of the code families
    left out; a sample.json from before families were counted gives its share of the jobs; on
    every job (no sample) the settings are the run's own."""
    from autofe.agents.settings import LoopSettings
    from autofe.pipelines.run import _sampled

    loop = LoopSettings()
    assert _sampled(loop, None) is loop
    record = {"runs": 648, "jobs": 10, "of_runs": 6621, "of_jobs": 102, "strata": 10}
    assert _sampled(loop, record).evaluation.families_share == 10 / 102
    sampled = _sampled(loop, record | {"families": 25, "of_families": 25})
    assert sampled.evaluation.families_share == 1.0
    assert sampled.evaluation.limits == loop.evaluation.limits
    assert loop.evaluation.families_share == 1.0
