"""Every number of a jobs file or trace has a bound, and within the bounds every cost is finite.

Issue #27: a ``p50_s`` of 1e308 (finite, so it passed the reader) overflowed the planner's
Monte Carlo, a 500 under ``filterwarnings = error`` and a plan with ``expected_cost_usd: null``
in production. Out of bounds, the reader names the job and the field; at the bounds, the
planner and the simulator give finite numbers (``filterwarnings = error`` turns any numpy
overflow into a failure here).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.errors import ConfigError, ScheduleError
from autofe.scheduler.catalog import COLUMNS, Catalog, Offer, load_catalog
from autofe.scheduler.duration import durations_from_normals
from autofe.scheduler.jobfile import parse_jobs, read_jobs
from autofe.scheduler.jobs import Checkpointing, Estimate, JobRequest
from autofe.scheduler.plan import Draws, PlanSettings, candidates, price, simulate
from autofe.scheduler.simulate import SimulationSettings

M = 315_360_000.0
"""10 years of seconds: the documented bound (``docs/scheduler.md``, jobfile.MAX_SECONDS)."""
MAX_NODES = 100_000
MAX_USD = 1e9
MAX_CHECKPOINTS = 100_000
LAST_TIME = 253_402_300_799.0
"""9999-12-31T23:59:59Z."""
LONGEST_SAMPLE_S = 1e12
"""duration.LONGEST_SAMPLE_S: no sampled duration is longer."""
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "schedule" / "jobs.json"
NOW = "2026-12-01T02:00:00Z"
REAL = load_catalog()
runner = CliRunner()
HUGE = (
    "job 'sort-events': shape 'c4.2xlarge x2' p50_s: 1e+308 s is more than 10 years (315360000 s)"
)


def _example() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return doc


def _sort_events(doc: dict[str, Any]) -> dict[str, Any]:
    job: dict[str, Any] = next(j for j in doc["jobs"] if j["job_id"] == "sort-events")
    return job


def _huge(doc: dict[str, Any]) -> dict[str, Any]:
    """The example with the fuzzer's job: sort-events' first shape at 1e308 s."""
    _sort_events(doc)["shapes"]["c4.2xlarge x2"].update(p50_s=1e308, high_s=1e308)
    return doc


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _cli(*args: str) -> Result:
    return runner.invoke(app, ["schedule", *args])


# ------------------------------------------------------------------ refused, naming job and field


def test_the_reader_refuses_a_duration_of_1e308(tmp_path: Path) -> None:
    path = _write(tmp_path / "jobs.json", _huge(_example()))
    with pytest.raises(ScheduleError) as caught:
        read_jobs(path, REAL)
    assert str(caught.value) == HUGE
    assert caught.value.job_id == "sort-events"


def test_schedule_plan_refuses_it_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "jobs.json", _huge(_example()))
    result = _cli("plan", "--jobs", str(path), "--now", NOW, "--json")
    assert result.exit_code == EXIT_USER_ERROR
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [f"error: {HUGE}"]


def _job(**fields: Any) -> dict[str, Any]:
    return {
        "job_id": "etl-1",
        "submit": 0,
        "deadline": 7200,
        "shapes": {"m4.xlarge x4": {"p50_s": 900, "low_s": 700, "high_s": 1300}},
        **fields,
    }


def _shape(**estimate: Any) -> dict[str, Any]:
    return {"shapes": {"m4.xlarge x4": {"p50_s": 900, "low_s": 700, "high_s": 1300, **estimate}}}


SHAPE = "job 'etl-1': shape 'm4.xlarge x4'"
TEN_YEARS = "is more than 10 years (315360000 s)"
RANGE = "is not between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"
OUT_OF_BOUNDS: dict[str, tuple[dict[str, Any], str]] = {
    "p50_s 1e308": (_shape(p50_s=1e308, high_s=1e308), f"{SHAPE} p50_s: 1e+308 s {TEN_YEARS}"),
    "low_s under 1 ms": (
        _shape(low_s=1e-300),
        f"{SHAPE} low_s: 1e-300 s is less than 1 ms (0.001 s)",
    ),
    "high_s 1e308": (_shape(high_s=1e308), f"{SHAPE} high_s: 1e+308 s {TEN_YEARS}"),
    "high99_s a second past 10 years": (
        _shape(high99_s=M + 1),
        f"{SHAPE} high99_s: 315360001.0 s {TEN_YEARS}",
    ),
    "true_s 1e308": (_shape(true_s=1e308), f"{SHAPE} true_s: 1e+308 s {TEN_YEARS}"),
    "p50_s an integer no float holds": (
        _shape(p50_s=10**400),
        f"{SHAPE} p50_s must be a finite number, got an integer too large for a float",
    ),
    "one node too many": (
        {"shapes": {f"m4.xlarge x{MAX_NODES + 1}": {"p50_s": 60}}},
        "job 'etl-1': shape 'm4.xlarge x100001': 100001 nodes is more than 100000",
    ),
    "a node count of 5000 digits": (
        {"shapes": {"m4.xlarge x" + "9" * 5000: {"p50_s": 60}}},
        "job 'etl-1': shape 'm4.xlarge x" + "9" * 29 + "…" + "9" * 20 + "': more than 100000 nodes",
    ),
    "a superscript node count": (
        {"shapes": {"m4.xlarge x²": {"p50_s": 60}}},
        "job 'etl-1': unknown instance type 'm4.xlarge x²': not in the instance catalog",
    ),
    "checkpoint interval under a second": (
        {"checkpoint": {"interval_s": 0.5}},
        "job 'etl-1': checkpoint interval_s: 0.5 s is less than 1 s",
    ),
    "checkpoint write 1e308": (
        {"checkpoint": {"interval_s": 600, "write_s": 1e308}},
        f"job 'etl-1': checkpoint write_s: 1e+308 s {TEN_YEARS}",
    ),
    "checkpoint restore 1e308": (
        {"checkpoint": {"interval_s": 600, "restore_s": 1e308}},
        f"job 'etl-1': checkpoint restore_s: 1e+308 s {TEN_YEARS}",
    ),
    "a trace run writing too many checkpoints": (
        {"checkpoint": {"interval_s": 1}, **_shape(true_s=200_000)},
        "job 'etl-1': checkpoint interval_s: 1.0 s makes 200000 checkpoints in shape "
        "'m4.xlarge x4' (true_s 200000.0 s), more than 100000",
    ),
    "a trace run writing checkpoints for more than 10 years": (
        {"checkpoint": {"interval_s": 3600, "write_s": M / 10}, **_shape(true_s=40_000)},
        "job 'etl-1': checkpoint write_s: 11 writes of 31536000.0 s in shape 'm4.xlarge x4' "
        "(true_s 40000.0 s) take more than 10 years (315360000 s)",
    ),
    "deadline 1e308": (
        {"deadline": 1e308},
        f"job 'etl-1': deadline 1e+308 s {RANGE} (-62135596800 to 253402300799 s)",
    ),
    "submit after year 9999 by its offset": (
        {"submit": "9999-12-31T23:59:59-01:00", "deadline": None},
        f"job 'etl-1': submit '9999-12-31T23:59:59-01:00' {RANGE}",
    ),
    "deadline more than 10 years after submit": (
        {"deadline": M + 1},
        "job 'etl-1': deadline 315360001.0 is more than 10 years (315360000 s) after its "
        "submit time 0.0",
    ),
    "budget of 1e308 USD": (
        {"budgets": [{"name": "team-a", "usd": 1e308}]},
        "budget 'team-a' usd: 1e+308 USD is more than 1000000000 USD",
    ),
    "budget period of a minute": (
        {"budgets": [{"name": "team-a", "usd": 5, "period_s": 60}]},
        "budget 'team-a' period_s: 60.0 s is less than 1 hour (3600 s)",
    ),
    "budget period 1e308": (
        {"budgets": [{"name": "team-a", "usd": 5, "period_s": 1e308}]},
        f"budget 'team-a' period_s: 1e+308 s {TEN_YEARS}",
    ),
}


@pytest.mark.parametrize("case", OUT_OF_BOUNDS)
def test_each_number_out_of_bounds_is_named(case: str) -> None:
    fields, message = copy.deepcopy(OUT_OF_BOUNDS[case])
    budgets = fields.pop("budgets", [])
    doc = {"budgets": budgets, "jobs": [_job(**fields)]}
    with pytest.raises(ScheduleError) as caught:
        parse_jobs(doc, REAL)
    assert str(caught.value).startswith(message)


def test_a_deadline_more_than_10_years_from_now() -> None:
    now = 1796090400.0  # 2026-12-01T02:00:00Z
    doc = {"jobs": [_job(deadline=now + M + 1)]}
    with pytest.raises(ScheduleError) as caught:
        parse_jobs(doc, REAL, now=now)
    assert str(caught.value) == (
        "job 'etl-1': deadline 2036-11-28T02:00:01Z is more than 10 years (315360000 s) after "
        "now (2026-12-01T02:00:00Z)"
    )


def test_files_json_reads_badly_are_refused_as_files(tmp_path: Path) -> None:
    digits = tmp_path / "digits.json"
    digits.write_text('{"jobs": [{"job_id": "a", "submit": ' + "9" * 5000 + "}]}")
    with pytest.raises(ScheduleError, match=r"digits\.json: cannot be read as JSON \(Exceeds"):
        read_jobs(digits)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScheduleError, match=r"deep\.json: cannot be read as JSON \(nested too"):
        read_jobs(deep)
    result = _cli("submit", "--jobs", str(digits), "--home", str(tmp_path / "home"))
    assert result.exit_code == EXIT_USER_ERROR and "Traceback" not in result.output


def test_now_out_of_range_is_refused() -> None:
    for now in ("1e308", "nan"):
        result = _cli("plan", "--jobs", str(EXAMPLE), "--now", now)
        assert result.exit_code == EXIT_USER_ERROR
        assert result.stderr.splitlines() == [
            f"error: --now {now!r}: not a time between 0001-01-01T00:00:00Z and "
            "9999-12-31T23:59:59Z"
        ]


def test_settings_out_of_bounds() -> None:
    with pytest.raises(ConfigError, match="samples must be 1 to 1000000, got 1000000000"):
        PlanSettings(samples=10**9)
    with pytest.raises(ConfigError, match="preemption_multiplier must be 0 to 1e"):
        PlanSettings(preemption_multiplier=1e308)
    with pytest.raises(ConfigError, match=r"startup_s must be 0 to 315360000 s \(10 years\)"):
        PlanSettings(startup_by_cloud={"gcp": 1e308})
    with pytest.raises(ConfigError, match=r"noise_sigma at most 10; got 300.0, 1.0, 1000.0"):
        SimulationSettings(noise_sigma=1e3)


def _catalog_csv(path: Path, **cells: str) -> Path:
    row = {
        "cloud": "aws",
        "region": "us-east-1",
        "instance_type": "m4.xlarge",
        "vcpus": "4",
        "memory_gib": "16.0",
        "gpu_type": "",
        "gpu_count": "0",
        "on_demand_usd_h": "0.215",
        "spot_usd_h": "0.0946",
        "interruptions_per_h": "0.0001",
        "interruption_class": "5-10%",
        "source": "test",
        **cells,
    }
    path.write_text(",".join(COLUMNS) + "\n" + ",".join(row[c] for c in COLUMNS) + "\n")
    return path


def test_a_catalog_price_past_its_bound_is_refused(tmp_path: Path) -> None:
    path = _catalog_csv(tmp_path / "prices.csv", on_demand_usd_h="1e308")
    with pytest.raises(
        ConfigError, match=r"prices\.csv:2: column on_demand_usd_h: '1e308' is more than 1e\+06$"
    ):
        load_catalog(path)
    path = _catalog_csv(tmp_path / "prices.csv", interruptions_per_h="3601")
    with pytest.raises(ConfigError, match=r"column interruptions_per_h: '3601' is more than 3600"):
        load_catalog(path)


# ------------------------------------------------------------------ at the bounds: finite


def _at_the_bounds(true_s: bool = False) -> dict[str, Any]:
    """Jobs with every number at a bound: the longest, widest and most skewed estimates
    allowed, on 100,000 nodes, with the longest checkpoint writes, deadline and budget."""
    top = {"p50_s": M, "low_s": M, "high_s": M, "high99_s": M}
    tail = {"p50_s": 0.001, "low_s": 0.001, "high_s": 0.001, "high99_s": M}
    wide = {"p50_s": 0.001, "low_s": 0.001, "high_s": M}
    nodes = f"x{MAX_NODES}"
    jobs = []
    for name, est in (("top", top), ("tail", tail), ("wide", wide)):
        shape = {**est, "true_s": M} if true_s else est
        jobs.append(
            {
                "job_id": f"at-bound-{name}",
                "submit": 0,
                "deadline": M,
                "tier": "P0",
                "shapes": {f"m4.xlarge {nodes}": shape, f"n2-standard-8 {nodes}": shape},
                # a trace's run: at most MAX_CHECKPOINTS writes, taking 10 years in all
                "checkpoint": {"interval_s": 3200, "write_s": 3200, "restore_s": M}
                if true_s
                else {"interval_s": 1, "write_s": M, "restore_s": M},
            }
        )
    jobs.append(
        {
            "job_id": "at-the-last-time",
            "submit": LAST_TIME - M,
            "deadline": LAST_TIME,
            "shapes": {"m4.xlarge x1": {**top, "true_s": M} if true_s else top},
        }
    )
    budgets = [{"name": "default", "usd": MAX_USD, "period_s": 3600}]
    return {"budgets": budgets, "jobs": jobs}


def _finite(record: dict[str, Any]) -> None:
    for key in ("expected_cost_usd", "p50_s", "high_s", "expected_preemptions", "p_deadline"):
        value = record[key]
        assert isinstance(value, float) and math.isfinite(value), (record["job_id"], key, value)


def test_a_jobs_file_at_every_bound_plans_with_finite_costs(tmp_path: Path) -> None:
    path = _write(tmp_path / "jobs.json", _at_the_bounds())
    result = _cli("plan", "--jobs", str(path), "--now", "0", "--json", "--samples", "20000")
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert [r["job_id"] for r in records] == [j["job_id"] for j in _at_the_bounds()["jobs"]]
    for record in records:
        _finite(record)
        assert record["alternatives"]
        for alternative in record["alternatives"]:
            _finite(alternative)
    text = _cli("plan", "--jobs", str(path), "--now", "0")
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[-1].startswith("4 jobs, expected cost $")


def _offers(usd_h: float | None, interruptions_per_h: float) -> Catalog:
    """The shipped m4.xlarge offers, at ``usd_h`` in both markets (None: as shipped)."""
    offers: list[Offer] = []
    for offer in REAL.offers("m4.xlarge"):
        on_demand, spot = (
            (offer.on_demand_usd_h, offer.spot_usd_h) if usd_h is None else (usd_h, usd_h)
        )
        offers.append(
            replace(
                offer,
                on_demand_usd_h=on_demand,
                spot_usd_h=spot,
                interruptions_per_h=interruptions_per_h,
            )
        )
    return Catalog(offers)


STORMY = _offers(1e6, 3600.0)
"""m4.xlarge at the catalog's bounds: 1e6 USD per node-hour, an interruption a second."""
CALM = _offers(None, 1e-310)
"""m4.xlarge with an interruption rate so low the next one is beyond any float."""


