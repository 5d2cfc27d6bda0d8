"""The suite end to end on a small scale: example report plus one third-party dataset."""

from __future__ import annotations

from pathlib import Path

from autofe.evals.manual import manual_features
from autofe.evals.suite import judgements, run_suite
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
    sets = {r.features for r in result.protocols if not r.baseline}
    assert sets == {"generated", "generated, submit-time only"}
    baselines = {r.features for r in result.protocols if r.baseline}
    assert baselines == {
        "job's median",
        "job × configuration median",
        "Ernest-style fit in total cores",
        "raw columns",
        "raw + node-type facts",
    }
    assert set(result.choice) == {f"cherrypick, {s}" for s in sets | RAW}
    oracle = next(r for r in result.choice["cherrypick, raw columns"] if r.policy == "oracle")
    assert oracle.deadlines_met == 1.0 and oracle.regret_vs_oracle == 0.0
    table = (tmp_path / "results.md").read_text()
    assert "| cherrypick | leave-one-machine-type-out | raw columns (17)" in table
    assert "| cherrypick | leave-one-machine-type-out | job's median (baseline)" in table
    assert "| manual | 2 |" in table
    best = result.report.best_simple()
    assert f"| {best.label} — best baseline | – |" in table
    assert "- manual against " in table
    # one best baseline per protocol, and each generated row judged against it
    assert table.count(" — best baseline | ") == 3 + 1
    judged = judgements(result.protocols)
    assert len(judged) == 3 * 2
    for b, g, word in judged:
        rows = [r for r in result.protocols if r.baseline and r.protocol == g.protocol]
        assert b.mape == min(r.mape for r in rows) and b.protocol == g.protocol
        assert (word == "beats") == (b.mape - g.mape > 0.0005)
        assert (word == "loses to") == (g.mape - b.mape > 0.0005)
        assert f"| {g.protocol} | {b.features} | {b.mape:.1%} | {g.features} |" in table


RAW = {"raw columns", "raw + node-type facts"}
