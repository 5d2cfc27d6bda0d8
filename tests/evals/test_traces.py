"""Simulation traces built from real runtimes: the truth is the runs', the deadlines are
reachable, the catalog knows every shape, and a seed fixes everything."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.errors import ConfigError
from autofe.evals.choice import generated_choice_options
from autofe.evals.sweeps import SWEEP_SQL
from autofe.evals.traces import (
    SOURCES,
    Point,
    TraceSettings,
    build_trace,
    cheapest_cost,
    config_shapes,
    points_from_options,
    source_points,
    static_cost,
    trace_for,
)
from autofe.feature_catalog import save_catalog
from autofe.featurespec import FeatureSpec
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.jobfile import JobSet, read_jobs, write_jobs
from autofe.scheduler.jobs import Estimate, JobRequest, Shape
from autofe.scheduler.simulate import SimulationSettings, simulate

SETTINGS = TraceSettings(min_jobs=120)
runner = CliRunner()

TRUE_SQL = """
SELECT r.job_id, CAST(r.parameters AS VARCHAR), c.node_type, c.num_workers, r.duration_s
FROM runs AS r JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id
WHERE r.status = 'SUCCEEDED' AND r.duration_s > 0 AND r.submit_time IS NOT NULL
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def traces(
    mapping_db: Callable[[str], Path], example_warehouse: Path, catalog: Catalog
) -> dict[str, tuple[JobSet, Path]]:
    made = {}
    for source, dataset in SOURCES.items():
        db = example_warehouse if source == "lab" else mapping_db(dataset)
        made[source] = (trace_for(source, catalog, SETTINGS, db=db), db)
    return made


def _true_means(db: Path, by_parameters: bool) -> dict[tuple[str, str], list[float]]:
    """(point, shape key) → every run's seconds, straight from the warehouse."""
    cells: dict[tuple[str, str], list[float]] = {}
    with duckdb.connect(str(db), read_only=True) as con:
        for job, params, node, workers, seconds in con.execute(TRUE_SQL).fetchall():
            point = f"{job}|{params}" if by_parameters else job
            cells.setdefault((point, Shape(node, max(1, workers)).key), []).append(seconds)
    return cells


@pytest.mark.parametrize("source", ["c3o", "scout", "cherrypick"])
def test_every_true_runtime_is_the_mean_of_real_runs(
    traces: dict[str, tuple[JobSet, Path]], source: str
) -> None:
    jobs, db = traces[source]
    runs = _true_means(db, source == "c3o")
    for job in jobs.jobs:
        assert len(job.shapes) >= 2
        for key, est in job.shapes.items():
            seconds = runs[(job.labels["point"], key)]
            assert est.true_s == pytest.approx(sum(seconds) / len(seconds), rel=1e-9)
            assert est.low_s <= est.p50_s <= est.high_s
            assert est.low_s * est.high_s == pytest.approx(est.p50_s**2, rel=1e-9)
            assert est.high99_s is not None and est.high99_s >= est.high_s


def test_lab_truth_is_one_sweep_run_of_the_point_on_that_node_type(
    traces: dict[str, tuple[JobSet, Path]],
) -> None:
    jobs, db = traces["lab"]
    with duckdb.connect(str(db), read_only=True) as con:
        nodes = dict(con.execute("SELECT config_id, node_type FROM cluster_configs").fetchall())
        sweeps = {
            (p, Shape(nodes[c]).key, s) for _, p, c, _, s in con.execute(SWEEP_SQL).fetchall()
        }
    shapes = {key for job in jobs.jobs for key in job.shapes}
    assert shapes == {"Standard_F4s x1", "Standard_F8s x1"}
    for job in jobs.jobs:
        for key, est in job.shapes.items():
            assert (job.labels["point"], key, est.true_s) in sweeps


def test_every_instance_type_is_in_the_catalog_and_the_file_reads_back(
    traces: dict[str, tuple[JobSet, Path]], catalog: Catalog, tmp_path: Path
) -> None:
    for source, (jobs, _) in traces.items():
        path = tmp_path / f"{source}.json"
        write_jobs(path, jobs.jobs, jobs.budgets, jobs.source)
        again = read_jobs(path, catalog)  # validates every type against the catalog
        assert again.jobs == jobs.jobs  # the 99 % bound included
        assert again.budgets == jobs.budgets
        assert len(jobs.jobs) >= SETTINGS.min_jobs


def _earliest_finish(jobs: JobSet, startup_s: float) -> dict[str, float]:
    """Each job's finish on its fastest shape, started as soon as it and its chain allow."""
    done: dict[str, float] = {}
    for job in jobs.jobs:
        ready = max([job.submit, *(done[d] for d in job.depends_on)])
        done[job.job_id] = ready + _fastest(job) + startup_s
    return done


