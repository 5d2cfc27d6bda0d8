"""The planner: which shape, region and market it picks, and why, on the shipped catalog.

Offers come from the shipped instance catalog (``load_catalog()``): AWS us-east-1 m4.xlarge
at $0.215/h on demand (ec2instances.info 2017-03) and $0.0946/h spot (Spot Advisor savings),
Azure Databricks Jobs Compute GPU nodes. Where a test needs spot risk, it raises the offer's
interruption rate (the catalog's, from the Spot Advisor's monthly classes, is ~1e-4 per
node-hour: real spot barely ever loses a one-hour job) and says which behaviour it shows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.errors import ConfigError, ScheduleError
from autofe.scheduler.catalog import Catalog, Offer, load_catalog
from autofe.scheduler.duration import p_within
from autofe.scheduler.jobfile import JobSet, read_jobs
from autofe.scheduler.jobs import Checkpointing, Estimate, JobRequest, Plan, Tier
from autofe.scheduler.plan import (
    PlanSettings,
    candidates,
    plan_job,
    plan_jobs,
    rank_jobs,
    rank_plans,
    simulate_spot,
)

H = 3600.0
REAL = load_catalog()


def _offer(instance_type: str, region: str) -> Offer:
    return next(o for o in REAL.offers(instance_type) if o.region == region)


M4_EAST = _offer("m4.xlarge", "us-east-1")
A100_X8 = _offer("Standard_ND96asr_A100_v4", "westus2")  # 8 × A100, VM + DBU per hour
T4 = _offer("Standard_NC4as_T4_v3", "westus2")  # 1 × T4


C4_NO_SPOT = replace(_offer("c4.xlarge", "us-east-1"), spot_usd_h=None)  # a market without spot


def m4(rate_per_h: float, region: str = "us-east-1") -> Offer:
    """The real m4.xlarge offer with a chosen interruption rate (and region label)."""
    return replace(M4_EAST, interruptions_per_h=rate_per_h, region=region)


def etl(deadline_h: float | None, tier: Tier = "P2") -> JobRequest:
    """A one-hour ETL on four m4.xlarge (90 % interval 42 min to 1.5 h)."""
    shapes = {"m4.xlarge x4": Estimate(H, 0.7 * H, 1.5 * H)}
    deadline = None if deadline_h is None else deadline_h * H
    return JobRequest("etl", 0.0, shapes, tier=tier, deadline=deadline)


def market(plan: Plan) -> str:
    return plan.placement.market


def test_every_shape_offer_and_market_is_a_candidate() -> None:
    cat = Catalog(
        [
            m4(0.05),
            m4(0.05, "us-west-2"),
            replace(_offer("c4.xlarge", "us-east-1"), spot_usd_h=None),
        ]
    )
    job = JobRequest(
        "j", 0.0, {"m4.xlarge x4": Estimate(H, H, H), "c4.xlarge x2": Estimate(H, H, H)}
    )
    found = [(c.shape.key, c.offer.region, c.market) for c in candidates(job, cat)]
    assert found == [
        ("c4.xlarge x2", "us-east-1", "on-demand"),  # no spot price: on-demand only
        ("m4.xlarge x4", "us-east-1", "on-demand"),
        ("m4.xlarge x4", "us-east-1", "spot"),
        ("m4.xlarge x4", "us-west-2", "on-demand"),
        ("m4.xlarge x4", "us-west-2", "spot"),
    ]
    assert len(rank_plans(job, cat, 0.0)) == 5


def test_on_the_real_catalog_the_cheapest_spot_region_wins() -> None:
    # Spot Advisor rates are ~1e-4 per node-hour: even a P1 deadline 1.9 h away is safe on
    # spot, so the planner takes the region selling m4.xlarge spot cheapest.
    plan = plan_job(etl(1.9, "P1"), REAL, 0.0)
    cheapest = REAL.cheapest_offer("m4.xlarge", "spot")
    assert cheapest is not None
    assert (plan.placement.region, market(plan)) == (cheapest.region, "spot")
    assert plan.p_deadline >= 0.95
    assert plan.expected_preemptions < 0.01
    assert len(rank_plans(etl(1.9), REAL, 0.0)) == 2 * len(REAL.offers("m4.xlarge"))


def test_spot_when_cheap_and_the_deadline_has_slack() -> None:
    # A volatile pool (0.05 preemptions per node-hour) still loses to nothing with 8 h of slack.
    plan = plan_job(etl(8), Catalog([m4(0.05)]), 0.0)
    assert market(plan) == "spot"
    assert plan.p_deadline == 1.0
    assert plan.placement.fallback_after == 2
    assert plan.hourly_usd == pytest.approx(4 * (M4_EAST.spot_usd_h or 0.0))
    on_demand = next(p for p in rank_plans(etl(8), Catalog([m4(0.05)]), 0.0) if market(p) != "spot")
    assert plan.expected_cost_usd < 0.6 * on_demand.expected_cost_usd


def test_on_demand_when_the_deadline_is_tight() -> None:
    # Same job, same pool: with 1 h 54 min to go a preemption costs the deadline too often.
    plans = rank_plans(etl(1.9, tier="P1"), Catalog([m4(0.05)]), 0.0)
    spot = next(p for p in plans if market(p) == "spot")
    assert market(plans[0]) == "on-demand"
    assert plans[0].p_deadline >= 0.95 > spot.p_deadline
    assert spot.expected_cost_usd < plans[0].expected_cost_usd


def test_the_tier_target_decides_between_them() -> None:
    # Between the P2 (0.90) and P1 (0.95) targets: P2 takes the cheap risk, P1 does not.
    cat = Catalog([m4(0.05)])
    p2, p1 = plan_job(etl(1.9, "P2"), cat, 0.0), plan_job(etl(1.9, "P1"), cat, 0.0)
    assert 0.90 <= rank_plans(etl(1.9, "P2"), cat, 0.0)[0].p_deadline < 0.95
    assert (market(p2), market(p1)) == ("spot", "on-demand")


def test_on_demand_when_interruptions_are_frequent() -> None:
    # Sweep the rate with the sensitivity multiplier: work lost to preemptions (and two
    # start-ups before the fallback) outweighs the spot discount somewhere along the way.
    cat = Catalog([m4(0.05)])
    chosen = {
        mult: market(plan_job(etl(8), cat, 0.0, PlanSettings(preemption_multiplier=mult)))
        for mult in (0.0, 1.0, 20.0, 50.0)
    }
    assert chosen == {0.0: "spot", 1.0: "spot", 20.0: "on-demand", 50.0: "on-demand"}
    busy = rank_plans(etl(8), cat, 0.0, PlanSettings(preemption_multiplier=50.0))
    assert next(p for p in busy if market(p) == "spot").expected_preemptions > 1.9


def test_checkpointing_makes_spot_viable_for_a_long_job() -> None:
    # Ten hours on eight nodes, 20 h deadline: without checkpoints each preemption throws
    # away hours of work; with a checkpoint every 30 min it loses at most 30 min.
    shapes = {"m4.xlarge x8": Estimate(10 * H, 7 * H, 14 * H)}
    cat = Catalog([m4(0.02)])
    plain = JobRequest("train", 0.0, shapes, deadline=20 * H)
    saving = JobRequest(
        "train", 0.0, shapes, deadline=20 * H, checkpoint=Checkpointing(1800, 60, 300)
    )
    assert market(plan_job(plain, cat, 0.0)) == "on-demand"
    chosen = plan_job(saving, cat, 0.0)
    assert market(chosen) == "spot"
    assert chosen.expected_preemptions > 1.0
    assert chosen.p_deadline >= 0.9


def test_p_deadline_matches_the_closed_form_without_preemptions() -> None:
    # On-demand, no checkpoints: finish = start + start-up + duration, a shifted log-normal.
    settings = PlanSettings(samples=4000, startup_s=300.0)
    job = etl(1.25)
    plan = next(
        p for p in rank_plans(job, Catalog([m4(0.05)]), 600.0, settings) if market(p) != "spot"
    )
    expected = p_within(job.shapes["m4.xlarge x4"], 1.25 * H - 600.0 - 300.0)
    assert abs(plan.p_deadline - expected) < 4 * math.sqrt(expected * (1 - expected) / 4000)
    # and the cost: nodes × price × (start-up + mean of the log-normal)
    est = job.shapes["m4.xlarge x4"]
    mean_s = est.p50_s * math.exp(est.log_sigma**2 / 2)
    assert plan.expected_cost_usd == pytest.approx(
        4 * M4_EAST.on_demand_usd_h * (300 + mean_s) / H, rel=0.02
    )


def test_a_spot_pool_without_interruptions_finishes_like_on_demand() -> None:
    plans = rank_plans(etl(1.25), Catalog([m4(0.0)]), 0.0)
    assert [market(p) for p in plans] == ["spot", "on-demand"]
    assert plans[0].p_deadline == plans[1].p_deadline
    assert plans[0].expected_cost_usd / plans[1].expected_cost_usd == pytest.approx(
        (M4_EAST.spot_usd_h or 0.0) / M4_EAST.on_demand_usd_h
    )


def test_when_nothing_reaches_the_target_the_likeliest_is_chosen() -> None:
    plans = rank_plans(etl(1.0, "P0"), Catalog([m4(0.05)]), 0.0)
    assert plans[0].p_deadline < 0.99
    assert plans[0].p_deadline == max(p.p_deadline for p in plans)
    assert market(plans[0]) == "on-demand"


def _gpu_job(t4_speedup: float, deadline: float | None = None) -> JobRequest:
    """Training whose eight-A100 run is ``t4_speedup`` times faster than on eight T4 nodes."""
    t4 = Estimate(8 * H, 6 * H, 11 * H)
    a100 = Estimate(t4.p50_s / t4_speedup, t4.low_s / t4_speedup, t4.high_s / t4_speedup)
    shapes = {f"{T4.instance_type} x8": t4, f"{A100_X8.instance_type} x1": a100}
    return JobRequest("train-gpu", 0.0, shapes, tier="P1", deadline=deadline)


GPUS = Catalog([A100_X8, T4])


def test_a100_wins_exactly_when_its_speedup_outweighs_its_price() -> None:
    # Without start-up costs the break-even speed-up is the price ratio, 40.397 / (8 × 0.826).
    settings = PlanSettings(startup_s=0.0)
    ratio = A100_X8.on_demand_usd_h / (8 * T4.on_demand_usd_h)
    below = plan_job(_gpu_job(ratio * 0.99), GPUS, 0.0, settings)
    above = plan_job(_gpu_job(ratio * 1.01), GPUS, 0.0, settings)
    assert below.placement.shape.instance_type == T4.instance_type
    assert above.placement.shape.instance_type == A100_X8.instance_type
    # cost per unit of work: the same job costs the price ratio over the speed-up
    costs = {
        p.placement.shape.instance_type: p.expected_cost_usd
        for p in rank_plans(_gpu_job(3.0), GPUS, 0.0, settings)
    }
    assert costs[A100_X8.instance_type] / costs[T4.instance_type] == pytest.approx(ratio / 3.0)


def test_a_deadline_buys_the_faster_gpu_when_the_cheaper_one_is_too_slow() -> None:
    # A 3x speed-up is not worth its price, but the T4 fleet cannot make a 6 h deadline.
    assert plan_job(_gpu_job(3.0), GPUS, 0.0).placement.shape.instance_type == T4.instance_type
    rushed = plan_job(_gpu_job(3.0, deadline=6 * H), GPUS, 0.0)
    assert rushed.placement.shape.instance_type == A100_X8.instance_type
    assert rushed.p_deadline >= 0.95


def test_the_cheapest_region_wins_and_ties_break_stably() -> None:
    west = replace(m4(0.0, "us-west-2"), spot_usd_h=(M4_EAST.spot_usd_h or 0.0) - 0.01)
    plans = rank_plans(etl(8), Catalog([m4(0.0), west]), 0.0)
    assert (plans[0].placement.region, market(plans[0])) == ("us-west-2", "spot")
    twins = rank_plans(etl(8), Catalog([m4(0.0, "us-west-2"), m4(0.0)]), 0.0)
    assert [(p.placement.region, market(p)) for p in twins] == [
        ("us-east-1", "spot"),
        ("us-west-2", "spot"),
        ("us-east-1", "on-demand"),
        ("us-west-2", "on-demand"),
    ]


def test_plans_are_deterministic_for_a_seed() -> None:
    cat = Catalog([m4(0.05)])
    jobs = [etl(1.9), JobRequest("other", 0.0, {"m4.xlarge x2": Estimate(H, H / 2, 2 * H)})]
    assert plan_jobs(jobs, cat, 0.0) == plan_jobs(jobs, cat, 0.0)
    # a job's draws come from its id, not its position in the file
    assert plan_jobs(jobs[::-1], cat, 0.0)[::-1] == plan_jobs(jobs, cat, 0.0)
    other_seed = plan_jobs(jobs, cat, 0.0, PlanSettings(seed=1))
    assert other_seed[0].p50_s != plan_jobs(jobs, cat, 0.0)[0].p50_s


def test_a_job_waits_for_its_dependencies() -> None:
    # "report" takes ~30 min and is due 1.5 h from now; alone it is safe, after the
    # one-hour ETL it is not.
    report = JobRequest(
        "report",
        0.0,
        {"m4.xlarge x4": Estimate(H / 2, H / 3, H)},
        deadline=1.5 * H,
        depends_on=("etl",),
    )
    cat = Catalog([m4(0.0)])
    alone = plan_job(report, cat, 0.0)
    after = plan_jobs(JobSet((etl(None), report)), cat, 0.0)[1]
    assert alone.p_deadline > 0.99
    assert after.p_deadline < 0.5
    assert after.job_id == "report"


def test_an_unknown_instance_type_names_the_job() -> None:
    job = JobRequest("etl-7", 0.0, {"m9.huge x2": Estimate(H, H, H)})
    with pytest.raises(ScheduleError, match=r"job 'etl-7': unknown instance type 'm9.huge'"):
        plan_job(job, Catalog([m4(0.0)]), 0.0)


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="fallback_after"):
        PlanSettings(fallback_after=0)
    with pytest.raises(ConfigError, match="samples"):
        PlanSettings(samples=0)


def test_a_preempted_job_resumes_from_its_last_checkpoint() -> None:
    # 3 h of work, checkpoints every 30 min (60 s to write), preempted 6000 s into the
    # first attempt: three checkpoints were written, so 1.5 h of work remains, resumed
    # after a 300 s restore, with three more checkpoint writes.
    out = simulate_spot(
        np.array([3 * H]),
        rate_per_s=1.0,
        startup_s=120.0,
        checkpoint=Checkpointing(1800.0, 60.0, 300.0),
        gaps=np.array([[6000.0], [1e9]]),
    )
    assert out.preemptions.tolist() == [1.0]
    assert out.spot_paid_s.tolist() == [120 + 6000 + 120 + 300 + 5400 + 3 * 60]
    assert out.on_demand_paid_s.tolist() == [0.0]


def test_after_two_preemptions_the_rest_runs_on_demand() -> None:
    out = simulate_spot(
        np.array([H]),
        rate_per_s=1.0,
        startup_s=100.0,
        checkpoint=None,
        gaps=np.array([[600.0], [900.0]]),
    )
    assert out.preemptions.tolist() == [2.0]
    assert out.spot_paid_s.tolist() == [100 + 600 + 100 + 900]
    assert out.on_demand_paid_s.tolist() == [100 + H]  # the whole hour again: nothing saved
    assert out.elapsed_s.tolist() == [100 + 600 + 100 + 900 + 100 + H]


# ------------------------------------------------------------------ autofe schedule plan

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "schedule" / "jobs.json"
NOW = "2026-12-01T02:00:00Z"
runner = CliRunner()


def _plan_cli(*args: str) -> Result:
    return runner.invoke(app, ["schedule", "plan", *args])


def _expected() -> tuple[JobSet, list[list[Plan]]]:
    at = datetime.fromisoformat(NOW.replace("Z", "+00:00")).timestamp()
    jobs = read_jobs(EXAMPLE, REAL, now=at)
    return jobs, rank_jobs(jobs, REAL, at, PlanSettings(samples=200, seed=3))


def test_cli_prints_the_chosen_plan_per_job() -> None:
    result = _plan_cli("--jobs", str(EXAMPLE), "--now", NOW, "--samples", "200", "--seed", "3")
    assert result.exit_code == 0, result.output
    jobs, ranked = _expected()
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["job", "tier", "shape"]
    assert len(lines) == len(jobs.jobs) + 2
    for line, job, plans in zip(lines[1:], jobs.jobs, ranked, strict=False):
        chosen = plans[0].placement
        cells = line.split()
        assert cells[:5] == [
            job.job_id,
            job.tier,
            chosen.shape.instance_type,
            f"x{chosen.shape.nodes}",
            f"{chosen.cloud}/{chosen.region}",
        ]
        assert cells[5] == chosen.market
        assert float(cells[6]) == round(plans[0].expected_cost_usd, 2)
    total = sum(plans[0].expected_cost_usd for plans in ranked)
    assert lines[-1] == f"{len(jobs.jobs)} jobs, expected cost ${total:.2f}, planned at {NOW}"


def test_cli_json_lists_every_job_with_its_alternatives() -> None:
    args = ("--jobs", str(EXAMPLE), "--now", NOW, "--samples", "200", "--seed", "3", "--json")
    result = _plan_cli(*args)
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    jobs, ranked = _expected()
    assert [r["job_id"] for r in records] == [job.job_id for job in jobs.jobs]
    for record, job, plans in zip(records, jobs.jobs, ranked, strict=True):
        assert record["shape"] == plans[0].placement.shape.key
        assert record["market"] == plans[0].placement.market
        assert record["p_deadline"] == plans[0].p_deadline
        assert record["meets_target"] == (plans[0].p_deadline >= record["target"])
        assert len(record["alternatives"]) == len(candidates(job, REAL)) - 1
        assert [a["shape"] for a in record["alternatives"]] == [
            p.placement.shape.key for p in plans[1:]
        ]
    assert _plan_cli(*args).stdout == result.stdout  # same seed, same plans


def _broken(tmp_path: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    doc = json.loads(EXAMPLE.read_text())
    edit(doc)
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(doc))
    return path


def _by_id(doc: dict[str, Any], job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = next(j for j in doc["jobs"] if j["job_id"] == job_id)
    return job


CLI_ERRORS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "unknown instance type": (
        lambda d: _by_id(d, "grep-logs")["shapes"].update({"m5.24xlarge x2": {"p50_s": 60}}),
        "error: job 'grep-logs': unknown instance type 'm5.24xlarge': not in the instance catalog"
        f" ({len(REAL.instance_types())} types)",
    ),
    "negative budget": (
        lambda d: d["budgets"][1].update(usd=-150.0),
        "error: budget 'ml': negative budget -150.0 USD",
    ),
    "dependency cycle": (
        lambda d: _by_id(d, "sort-events").update(depends_on=["sgd-churn"]),
        "error: job 'sort-events': dependency cycle sort-events -> sgd-churn -> kmeans-segments"
        " -> sort-events",
    ),
    "deadline in the past": (
        lambda d: _by_id(d, "grep-logs").update(
            submit="2026-12-01T01:00:00Z", deadline="2026-12-01T01:30:00Z"
        ),
        "error: job 'grep-logs': deadline 2026-12-01T01:30:00Z is in the past"
        " (now 2026-12-01T02:00:00Z)",
    ),
}


@pytest.mark.parametrize("case", CLI_ERRORS)
def test_cli_bad_input_is_one_line_naming_the_job(tmp_path: Path, case: str) -> None:
    edit, message = CLI_ERRORS[case]
    result = _plan_cli("--jobs", str(_broken(tmp_path, edit)), "--now", NOW)
    assert result.exit_code == EXIT_USER_ERROR
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [message]


def test_cli_bad_now_and_catalog(tmp_path: Path) -> None:
    result = _plan_cli("--jobs", str(EXAMPLE), "--now", "tomorrow")
    assert result.exit_code == EXIT_USER_ERROR
    assert result.stderr.strip() == "error: --now 'tomorrow': not Unix seconds or an RFC 3339 time"
    missing = tmp_path / "prices.csv"
    result = _plan_cli("--jobs", str(EXAMPLE), "--now", NOW, "--catalog", str(missing))
    assert result.exit_code == EXIT_USER_ERROR
    assert result.stderr.startswith(f"error: {missing}: cannot read the instance catalog")