@pytest.mark.parametrize(("catalog", "multiplier"), [(STORMY, 1e6), (CALM, 1.0)])
def test_no_draw_makes_a_duration_or_a_cost_overflow(catalog: Catalog, multiplier: float) -> None:
    """The widest tail the reader allows, under draws no sampler would give: each sample is
    clipped at LONGEST_SAMPLE_S, so costs stay finite on any catalog within its bounds."""
    tail = Estimate(0.001, 0.001, 0.001, high99_s=M)
    z = np.array([-1e6, -40.0, 0.0, 3.0, 40.0, 1e6])
    durations = durations_from_normals(tail, z)
    assert np.all(np.isfinite(durations))
    assert durations.max() == pytest.approx(LONGEST_SAMPLE_S, rel=1e-12)
    shape = f"m4.xlarge x{MAX_NODES}"
    job = JobRequest("tail", 0.0, {shape: tail}, checkpoint=Checkpointing(1.0, M, M))
    settings = PlanSettings(samples=len(z), preemption_multiplier=multiplier)
    draws = Draws(z, np.array([[1e-300] * len(z), [50.0] * len(z)]))
    for candidate in candidates(job, catalog):
        outcome = simulate(candidate, draws, job, settings)
        plan = price(candidate, outcome, job, np.zeros(len(z)), settings)
        assert math.isfinite(plan.expected_cost_usd) and math.isfinite(plan.high_s)


