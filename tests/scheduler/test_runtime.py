"""Runtime reactions: checkpoint resume, fallback after preemptions, deadline-aware upgrade.

Prices are the shipped catalog's (AWS us-east-1); spot risk is raised with the simulator's
preemption multiplier where a test needs preemptions to happen.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.jobfile import JobSet
from autofe.scheduler.jobs import Checkpointing, Estimate, JobRequest, Placement, Shape
from autofe.scheduler.plan import candidates
from autofe.scheduler.policies import REACTIVE, ChoiceContext, Policy, placement
from autofe.scheduler.report import LogEntry
from autofe.scheduler.runtime import (
    STATIC,
    Resume,
    RuntimePolicy,
    remaining_high_s,
    should_fall_back,
    upgrade_choice,
    wall_s,
)
from autofe.scheduler.simulate import SimulationSettings, simulate


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog().where("aws", "us-east-1")


def _fixed(shape: str, market: str, fallback_after: int | None = None) -> object:
    """A chooser that always picks ``shape`` in us-east-1 on ``market``."""

    def choose(job: JobRequest, now: float, ctx: ChoiceContext) -> Placement:
        for cand in candidates(job, ctx.catalog):
            if cand.shape.key == shape and cand.market == market:
                return placement(cand, fallback_after)
        raise AssertionError(shape)

    return choose


def _policy(
    name: str, shape: str, market: str, runtime: RuntimePolicy, after: int | None = None
) -> Policy:
    return Policy(name, _fixed(shape, market, after), runtime=runtime)  # type: ignore[arg-type]


def _entries(log: tuple[LogEntry, ...], job_id: str, kind: str) -> list[LogEntry]:
    return [e for e in log if e.job_id == job_id and e.kind == kind]


def test_remaining_work_converges_to_the_measured_speed() -> None:
    est = Estimate(1000.0, 800.0, 1300.0)
    # the job really needs 2000 s: after 60 % in 1200 s of work the rest is re-estimated
    late = remaining_high_s(est, 0.6, 0.6, 1200.0)
    assert late == pytest.approx(0.4 * (0.4 * 1300 + 0.6 * 2000))
    assert remaining_high_s(est, 1.0, 1.0, 2000.0) == 0.0
    assert remaining_high_s(est, 0.0, 0.0, 0.0) == 1300.0


def test_fallback_rules() -> None:
    spot = Placement(Shape("m4.xlarge", 4), "aws", "us-east-1", "spot", fallback_after=3)
    assert not should_fall_back(spot, 2, 7200.0, STATIC)
    assert should_fall_back(spot, 3, 7200.0, STATIC)
    hot = RuntimePolicy(fallback_rate_per_h=0.5)
    assert should_fall_back(spot, 2, 3600.0, hot) and not should_fall_back(spot, 2, 5 * 3600.0, hot)
    on_demand = Placement(Shape("m4.xlarge", 4), "aws", "us-east-1", "on-demand")
    assert not should_fall_back(on_demand, 9, 1.0, hot)


def test_upgrade_picks_the_cheapest_on_demand_run_that_still_meets_the_deadline(
    catalog: Catalog,
) -> None:
    job = JobRequest(
        "j",
        0.0,
        {
            "m4.xlarge x2": Estimate(3600.0, 3000.0, 4000.0),
            "m4.xlarge x8": Estimate(1000.0, 900.0, 1200.0),
            "m4.2xlarge x8": Estimate(600.0, 500.0, 700.0),
        },
        deadline=3000.0,
    )
    cands = candidates(job, catalog)
    current = next(c for c in cands if c.shape.key == "m4.xlarge x2" and c.market == "spot")
    resume = Resume(current, saved=0.25, startup_s=300.0)
    picked = upgrade_choice(1000.0, job.deadline, 4000.0, cands, resume, None)
    assert picked is not None and picked.market == "on-demand"
    # x8 needs 300 + 0.75 * 1200 = 1200 s (ends at 2200); cheaper than 2xlarge x8
    assert picked.shape.key == "m4.xlarge x8"
    assert upgrade_choice(1000.0, job.deadline, 2900.0, cands, resume, None) is None
    assert upgrade_choice(2500.0, job.deadline, 4000.0, cands, resume, None) is None


def test_wall_time_counts_checkpoint_writes() -> None:
    assert wall_s(3600.0, Checkpointing(600.0, 30.0)) == 3600.0 + 6 * 30.0


def _spot_job(checkpoint: Checkpointing | None, true_s: float = 1800.0) -> JobSet:
    est = Estimate(true_s, true_s * 0.8, true_s * 1.25, true_s)
    return JobSet((JobRequest("j", 0.0, {"m4.xlarge x4": est}, checkpoint=checkpoint),))


def _storm(catalog: Catalog, per_h: float, seed: int = 3) -> SimulationSettings:
    """Settings under which a 4-node m4.xlarge spot cluster is preempted ``per_h`` times an
    hour (the catalog's real rate, multiplied)."""
    real = catalog.offers("m4.xlarge")[0].interruptions_per_h * 4
    return SimulationSettings(seed=seed, preemption_multiplier=per_h / real)


def test_fallback_after_two_preemptions_finishes_on_demand(catalog: Catalog) -> None:
    policy = _policy("spot2", "m4.xlarge x4", "spot", STATIC, after=2)
    # 30 preemptions an hour: no 35-minute attempt survives on spot
    result = simulate(_spot_job(None), catalog, policy, _storm(catalog, 30.0))
    record = result.jobs[0]
    assert record.status == "done" and record.preemptions == 2 and record.fallbacks == 1
    assert record.placement.endswith("on-demand")
    kinds = [e.kind for e in result.log if e.kind in ("preempt", "fallback", "start")]
    assert kinds == ["start", "preempt", "start", "preempt", "fallback", "start"]
    never = _policy("spot", "m4.xlarge x4", "spot", STATIC)
    stays = simulate(_spot_job(None), catalog, never, _storm(catalog, 4.0)).jobs[0]
    assert stays.status == "done" and stays.preemptions >= 1 and stays.fallbacks == 0
    assert stays.placement.endswith("spot")


def test_a_measured_preemption_rate_triggers_the_fallback(catalog: Catalog) -> None:
    rate = _policy("rate", "m4.xlarge x4", "spot", RuntimePolicy(fallback_rate_per_h=0.5))
    result = simulate(_spot_job(None), catalog, rate, _storm(catalog, 30.0))
    record = result.jobs[0]
    assert record.fallbacks == 1 and record.preemptions == 1
    assert _entries(result.log, "j", "fallback")[0].t == _entries(result.log, "j", "preempt")[0].t


def test_a_preempted_checkpointing_job_resumes_from_its_last_checkpoint(catalog: Catalog) -> None:
    ckpt = Checkpointing(300.0, 20.0, 60.0)
    policy = _policy("spot", "m4.xlarge x4", "spot", STATIC)
    result = simulate(_spot_job(ckpt, 3600.0), catalog, policy, _storm(catalog, 6.0))
    assert result.jobs[0].status == "done" and result.jobs[0].preemptions >= 2
    for preempt in _entries(result.log, "j", "preempt"):
        saved = [e.saved for e in _entries(result.log, "j", "checkpoint") if e.t <= preempt.t]
        assert preempt.saved == (saved[-1] if saved else 0.0)
        assert preempt.saved <= preempt.progress < preempt.saved + 300.0 / 3600.0 + 1e-9
        restart = next(e for e in _entries(result.log, "j", "start") if e.t >= preempt.t)
        assert restart.progress == preempt.saved


def test_a_job_slower_than_predicted_is_upgraded_and_meets_its_deadline(catalog: Catalog) -> None:
    # predicted 1 h on m4.xlarge x2 but truly 3 h; deadline 2.5 h. The upgrade check sees the
    # progress lagging and moves it to m4.2xlarge x8 on-demand (predicted and truly fast).
    shapes = {
        "m4.xlarge x2": Estimate(3600.0, 3000.0, 4300.0, 3 * 3600.0),
        "m4.2xlarge x8": Estimate(1200.0, 1000.0, 1500.0, 2 * 1200.0),
    }
    job = JobRequest(
        "slow", 0.0, shapes, deadline=9000.0, checkpoint=Checkpointing(600.0, 10.0, 30.0)
    )
    jobs = JobSet((job,))
    upgraded = simulate(
        jobs, catalog, _policy("up", "m4.xlarge x2", "spot", REACTIVE), SimulationSettings()
    )
    record = upgraded.jobs[0]
    assert record.upgrades == 1 and record.placement.startswith("m4.2xlarge x8")
    assert record.end is not None and record.end <= 9000.0
    move = _entries(upgraded.log, "slow", "upgrade")[0]
    assert move.progress == move.saved > 0  # resumed from its last checkpoint
    stuck = simulate(
        jobs, catalog, _policy("no", "m4.xlarge x2", "spot", STATIC), SimulationSettings()
    )
    assert stuck.jobs[0].upgrades == 0 and (stuck.jobs[0].end or 0) > 9000.0


def test_a_job_preempted_too_often_is_given_up(catalog: Catalog) -> None:
    never = _policy("spot", "m4.xlarge x4", "spot", STATIC)
    settings = replace(_storm(catalog, 30.0), max_preemptions=3)
    result = simulate(_spot_job(None), catalog, never, settings)
    record = result.jobs[0]
    assert record.status == "failed" and record.preemptions == 3 and result.summary.failed == 1
    assert record.met_deadline is None and result.log[-1].kind == "fail"
