"""Invariants of the simulator over generated traces (hypothesis), on the shipped catalog's
real AWS us-east-1 prices: dependencies first, spend within hard caps, P0 never behind a
lower tier when it could start, resume from the last checkpoint, one seed one result.

Traces are small (≤ 6 jobs) and examples few, so the file runs in seconds.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autofe.scheduler.catalog import load_catalog
from autofe.scheduler.fleet import FleetSettings
from autofe.scheduler.jobfile import Budget, JobSet
from autofe.scheduler.jobs import TIERS, Checkpointing, Estimate, JobRequest
from autofe.scheduler.policies import POLICIES
from autofe.scheduler.report import SimulationResult
from autofe.scheduler.simulate import SimulationSettings, simulate

CATALOG = load_catalog().where("aws", "us-east-1")
SMALL = "m4.xlarge x2"
OTHERS = ("m4.xlarge x4", "c4.xlarge x8", "m4.2xlarge x4")
# preemption multipliers: the catalog's rates (about one preemption per 10^4 node-hours),
# and storms of roughly 1 and 8 preemptions an hour on a 4-node m4.xlarge cluster
STORMS = (1.0, 2300.0, 19000.0)
PROPERTY = settings(max_examples=40, deadline=None)


@st.composite
def estimates(draw: st.DrawFn) -> Estimate:
    p50 = float(draw(st.integers(60, 3600)))
    spread = draw(st.floats(1.05, 2.0))
    truth = p50 * draw(st.floats(0.5, 2.5))
    return Estimate(p50, p50 / spread, p50 * spread, truth)


@st.composite
def checkpoints(draw: st.DrawFn) -> Checkpointing | None:
    if not draw(st.booleans()):
        return None
    interval = float(draw(st.integers(60, 1200)))
    return Checkpointing(interval, float(draw(st.integers(0, 30))), float(draw(st.integers(0, 90))))


@st.composite
def jobs(draw: st.DrawFn, i: int, earlier: list[str], spread: int) -> JobRequest:
    # every job can run on 4 nodes when the spread is wide; bunched jobs may need 8
    small = [SMALL] if spread > 1000 else []
    keys = small + draw(
        st.lists(st.sampled_from(OTHERS), min_size=1 - len(small), max_size=3, unique=True)
    )
    submit = float(draw(st.integers(0, spread)))
    slack = draw(st.none() | st.integers(600, 20000))
    return JobRequest(
        job_id=f"j{i}",
        submit=submit,
        shapes={key: draw(estimates()) for key in keys},
        tier=draw(st.sampled_from(TIERS)),
        account=draw(st.sampled_from(("a", "b"))),
        deadline=None if slack is None else submit + slack,
        depends_on=tuple(draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True)))
        if earlier
        else (),
        checkpoint=draw(checkpoints()),
    )


@st.composite
def traces(draw: st.DrawFn, with_budgets: bool, spread: int = 4000) -> JobSet:
    """1–6 jobs submitted within ``spread`` seconds."""
    listed: list[JobRequest] = []
    for i in range(draw(st.integers(1, 6))):
        listed.append(draw(jobs(i, [j.job_id for j in listed], spread)))
    budgets: tuple[Budget, ...] = ()
    if with_budgets:
        budgets = tuple(
            Budget(name, draw(st.floats(0.02, 3.0)), draw(st.sampled_from((3600.0, 86400.0))))
            for name in draw(st.lists(st.sampled_from(("a", "b", "P3")), min_size=1, unique=True))
        )
    return JobSet(tuple(listed), budgets)


@st.composite
def worlds(draw: st.DrawFn, limits: tuple[int, ...] = (4, 8, 1_000_000)) -> SimulationSettings:
    fleet = FleetSettings(
        max_nodes=draw(st.sampled_from(limits)),
        idle_timeout_s=draw(st.sampled_from((0.0, 600.0, None))),
    )
    return SimulationSettings(
        seed=draw(st.integers(0, 5)),
        preemption_multiplier=draw(st.sampled_from(STORMS)),
        fleet=fleet,
        max_preemptions=20,
    )


def _run(trace: JobSet, policy: str, world: SimulationSettings) -> SimulationResult:
    return simulate(trace, CATALOG, policy, world)


@PROPERTY
@given(traces(with_budgets=True), st.sampled_from(tuple(POLICIES)), worlds())
def test_no_job_starts_before_its_dependencies_finish(
    trace: JobSet, policy: str, world: SimulationSettings
) -> None:
    records = {r.job_id: r for r in _run(trace, policy, world).jobs}
    for job in trace.jobs:
        record = records[job.job_id]
        for dep in (records[d] for d in job.depends_on):
            if record.first_start is not None:
                assert dep.status == "done" and dep.end is not None
                assert dep.end <= record.first_start
            if dep.status != "done":
                assert record.status == "cancelled" and record.first_start is None


@PROPERTY
@given(traces(with_budgets=True), st.sampled_from(tuple(POLICIES)), worlds())
def test_spend_never_exceeds_a_hard_cap(
    trace: JobSet, policy: str, world: SimulationSettings
) -> None:
    result = _run(trace, policy, world)
    for budget in trace.budgets:
        assert result.spend_by_budget.get(budget.name, 0.0) <= budget.usd + 1e-9
    assert result.summary.budget_overrun_usd <= 1e-9
    paid = sum(r.cost_usd for r in result.jobs) + result.summary.idle_cost_usd
    assert result.summary.total_cost_usd == pytest.approx(paid)


@settings(max_examples=80, deadline=None)
@given(
    traces(with_budgets=False, spread=900),
    st.sampled_from(tuple(p for p in POLICIES if POLICIES[p].order == "priority")),
    worlds(limits=(8, 12)),
)
def test_a_p0_job_never_waits_behind_a_lower_tier(
    trace: JobSet, policy: str, world: SimulationSettings
) -> None:
    """Whenever a lower-tier job starts, no P0 job is waiting in the queue: a P0 job that
    could not get nodes would have held every job behind it."""
    tier = {job.job_id: job.tier for job in trace.jobs}
    waiting: set[str] = set()
    for entry in _run(trace, policy, world).log:
        p0 = tier[entry.job_id] == "P0"
        if p0 and entry.kind in ("ready", "preempt", "upgrade"):
            waiting.add(entry.job_id)
        elif p0 and entry.kind in ("start", "fail", "cancel"):
            waiting.discard(entry.job_id)
        elif entry.kind == "start":
            assert not waiting, f"{entry.job_id} started at {entry.t} while {waiting} waited"


@PROPERTY
@given(
    traces(with_budgets=False),
    st.sampled_from(("autofe", "spot-only", "greedy", "oracle")),
    worlds(),
    checkpoints(),
)
def test_a_preempted_job_resumes_from_its_last_checkpoint(
    trace: JobSet, policy: str, world: SimulationSettings, default: Checkpointing | None
) -> None:
    """Work done never goes back past the last checkpoint: a preemption keeps it, and every
    restart (after a preemption, a fallback or an upgrade) begins exactly there."""
    every = tuple(replace(j, checkpoint=j.checkpoint or default) for j in trace.jobs)
    stormy = replace(world, preemption_multiplier=STORMS[-1])
    result = _run(replace(trace, jobs=every), policy, stormy)
    for job in every:
        saved = 0.0
        for entry in (e for e in result.log if e.job_id == job.job_id):
            assert entry.saved == saved or entry.kind == "checkpoint"
            if entry.kind == "checkpoint":
                assert job.checkpoint is not None and entry.saved > saved
                saved = entry.saved
            elif entry.kind == "preempt":
                assert entry.progress >= saved
            elif entry.kind in ("start", "upgrade"):
                assert entry.progress == saved


@settings(max_examples=15, deadline=None)
@given(traces(with_budgets=True), st.sampled_from(tuple(POLICIES)), worlds())
def test_a_seed_fixes_the_whole_simulation(
    trace: JobSet, policy: str, world: SimulationSettings
) -> None:
    assert _run(trace, policy, world) == _run(trace, policy, world)
