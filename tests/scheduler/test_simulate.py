"""The simulator end to end, on a trace of real C3O runtimes, and ``autofe schedule simulate``.

The trace: C3O's Spark *sort* job (``../shared/data/external/c3o/sort.tsv``, 5 runs per input
size × AWS shape). Per input size one job; per shape the estimate is the median of runs 2–5
with an illustrative ±30 % interval, and the truth (``true_s``) is run 1, held out.
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.errors import ConfigError, ScheduleError
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.jobfile import Budget, JobSet, write_jobs
from autofe.scheduler.jobs import Estimate, JobRequest, Tier
from autofe.scheduler.policies import POLICIES
from autofe.scheduler.report import JobRecord, Status, result_dict, summarize
from autofe.scheduler.simulate import SimulationSettings, simulate, simulate_all
from autofe.scheduler.simulate_world import noisy_estimate, seen_job

runner = CliRunner()
TIERS: tuple[Tier, ...] = ("P0", "P1", "P2", "P3")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def sort_trace(external: Path) -> JobSet:
    runs: dict[tuple[str, str], list[float]] = {}
    with (external / "c3o" / "sort.tsv").open() as f:
        for row in csv.DictReader(f, delimiter="\t"):
            key = (row["data_size_MB"], f"{row['machine_type']} x{row['instance_count']}")
            runs.setdefault(key, []).append(float(row["gross_runtime"]))
    sizes = sorted({size for size, _ in runs}, key=float)
    jobs = []
    for i, size in enumerate(sizes):
        shapes = {}
        for (s, shape), seconds in sorted(runs.items()):
            if s == size and len(seconds) >= 2:
                p50 = statistics.median(seconds[1:])
                shapes[shape] = Estimate(p50, p50 / 1.3, p50 * 1.3, seconds[0])
        fastest = min(e.p50_s for e in shapes.values())
        submit = i * 120.0
        jobs.append(
            JobRequest(
                f"sort-{size}MB",
                submit,
                shapes,
                tier=TIERS[i % 4],
                account=("etl", "adhoc")[i % 2],
                deadline=submit + 2.0 * (fastest + 300.0),
            )
        )
    return JobSet(tuple(jobs), (Budget("etl", 50.0, 86400.0),), "c3o sort")


def test_every_policy_on_real_runtimes(sort_trace: JobSet, catalog: Catalog) -> None:
    results = {r.policy: r for r in simulate_all(sort_trace, catalog)}
    assert list(results) == list(POLICIES)
    n = len(sort_trace.jobs)
    for name, result in results.items():
        s = result.summary
        assert s.jobs == n and s.done == n, name
        assert s.budget_overrun_usd == 0.0 and result.spend_by_budget["etl"] <= 50.0, name
        jobs_usd = sum(r.cost_usd for r in result.jobs)
        assert s.total_cost_usd == pytest.approx(jobs_usd + s.idle_cost_usd), name
    static = results["static"].summary.total_cost_usd
    assert results["autofe"].summary.total_cost_usd < static
    assert results["oracle"].summary.total_cost_usd <= results["autofe"].summary.total_cost_usd
    assert results["oracle"].summary.attainment == 1.0


def test_a_seed_fixes_the_run_and_another_seed_changes_it(
    sort_trace: JobSet, catalog: Catalog
) -> None:
    stormy = SimulationSettings(seed=5, preemption_multiplier=5000.0)
    first = simulate(sort_trace, catalog, "spot-only", stormy)
    assert first == simulate(sort_trace, catalog, "spot-only", stormy)
    assert first.summary.preemptions > 0
    other = simulate(sort_trace, catalog, "spot-only", replace(stormy, seed=6))
    assert other.log != first.log


def test_a_chosen_shape_without_a_true_runtime_is_an_error_naming_the_job(
    catalog: Catalog,
) -> None:
    job = JobRequest("no-truth", 0.0, {"m4.xlarge x4": Estimate(600.0, 500.0, 800.0)})
    with pytest.raises(ScheduleError, match=r"job 'no-truth'.*'m4.xlarge x4'.*no true_s"):
        simulate(JobSet((job,)), catalog, "static")
    with pytest.raises(ScheduleError, match="job 'no-truth': no shape it can run on"):
        simulate(JobSet((job,)), catalog, "oracle")


def test_what_the_scheduler_sees() -> None:
    job = JobRequest(
        "j",
        0.0,
        {
            "m4.xlarge x4": Estimate(600.0, 500.0, 800.0, 900.0),
            "m4.xlarge x64": Estimate(60.0, 50.0, 80.0, 90.0),
        },
    )
    model = seen_job(job, SimulationSettings())
    assert model.shapes["m4.xlarge x4"] == Estimate(600.0, 500.0, 800.0)
    small = SimulationSettings(fleet=replace(SimulationSettings().fleet, max_nodes=8))
    assert list(seen_job(job, small).shapes) == ["m4.xlarge x4"]
    exact = seen_job(job, SimulationSettings(view="noisy-oracle", noise_sigma=0.0))
    assert exact.shapes["m4.xlarge x4"] == Estimate(900.0, 900.0, 900.0)
    noisy = seen_job(job, SimulationSettings(view="noisy-oracle", noise_sigma=0.5, seed=1))
    est = noisy.shapes["m4.xlarge x4"]
    assert est.true_s is None and est.low_s < est.p50_s < est.high_s and est.p50_s != 900.0
    assert noisy == seen_job(job, SimulationSettings(view="noisy-oracle", noise_sigma=0.5, seed=1))


def test_noisy_estimates_are_centred_on_the_truth() -> None:
    import random

    rng = random.Random(0)
    p50s = [noisy_estimate(Estimate(1, 1, 1, 600.0), 0.3, rng).p50_s for _ in range(2000)]
    assert statistics.median(p50s) == pytest.approx(600.0, rel=0.05)


@pytest.mark.parametrize(
    "kwargs",
    [{"startup_s": -1.0}, {"view": "psychic"}, {"budget_mode": "soft"}, {"fallback_after": 0}],
)
def test_bad_settings_are_config_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="simulation"):
        SimulationSettings(**kwargs)  # type: ignore[arg-type]


def test_summary_counts_unfinished_jobs_as_misses() -> None:
    def rec(job_id: str, tier: str, status: Status, end: float | None) -> JobRecord:
        started = 0.0 if end else None
        return JobRecord(job_id, tier, "a", 0.0, 100.0, status, 0.0, started, end, 1.0, "")

    records = [
        rec("a", "P0", "done", 90.0),
        rec("b", "P0", "done", 120.0),
        rec("c", "P1", "held", None),
    ]
    s = summarize("x", records)
    assert s.attainment == pytest.approx(1 / 3) and s.attainment_by_tier["P0"] == 0.5
    assert s.misses_by_tier == {"P0": 1, "P1": 1, "P2": 0, "P3": 0}
    assert s.held == 1 and s.avg_completion_s == pytest.approx(105.0)


def test_cli_table_json_and_plot(sort_trace: JobSet, catalog: Catalog, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    write_jobs(trace, sort_trace.jobs, sort_trace.budgets, sort_trace.source)
    out = runner.invoke(app, ["schedule", "simulate", "--trace", str(trace), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [d["policy"] for d in data] == list(POLICIES)
    direct = simulate(sort_trace, catalog, "autofe")
    assert data[0] == json.loads(json.dumps(result_dict(direct)))
    png = tmp_path / "cost.png"
    text = runner.invoke(
        app,
        ["schedule", "simulate", "--trace", str(trace), "--policy", "static", "--plot", str(png)],
    )
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0].split()[:3] == ["policy", "cost", "$"] and lines[1].startswith("static")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    job = JobRequest("no-truth", 0.0, {"m4.xlarge x4": Estimate(600.0, 500.0, 800.0)})
    write_jobs(trace, [job])
    out = runner.invoke(app, ["schedule", "simulate", "--trace", str(trace), "--policy", "static"])
    assert out.exit_code == EXIT_USER_ERROR and "job 'no-truth'" in out.output
    bad = runner.invoke(app, ["schedule", "simulate", "--trace", str(trace), "--policy", "cheap"])
    assert bad.exit_code == EXIT_USER_ERROR and "unknown policy 'cheap'" in bad.output


def test_cli_world_options_reach_the_simulation(
    sort_trace: JobSet, catalog: Catalog, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.json"
    write_jobs(trace, sort_trace.jobs, sort_trace.budgets, sort_trace.source)
    args = ["--policy", "greedy", "--seed", "4", "--preemption-multiplier", "5000"]
    args += ["--max-nodes", "16", "--budget-mode", "off", "--json"]
    out = runner.invoke(app, ["schedule", "simulate", "--trace", str(trace), *args])
    assert out.exit_code == 0, out.output
    world = SimulationSettings(
        seed=4,
        preemption_multiplier=5000.0,
        fleet=replace(SimulationSettings().fleet, max_nodes=16),
        budget_mode="off",
    )
    direct = simulate(sort_trace, catalog, "greedy", world)
    assert json.loads(out.output) == [json.loads(json.dumps(result_dict(direct)))]