def _fastest(job: JobRequest) -> float:
    return min(float(e.true_s or 0.0) for e in job.shapes.values())


def test_deadlines_are_reachable_by_the_fastest_shape_with_the_slack(
    traces: dict[str, tuple[JobSet, Path]],
) -> None:
    for jobs, _ in traces.values():
        finish = _earliest_finish(jobs, SETTINGS.startup_s)
        deadline = {j.job_id: float(j.deadline or 0.0) for j in jobs.jobs}
        for job in jobs.jobs:
            assert job.deadline is not None and finish[job.job_id] <= job.deadline
            own = SETTINGS.slack * (_fastest(job) + SETTINGS.startup_s)
            assert job.deadline - job.submit >= own - 1e-3
            for dep in job.depends_on:  # its own slot after the predecessor's
                assert job.deadline - deadline[dep] >= own - 1e-3
        assert any(job.depends_on for job in jobs.jobs)


@pytest.mark.parametrize("source", ["lab", "c3o", "scout", "cherrypick"])
def test_in_the_simulator_perfect_knowledge_meets_every_deadline(
    traces: dict[str, tuple[JobSet, Path]], catalog: Catalog, source: str
) -> None:
    """The trace's start-up is the simulator's, and a chained job's slot starts at its
    predecessor's deadline, so per-job choices with perfect knowledge (and no preemptions)
    meet every deadline, chained ones included, within budget."""
    jobs = traces[source][0]
    assert SETTINGS.startup_s == SimulationSettings().startup_s
    result = simulate(jobs, catalog, "oracle", SimulationSettings(preemption_multiplier=0.0))
    assert result.summary.attainment == 1.0
    assert result.summary.budget_overrun_usd == 0.0


def test_the_mix_of_tiers_accounts_checkpoints_and_chains(
    traces: dict[str, tuple[JobSet, Path]],
) -> None:
    jobs = [j for trace, _ in traces.values() for j in trace.jobs]
    shares = {t: sum(j.tier == t for j in jobs) / len(jobs) for t in ("P0", "P1", "P2", "P3")}
    for tier, share in SETTINGS.tiers:
        assert shares[tier] == pytest.approx(share, abs=0.06)
    assert {j.account for j in jobs} == {a for a, _ in SETTINGS.accounts}
    assert 0.2 < sum(j.checkpoint is not None for j in jobs) / len(jobs) < 0.4
    by_id = {(id(t), j.job_id): j for t, _ in traces.values() for j in t.jobs}
    for trace, _ in traces.values():
        for job in trace.jobs:
            for dep in job.depends_on:
                head = by_id[(id(trace), dep)]
                assert head.submit <= job.submit and (head.account, head.tier) == (
                    job.account,
                    job.tier,
                )


def test_budgets_fit_the_cheapest_shapes_and_bind_costlier_provisioning(
    traces: dict[str, tuple[JobSet, Path]], catalog: Catalog
) -> None:
    for source, (jobs, _) in traces.items():
        for budget in jobs.budgets:
            mine = [j for j in jobs.jobs if j.account == budget.name]
            least = sum(cheapest_cost(j, catalog, SETTINGS.startup_s) for j in mine)
            assert budget.usd == pytest.approx(SETTINGS.budget_headroom * least, abs=1e-3)
            assert sum(_dearest(j, catalog) for j in mine) > budget.usd
            static = sum(static_cost(j, catalog, SETTINGS.startup_s) for j in mine)
            # the lab's two node types: static's lower median is the cheaper one
            assert static > budget.usd if source != "lab" else static <= budget.usd
            assert budget.period_s >= max(float(j.deadline or 0.0) for j in jobs.jobs)


def _dearest(job: JobRequest, catalog: Catalog) -> float:
    """The job on its most expensive shape, on demand, at its true runtime and start-up."""

    def cost(key: str) -> float:
        shape = Shape.parse(key)
        hourly = min(o.on_demand_usd_h for o in catalog.offers(shape.instance_type))
        return hourly * shape.nodes * (float(job.shapes[key].true_s or 0) + SETTINGS.startup_s)

    return max(cost(k) for k in job.shapes) / 3600.0


def test_a_seed_fixes_the_trace_and_another_seed_replays_the_same_truth(
    mapping_db: Callable[[str], Path], catalog: Catalog, tmp_path: Path
) -> None:
    db = mapping_db("cherrypick")
    files = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        jobs = trace_for("cherrypick", catalog, TraceSettings(seed=seed, min_jobs=50), db=db)
        files.append(tmp_path / f"{name}.json")
        write_jobs(files[-1], jobs.jobs, jobs.budgets, jobs.source)
    a, b, c = (f.read_bytes() for f in files)
    assert a == b and a != c
    truth = [
        sorted((j["labels"]["point"], json.dumps(j["shapes"])) for j in json.loads(x)["jobs"])
        for x in (a, c)
    ]
    assert truth[0] == truth[1]


