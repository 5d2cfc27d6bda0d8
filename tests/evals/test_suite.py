"""The suite end to end on a small scale: example report plus one third-party dataset."""

from __future__ import annotations

from pathlib import Path

from autofe.evals.manual import manual_features
from autofe.evals.suite import run_suite
from autofe.feature_catalog import save_catalog


def test_suite_writes_the_report_and_the_results_table(
    tmp_path: Path, external: Path, example_warehouse: Path
) -> None:
    specs = [s for s in manual_features() if s.name in {"cfg_local_cores", "hist_mean_last3"}]
    generated = [s for s in manual_features() if s.name in {"hist_mean_last3", "cfg_node_type"}]
    save_catalog(tmp_path / "runs" / "cherrypick" / "features", generated)
    result = run_suite(
        tmp_path / "suite",
        {"manual": specs},
        datasets=("cherrypick",),
        example_db=example_warehouse,
        generated_dir=tmp_path / "runs",
    )
    tmp_path = tmp_path / "suite"
    assert (tmp_path / "example" / "report.html").is_file()
    protocols = {(r.dataset, r.protocol) for r in result.protocols}
    assert protocols == {
        ("cherrypick", "point 5-fold"),
        ("cherrypick", "grouped 5-fold"),
        ("cherrypick", "leave-one-machine-type-out"),
    }
    sets = {r.features for r in result.protocols}
    assert sets == {
        "raw columns",
        "raw + node-type facts",
        "generated",
        "generated, submit-time only",
    }
    assert set(result.choice) == {f"cherrypick, {s}" for s in sets}
    oracle = next(r for r in result.choice["cherrypick, raw columns"] if r.policy == "oracle")
    assert oracle.deadlines_met == 1.0 and oracle.regret_vs_oracle == 0.0
    table = (tmp_path / "results.md").read_text()
    assert "| cherrypick | leave-one-machine-type-out | raw columns (17) | 291 |" in table
    assert "| manual | 2 |" in table