def test_a_trace_at_every_bound_simulates_with_finite_costs(tmp_path: Path) -> None:
    # 98,550 checkpoints (MAX_CHECKPOINTS is 100,000) whose writes take exactly 10 years
    assert 3200 * math.floor(M / 3200) == M and M / 3200 < MAX_CHECKPOINTS
    trace = _write(tmp_path / "trace.json", _at_the_bounds(true_s=True))
    args = ("--policy", "static", "--budget-mode", "off", "--json")
    result = _cli("simulate", "--trace", str(trace), *args)
    assert result.exit_code == 0, result.output
    (static,) = json.loads(result.stdout)
    assert static["summary"]["done"] == 4
    cost = static["summary"]["total_cost_usd"]
    assert isinstance(cost, float) and math.isfinite(cost) and cost > 0


def test_schedule_simulate_refuses_a_trace_of_1e308(tmp_path: Path) -> None:
    doc = _at_the_bounds(true_s=True)
    doc["jobs"][0]["shapes"]["m4.xlarge x100000"]["true_s"] = 1e308
    trace = _write(tmp_path / "trace.json", doc)
    result = _cli("simulate", "--trace", str(trace), "--policy", "static")
    assert result.exit_code == EXIT_USER_ERROR
    assert result.stderr.splitlines() == [
        f"error: job 'at-bound-top': shape 'm4.xlarge x100000' true_s: 1e+308 s {TEN_YEARS}"
    ]
