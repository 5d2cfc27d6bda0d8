"""Configuration choice: the cheapest shape × offer × market that meets the job's deadline.

Every candidate (each shape the model estimated × each cloud region offering its instance
type × on-demand, and spot where offered) is priced by a seeded Monte Carlo of the job's
completion: start-up, the duration drawn from the model's interval, spot preemptions as a
Poisson process over the cluster's nodes, work lost since the last checkpoint, restore and a
new start-up per preemption, and the move to on-demand after ``fallback_after`` preemptions.
Each shape carries its own estimate, so a fast expensive GPU and a slow cheap one are
compared by what the *job* costs on each (cost per unit of work), not by their labels.

All candidates of a job share the same random draws (common random numbers): a choice between
two candidates reflects their prices, speeds and risks, not sampling noise. The planner assumes
capacity is there when the job starts; queueing and budgets are the queue's concern.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from graphlib import TopologicalSorter

import numpy as np

from autofe.errors import ConfigError
from autofe.scheduler.catalog import Catalog, Offer
from autofe.scheduler.duration import FloatArray, durations_from_normals
from autofe.scheduler.jobfile import MAX_SECONDS, JobSet, check_dependencies
from autofe.scheduler.jobs import (
    MARKETS,
    Checkpointing,
    Estimate,
    JobRequest,
    Market,
    Placement,
    Plan,
    Shape,
)

DEFAULT_TARGETS: Mapping[str, float] = {"P0": 0.99, "P1": 0.95, "P2": 0.90, "P3": 0.80}
MAX_SAMPLES = 1_000_000
"""The most Monte Carlo samples per job (a few arrays of that many floats per candidate)."""
MAX_PREEMPTION_MULTIPLIER = 1e6
"""The largest scale of interruption rates (tests and studies go to 19,000)."""


@dataclass(frozen=True)
class PlanSettings:
    """How the planner prices candidates.

    Args:
        samples: Monte Carlo samples per job (shared by all its candidates).
        seed: makes every plan reproducible; each job draws from (seed, its id).
        startup_s: seconds from asking for a cluster to running on it (paid, not working).
        startup_by_cloud: per-cloud override of ``startup_s``.
        preemption_multiplier: scales every offer's interruption rate (sensitivity studies).
        fallback_after: spot preemptions after which the rest of the job runs on-demand.
        targets: P(deadline) each tier must reach; below it, a cheaper candidate is not taken.
        high_quantile: the completion-time quantile reported as a plan's ``high_s``.
    """

    samples: int = 400
    seed: int = 0
    startup_s: float = 300.0
    startup_by_cloud: Mapping[str, float] = field(default_factory=dict)
    preemption_multiplier: float = 1.0
    fallback_after: int = 2
    targets: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TARGETS))
    high_quantile: float = 0.95

    def __post_init__(self) -> None:
        if not 1 <= self.samples <= MAX_SAMPLES:
            raise ConfigError(
                f"plan settings: samples must be 1 to {MAX_SAMPLES}, got {self.samples}"
            )
        if self.fallback_after < 1:
            raise ConfigError(
                f"plan settings: fallback_after must be at least 1, got {self.fallback_after}"
            )
        if not 0 <= self.preemption_multiplier <= MAX_PREEMPTION_MULTIPLIER:
            raise ConfigError(
                f"plan settings: preemption_multiplier must be 0 to {MAX_PREEMPTION_MULTIPLIER:g}, "
                f"got {self.preemption_multiplier}"
            )
        startups = [self.startup_s, *self.startup_by_cloud.values()]
        if not all(0 <= s <= MAX_SECONDS for s in startups):
            raise ConfigError(
                f"plan settings: startup_s must be 0 to {MAX_SECONDS:.0f} s (10 years), "
                f"got {', '.join(map(str, startups))}"
            )

    def startup(self, cloud: str) -> float:
        """Start-up seconds in ``cloud``.

        >>> PlanSettings(startup_by_cloud={"gcp": 90.0}).startup("gcp")
        90.0
        """
        return self.startup_by_cloud.get(cloud, self.startup_s)

    def target(self, tier: str) -> float:
        """The P(deadline) a job of ``tier`` must reach (0.9 for a tier without a target)."""
        return self.targets.get(tier, 0.9)


@dataclass(frozen=True)
class Draws:
    """One job's random numbers: a standard normal per sample for its duration, and unit-rate
    exponential gaps (one row per spot attempt) for the time to the next preemption."""

    z: FloatArray
    gaps: FloatArray


@dataclass(frozen=True)
class Outcome:
    """Per sample: seconds from start to finish, and seconds paid in each market."""

    elapsed_s: FloatArray
    spot_paid_s: FloatArray
    on_demand_paid_s: FloatArray
    preemptions: FloatArray


@dataclass(frozen=True)
class ClusterOption:
    """One way to run a job: a shape (with its estimate) on one offer, in one market."""

    shape: Shape
    estimate: Estimate
    offer: Offer
    market: Market

    @property
    def order(self) -> tuple[Shape, str, str, int]:
        """The stable tie-break: shape, cloud, region, then on-demand before spot."""
        return (self.shape, self.offer.cloud, self.offer.region, MARKETS.index(self.market))


def plan_job(
    job: JobRequest, catalog: Catalog, now: float, settings: PlanSettings | None = None
) -> Plan:
    """The chosen plan for one job starting at ``max(now, job.submit)``.

    The cheapest expected cost among candidates whose P(deadline) reaches the tier's target;
    if none does, the most likely to meet the deadline (ties: cheaper).

    Raises:
        ScheduleError: a shape's instance type is not in the catalog (names the job).
    """
    return rank_plans(job, catalog, now, settings)[0]


def rank_plans(
    job: JobRequest, catalog: Catalog, now: float, settings: PlanSettings | None = None
) -> list[Plan]:
    """Every priced candidate of ``job``, best first (the first is :func:`plan_job`'s)."""
    settings = settings or PlanSettings()
    start = np.full(settings.samples, max(now, job.submit))
    return [plan for plan, _ in _ranked(job, catalog, start, settings)]


def plan_jobs(
    jobs: JobSet | Sequence[JobRequest],
    catalog: Catalog,
    now: float,
    settings: PlanSettings | None = None,
) -> list[Plan]:
    """Plans for a set of jobs, in their order; deterministic for ``settings.seed``."""
    return [ranked[0] for ranked in rank_jobs(jobs, catalog, now, settings)]


def rank_jobs(
    jobs: JobSet | Sequence[JobRequest],
    catalog: Catalog,
    now: float,
    settings: PlanSettings | None = None,
) -> list[list[Plan]]:
    """Every job's priced candidates, best first, in the jobs' order.

    A job starts when its dependencies finish: its start, sample by sample, is the latest of
    ``now``, its submit time and its dependencies' simulated finishes under their chosen plans,
    so P(deadline) counts the wait for upstream jobs.

    Raises:
        ScheduleError: an unknown dependency or instance type, or a cycle (names the job).
    """
    settings = settings or PlanSettings()
    listed = jobs.jobs if isinstance(jobs, JobSet) else tuple(jobs)
    check_dependencies(listed)
    by_id = {job.job_id: job for job in listed}
    finish: dict[str, FloatArray] = {}
    ranked: dict[str, list[Plan]] = {}
    for job_id in TopologicalSorter({j.job_id: j.depends_on for j in listed}).static_order():
        job = by_id[job_id]
        start = np.full(settings.samples, max(now, job.submit))
        for dep in job.depends_on:
            start = np.maximum(start, finish[dep])
        priced = _ranked(job, catalog, start, settings)
        ranked[job_id], finish[job_id] = [plan for plan, _ in priced], priced[0][1]
    return [ranked[job.job_id] for job in listed]


def plan_records(
    jobs: JobSet, catalog: Catalog, now: float, settings: PlanSettings
) -> list[dict[str, object]]:
    """One JSON object per job: its chosen plan, and every other candidate best first under
    ``"alternatives"`` (what ``schedule plan --json`` prints and a recommend API returns)."""
    records = []
    for job, plans in zip(jobs.jobs, rank_jobs(jobs, catalog, now, settings), strict=True):
        record = plan_record(plans[0], job, settings)
        record["alternatives"] = [plan_record(p, job, settings) for p in plans[1:]]
        records.append(record)
    return records


def plan_record(plan: Plan, job: JobRequest, settings: PlanSettings) -> dict[str, object]:
    """A plan as a JSON object: what ``schedule plan --json`` and the API print."""
    placement = plan.placement
    target = settings.target(job.tier)
    return {
        "job_id": plan.job_id,
        "tier": job.tier,
        "shape": placement.shape.key,
        "instance_type": placement.shape.instance_type,
        "nodes": placement.shape.nodes,
        "cloud": placement.cloud,
        "region": placement.region,
        "market": placement.market,
        "fallback_after": placement.fallback_after,
        "hourly_usd": round(plan.hourly_usd, 6),
        "expected_cost_usd": round(plan.expected_cost_usd, 6),
        "deadline": job.deadline,
        "p_deadline": plan.p_deadline,
        "target": target,
        "meets_target": plan.p_deadline >= target,
        "p50_s": round(plan.p50_s, 1),
        "high_s": round(plan.high_s, 1),
        "expected_preemptions": round(plan.expected_preemptions, 4),
    }


def candidates(job: JobRequest, catalog: Catalog) -> list[ClusterOption]:
    """Every shape × offer of its instance type × market the offer has, in a stable order."""
    found = []
    for key, estimate in sorted(job.shapes.items()):
        shape = Shape.parse(key)
        for offer in catalog.offers(shape.instance_type, job.job_id):
            for market in MARKETS:
                if market in job.markets and offer.price(market) is not None:
                    found.append(ClusterOption(shape, estimate, offer, market))
    return found


def job_draws(job_id: str, settings: PlanSettings) -> Draws:
    """The job's random numbers, from ``settings.seed`` and its id (not its position)."""
    rng = np.random.default_rng([settings.seed, zlib.crc32(job_id.encode())])
    z = rng.standard_normal(settings.samples)
    gaps = rng.standard_exponential((settings.fallback_after, settings.samples))
    return Draws(z, gaps)


def simulate(
    candidate: ClusterOption, draws: Draws, job: JobRequest, settings: PlanSettings
) -> Outcome:
    """Completion of ``job`` on ``candidate`` for every sample of ``draws``."""
    work = durations_from_normals(candidate.estimate, draws.z)
    startup = settings.startup(candidate.offer.cloud)
    if candidate.market == "on-demand":
        elapsed = startup + wall_time(work, job.checkpoint)
        zero = np.zeros_like(work)
        return Outcome(elapsed, zero, elapsed, zero)
    rate_per_s = (
        candidate.offer.interruptions_per_h
        * candidate.shape.nodes
        * settings.preemption_multiplier
        / 3600.0
    )
    return simulate_spot(work, rate_per_s, startup, job.checkpoint, draws.gaps)


def simulate_spot(
    work: FloatArray,
    rate_per_s: float,
    startup_s: float,
    checkpoint: Checkpointing | None,
    gaps: FloatArray,
) -> Outcome:
    """Spot attempts until the work is done or ``len(gaps)`` preemptions, then on-demand.

    Each attempt pays a start-up, a restore (when resuming from a checkpoint) and runs until
    it finishes or the next preemption (``gaps / rate`` seconds after start-up); a
    preemption keeps only the work saved by completed checkpoints (nothing without them).
    A preemption of any node stops the attempt: the cluster restarts as a whole.

    >>> out = simulate_spot(np.array([3600.0]), 1 / 1800, 0.0, None, np.array([[1.0], [5.0]]))
    >>> out.spot_paid_s.tolist(), out.elapsed_s.tolist(), out.preemptions.tolist()
    ([5400.0], [5400.0], [1.0])
    """
    remaining = work.copy()
    elapsed = np.zeros_like(work)
    preemptions = np.zeros_like(work)
    active = np.ones(work.shape, dtype=bool)
    restore = 0.0
    for gap in gaps:
        needed = restore + wall_time(remaining, checkpoint)
        with np.errstate(over="ignore"):  # a rate so low the next preemption is past any float
            until = gap / rate_per_s if rate_per_s > 0 else np.full_like(work, np.inf)
        preempted = active & (until < needed)
        elapsed += np.where(active, startup_s + np.minimum(until, needed), 0.0)
        saved = saved_work(np.maximum(until - restore, 0.0), checkpoint)
        remaining = np.where(preempted, remaining - np.minimum(saved, remaining), remaining)
        preemptions += preempted
        active = preempted
        restore = checkpoint.restore_s if checkpoint else 0.0
    fallback = np.where(active, startup_s + restore + wall_time(remaining, checkpoint), 0.0)
    return Outcome(elapsed + fallback, elapsed, fallback, preemptions)


def wall_time(work: FloatArray, checkpoint: Checkpointing | None) -> FloatArray:
    """Seconds to do ``work`` seconds of work, writing a checkpoint after every interval.

    >>> wall_time(np.array([1000.0]), Checkpointing(300.0, 20.0)).tolist()
    [1060.0]
    """
    if checkpoint is None:
        return work
    return work + checkpoint.write_s * np.floor(work / checkpoint.interval_s)


def saved_work(ran_s: FloatArray, checkpoint: Checkpointing | None) -> FloatArray:
    """Work kept after running ``ran_s`` seconds: the intervals whose checkpoint was written.

    >>> saved_work(np.array([0.0, 319.0, 320.0, 700.0]), Checkpointing(300.0, 20.0)).tolist()
    [0.0, 0.0, 300.0, 600.0]
    """
    if checkpoint is None:
        return np.zeros_like(ran_s)
    cycle = checkpoint.interval_s + checkpoint.write_s
    return checkpoint.interval_s * np.floor(ran_s / cycle)


def price(
    candidate: ClusterOption,
    outcome: Outcome,
    job: JobRequest,
    start: FloatArray,
    settings: PlanSettings,
) -> Plan:
    """The candidate's plan: expected cost over the samples and P(deadline) from ``start``."""
    offer, nodes, spot = candidate.offer, candidate.shape.nodes, candidate.market == "spot"
    paid = (
        outcome.spot_paid_s * (offer.spot_usd_h or 0.0)
        + outcome.on_demand_paid_s * offer.on_demand_usd_h
    )
    finish = start + outcome.elapsed_s
    p_deadline = 1.0 if job.deadline is None else float(np.mean(finish <= job.deadline))
    placement = Placement(
        candidate.shape,
        offer.cloud,
        offer.region,
        candidate.market,
        fallback_after=settings.fallback_after if spot else None,
    )
    return Plan(
        job_id=job.job_id,
        placement=placement,
        expected_cost_usd=float(np.mean(paid)) * nodes / 3600.0,
        p_deadline=p_deadline,
        p50_s=float(np.median(outcome.elapsed_s)),
        high_s=float(np.quantile(outcome.elapsed_s, settings.high_quantile)),
        expected_preemptions=float(np.mean(outcome.preemptions)),
        hourly_usd=nodes * (offer.price(candidate.market) or 0.0),
    )


def preference(plan: Plan, target: float) -> tuple[int, float, float]:
    """Sort key, best first: candidates reaching ``target`` by cost (then higher P), then the
    rest by P (then cost).

    >>> a = Plan("j", Placement(Shape("x"), "aws", "r", "spot"), 3.0, 0.97, 1.0, 2.0)
    >>> b = Plan("j", Placement(Shape("x"), "aws", "r", "on-demand"), 5.0, 1.0, 1.0, 2.0)
    >>> preference(a, 0.95) < preference(b, 0.95), preference(a, 0.99) < preference(b, 0.99)
    (True, False)
    """
    if plan.p_deadline >= target:
        return (0, plan.expected_cost_usd, -plan.p_deadline)
    return (1, -plan.p_deadline, plan.expected_cost_usd)


def _ranked(
    job: JobRequest, catalog: Catalog, start: FloatArray, settings: PlanSettings
) -> list[tuple[Plan, FloatArray]]:
    draws = job_draws(job.job_id, settings)
    target = settings.target(job.tier)
    priced = []
    for candidate in candidates(job, catalog):
        outcome = simulate(candidate, draws, job, settings)
        plan = price(candidate, outcome, job, start, settings)
        priced.append((preference(plan, target), candidate.order, plan, start + outcome.elapsed_s))
    priced.sort(key=lambda item: (item[0], item[1]))
    return [(plan, finish) for _, _, plan, finish in priced]