def test_bad_settings_and_unknown_types_are_named(catalog: Catalog) -> None:
    point = Point("p", {"m4.large x2": Estimate(10, 5, 20, 9.0), "z9.huge x1": Estimate(1, 1, 1)})
    with pytest.raises(ConfigError, match=r"z9\.huge"):
        build_trace([point], catalog, SETTINGS, "t")
    with pytest.raises(ConfigError, match="slack must be at least 1"):
        build_trace([point], catalog, TraceSettings(slack=0.9), "t")
    with pytest.raises(ConfigError, match="nothing to replay"):
        build_trace([], catalog, SETTINGS, "t")
    with pytest.raises(ConfigError, match="unknown trace source 'alibaba'"):
        trace_for("alibaba", catalog, SETTINGS)
    with pytest.raises(ConfigError, match="--workspace is for the lab"):
        trace_for("scout", catalog, SETTINGS, workspace=Path("elsewhere"))


def test_cli_writes_a_trace_the_scheduler_reads(
    mapping_db: Callable[[str], Path], catalog: Catalog, tmp_path: Path
) -> None:
    out = tmp_path / "cp.json"
    db = mapping_db("cherrypick")
    args = ["eval", "trace", "--source", "cherrypick", "--db", str(db), "--out", str(out)]
    result = runner.invoke(app, [*args, "--min-jobs", "40", "--slack", "2", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    jobs = read_jobs(out, catalog)
    assert summary["jobs"] == len(jobs.jobs) >= 40
    assert "slack 2.0" in jobs.source
    bad = runner.invoke(app, [*args, "--slack", "0.5"])
    assert bad.exit_code == EXIT_USER_ERROR and "slack must be at least 1" in bad.output


# what a generated catalog holds for CherryPick: a node-type fact and a history feature that
# reads the job's outcomes on the other configurations (the grouped folds hide the priced one's)
GENERATED = [
    FeatureSpec(
        name="node_vcpus_total",
        category="static-config",
        sql=(
            "SELECT r.run_id, c.num_workers * c.vcpu_per_node AS value FROM runs AS r "
            "JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id"
        ),
    ),
    FeatureSpec(
        name="job_elsewhere_median_s",
        category="history",
        sql=(
            "SELECT t.run_id, median(h.duration_s) AS value FROM runs AS t "
            "LEFT JOIN runs AS h ON h.job_id = t.job_id AND h.status = 'SUCCEEDED' "
            "AND h.cluster_config_id <> t.cluster_config_id GROUP BY t.run_id"
        ),
    ),
]


def test_a_generated_catalog_prices_the_trace_as_configuration_choice_does(
    mapping_db: Callable[[str], Path],
) -> None:
    """The trace's p50 and 90 % bound per shape are the configuration-choice options of the
    generated catalog (its values computed with the priced configuration hidden), not the raw
    columns' ones."""
    db = mapping_db("cherrypick")
    (options,) = generated_choice_options(db, GENERATED, {"generated": {}}).values()
    expected = points_from_options(options, config_shapes(db))
    points = source_points("cherrypick", db, generated=GENERATED)
    assert [p.name for p in points] == [p.name for p in expected]
    for got, want in zip(points, expected, strict=True):
        assert got.shapes.keys() == want.shapes.keys()
        for key, estimate in got.shapes.items():
            assert estimate.p50_s == pytest.approx(want.shapes[key].p50_s)
            assert estimate.high_s == pytest.approx(want.shapes[key].high_s)
            assert estimate.true_s == want.shapes[key].true_s
            assert estimate.high99_s is not None and estimate.high99_s >= estimate.high_s
    raw = source_points("cherrypick", db)
    assert [e.p50_s for p in raw for e in p.shapes.values()] != [
        e.p50_s for p in points for e in p.shapes.values()
    ]
    with pytest.raises(ConfigError, match="--generated is for third-party sources"):
        source_points("lab", db, generated=GENERATED)


def test_cli_prices_a_trace_with_a_run_directory_s_catalog(
    mapping_db: Callable[[str], Path], catalog: Catalog, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    save_catalog(run_dir / "features", list(GENERATED))
    out = tmp_path / "cp.json"
    db = mapping_db("cherrypick")
    args = ["eval", "trace", "--source", "cherrypick", "--db", str(db), "--out", str(out)]
    result = runner.invoke(app, [*args, "--min-jobs", "40", "--generated", str(run_dir)])
    assert result.exit_code == 0, result.output
    jobs = read_jobs(out, catalog)
    assert jobs.source.startswith("cherrypick, generated (2 features)")
    missing = runner.invoke(app, [*args, "--generated", str(tmp_path / "nowhere")])
    assert missing.exit_code == EXIT_USER_ERROR and "nowhere" in missing.output
