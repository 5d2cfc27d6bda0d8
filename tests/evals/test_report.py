"""The evaluation report on the shipped example workspace: every section, both formats."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.evals.manual import FEATURES_DIR, manual_features
from autofe.evals.render import write_report
from autofe.evals.report import Report, best_reference, build_report
from autofe.modeling.baselines import BASELINES
from autofe.modeling.dataset import labelled_runs
from autofe.warehouse.connect import open_warehouse

SMALL = ("cfg_local_cores", "size_input_bytes", "hist_mean_last3", "job_name")
OTHER = ("cfg_shuffle_partitions", "size_window_days", "hist_last_duration_same_config")
runner = CliRunner()


@pytest.fixture(scope="module")
def report(example_warehouse: Path) -> Report:
    specs = {s.name: s for s in manual_features()}
    sets = {"a": [specs[n] for n in SMALL], "b": [specs[n] for n in OTHER]}
    return build_report(example_warehouse, sets)


def test_sets_share_one_holdout_of_the_latest_runs(report: Report) -> None:
    a, b = report.sets
    assert a.holdout.run_ids == b.holdout.run_ids
    assert len(a.holdout.run_ids) == report.holdout_runs == round(report.labelled_runs * 0.2)
    assert sum(a.importance.values()) == pytest.approx(1.0)
    assert set(a.counts_by_category()) == {"static-config", "data-size", "history", "script-plan"}
    assert set(report.baselines) == {"ridge", "random forest"}


def test_simple_baselines_predict_the_same_holdout_runs(report: Report) -> None:
    assert [b.name for b in report.simple] == [name for name, _, _ in BASELINES]
    assert all(len(b.predicted) == b.metrics.n == report.holdout_runs for b in report.simple)
    # the job's median, recomputed from the warehouse: the training runs are the ones before
    # the model's holdout, in the same order
    with open_warehouse(report.db, read_only=True) as con:
        labelled = labelled_runs(con)
    cut = report.labelled_runs - report.holdout_runs
    assert [r[0] for r in labelled[cut:]] == list(report.sets[0].holdout.run_ids)
    by_job: dict[str, list[float]] = {}
    for _, job, _, seconds in labelled[:cut]:
        by_job.setdefault(job, []).append(seconds)
    overall = statistics.median(r[3] for r in labelled[:cut])
    expected = [statistics.median(by_job.get(r[1], [overall])) for r in labelled[cut:]]
    assert report.simple[0].predicted.tolist() == pytest.approx(expected)
    best = report.best_simple()
    assert best.metrics.mape == min(b.metrics.mape for b in report.simple)
    assert best_reference(report, report.sets[0]) == (best.label, best.metrics)  # no manual


def test_a_set_other_than_manual_is_also_judged_against_manual(report: Report) -> None:
    a, b = report.sets
    manual = replace(a, name="manual")
    # make the manual set the strongest row: every baseline loses to it on MAPE
    strong = replace(manual.holdout, metrics=replace(manual.holdout.metrics, mape=0.001))
    both = replace(report, sets=[replace(manual, holdout=strong), b])
    assert best_reference(both, both.sets[1]) == ("LightGBM / manual", strong.metrics)
    assert best_reference(both, both.sets[0])[0] == report.best_simple().label


def test_cost_impact_is_measured_on_the_lab_sweeps(report: Report) -> None:
    policies = {r.policy: r for r in report.sets[0].cost}
    assert set(policies) == {"predicted p50", "predicted p90", "static", "largest", "oracle"}
    assert policies["oracle"].deadlines_met == 1.0
    assert policies["oracle"].cost <= min(r.cost for r in policies.values() if r.deadlines_met == 1)
    assert policies["static"].saving_vs_static == 0.0
    assert policies["oracle"].points >= 10


def test_markdown_and_self_contained_html(report: Report, tmp_path: Path) -> None:
    md, page = write_report(report, tmp_path)
    text = md.read_text()
    for title in (
        "Accuracy on the holdout",
        "Error by job type",
        "Error by runtime bucket",
        "Features by category",
        "Cycle time per phase",
        "Cost impact",
    ):
        assert f"## {title}" in text
    assert "| LightGBM / a | 4 |" in text and "| LightGBM / b | 3 |" in text
    best = report.best_simple()
    assert f"| {best.label} — best baseline | – |" in text
    for b in report.simple:
        assert f"| {b.label}" in text and f"{b.metrics.mape:.1%}" in text
    assert (
        "## Against the best baseline" in text
        and f"| a | {report.sets[0].holdout.metrics.mape:.1%}" in text
    )
    assert (tmp_path / "predicted_vs_actual.png").read_bytes()[:4] == b"\x89PNG"
    html = page.read_text()
    sources = re.findall(r'src="([^"]+)"', html)
    assert len(sources) == 2 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "http" not in html.replace("data:image", "")


def test_eval_report_cli_compares_manual_with_a_generated_catalog(
    tmp_path: Path, example_warehouse: Path
) -> None:
    catalog = tmp_path / "run" / "features"
    catalog.mkdir(parents=True)
    for name in OTHER:
        (catalog / f"{name}.sql").write_text((FEATURES_DIR / f"{name}.sql").read_text())
    args = [
        "eval",
        "report",
        "--db",
        str(example_warehouse),
        "--out",
        str(tmp_path / "r"),
        "--generated",
        str(tmp_path / "run"),
        "--compare",
        "generated",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data["sets"]) == ["generated"]
    assert [b["name"] for b in data["baselines"]] == [name for name, _, _ in BASELINES]
    best = min(data["baselines"], key=lambda b: b["mape"])
    assert data["best_baseline"] == best["name"]
    judged = data["judged"]["generated"]
    assert judged["reference"] == best["label"] and judged["mape"] == best["mape"]
    assert judged["verdict"].startswith("beats it on ")
    assert Path(data["report"]).is_file()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--compare", "generated"], "needs --generated"),
        (["--compare", "magic"], "--compare takes manual, generated, both"),
        (["--compare", "both", "--generated", "/nonexistent"], "not a folder of features"),
    ],
)
def test_eval_report_bad_input_is_one_line(
    tmp_path: Path, example_warehouse: Path, extra: list[str], message: str
) -> None:
    args = ["eval", "report", "--db", str(example_warehouse), "--out", str(tmp_path), *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == EXIT_USER_ERROR
    assert message in result.output and "Traceback" not in result.output
