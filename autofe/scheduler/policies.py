"""Scheduling policies as data: a chooser, a queue order and runtime reactions, by name.

A :class:`Policy` bundles how a job's placement is chosen when it is first dispatched (a
:class:`Chooser`: job, now, context → Placement), how the queue orders ready jobs
(``priority`` or ``fifo``, see :mod:`autofe.scheduler.queue`) and how it reacts while jobs run
(:class:`~autofe.scheduler.runtime.RuntimePolicy`). Choosers see the job as the scheduler
would — the model's estimates (or a noisy oracle's), never the trace's true runtimes — except
the oracle's, which sees the truth.

``POLICIES`` maps each name to its policy; the baselines are those of issue #9:

- ``autofe``: the planner's plan (:func:`~autofe.scheduler.plan.plan_job`: cheapest expected
  cost with P(deadline) ≥ the tier's target) + fallback after 2 preemptions (the planner's
  placement) or more than one per spot hour, deadline-aware upgrade, checkpoint resume; a
  warm pool: freed clusters stay warm for the start-up time and short jobs are batched onto
  them when that is cheaper than a start-up (:mod:`autofe.scheduler.fleet`).
- ``static``: static on-demand allocation — the median-priced of the job's shapes (lower
  median by hourly price), on-demand, cheapest region.
- ``spot-only``: the shape and region cheapest on spot by median run (start-up included),
  never falling back
  (on-demand only where no shape has a spot market, e.g. Databricks on Azure).
- ``greedy``: the cheapest shape whose median meets the deadline, on spot where offered,
  falling back to on-demand at the first preemption; else on-demand; else the fastest.
- ``fifo-worst``: FIFO order, the shape fastest by its high estimate, on-demand, cheapest
  region (worst-case provisioning).
- ``oracle``: knows every true runtime: the cheapest placement whose true runtime, start-up
  and expected preemption loss meet the deadline (else the fastest); same reactions and warm
  pool as autofe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from autofe.errors import ScheduleError
from autofe.scheduler.catalog import Catalog
from autofe.scheduler.jobs import JobRequest, Market, Placement
from autofe.scheduler.plan import ClusterOption, PlanSettings, candidates, plan_job
from autofe.scheduler.runtime import STATIC, RuntimePolicy, expected_loss_s, wall_s


@dataclass(frozen=True)
class ChoiceContext:
    """What a chooser knows besides the job: the catalog and the simulated world's settings."""

    catalog: Catalog
    startup_s: float = 300.0
    preemption_multiplier: float = 1.0
    seed: int = 0
    fallback_after: int = 2


class Chooser(Protocol):
    """Chooses a job's placement when it is dispatched."""

    def __call__(self, job: JobRequest, now: float, ctx: ChoiceContext) -> Placement: ...


@dataclass(frozen=True)
class Policy:
    """A named scheduling policy (see the module docstring)."""

    name: str
    choose: Chooser
    order: Literal["priority", "fifo"] = "priority"
    runtime: RuntimePolicy = STATIC
    sees_truth: bool = False
    keeps_warm: bool = False
    """Whether freed clusters stay warm for the next job by default (see
    :func:`~autofe.scheduler.fleet.idle_timeout`); baselines give each job its own cluster."""


def hourly_usd(cand: ClusterOption) -> float:
    """What the candidate's cluster costs per hour (all nodes, its market)."""
    return (cand.offer.price(cand.market) or 0.0) * cand.shape.nodes


def cheapest_per_shape(job: JobRequest, catalog: Catalog, market: Market) -> list[ClusterOption]:
    """Per shape, the region offering ``market`` cheapest (shapes without it are left out)."""
    best: dict[str, ClusterOption] = {}
    for cand in candidates(job, catalog):
        current = best.get(cand.shape.key)
        if cand.market == market and (current is None or hourly_usd(cand) < hourly_usd(current)):
            best[cand.shape.key] = cand
    return [best[key] for key in sorted(best)]


def placement(cand: ClusterOption, fallback_after: int | None = None) -> Placement:
    """The placement of a candidate (``fallback_after`` only matters on spot)."""
    spot = cand.market == "spot"
    return Placement(
        cand.shape,
        cand.offer.cloud,
        cand.offer.region,
        cand.market,
        fallback_after if spot else None,
    )


def median_cost(cand: ClusterOption, ctx: ChoiceContext) -> float:
    """What a run at the median estimate costs, start-up included (USD)."""
    return hourly_usd(cand) * (ctx.startup_s + cand.estimate.p50_s) / 3600.0


def meets(job: JobRequest, now: float, seconds: float) -> bool:
    """Whether a run of ``seconds`` started now ends by the job's deadline."""
    return job.deadline is None or now + seconds <= job.deadline


def choose_static(job: JobRequest, now: float, ctx: ChoiceContext) -> Placement:
    """The median-priced shape, on-demand, cheapest region."""
    ranked = sorted(cheapest_per_shape(job, ctx.catalog, "on-demand"), key=hourly_usd)
    if not ranked:
        raise ScheduleError("no shape has an on-demand offer in the catalog", job.job_id)
    return placement(ranked[(len(ranked) - 1) // 2])


def choose_spot_only(job: JobRequest, now: float, ctx: ChoiceContext) -> Placement:
    """The cheapest spot run by the median estimate, never falling back."""
    pool = cheapest_per_shape(job, ctx.catalog, "spot") or cheapest_per_shape(
        job, ctx.catalog, "on-demand"
    )
    return placement(min(pool, key=lambda c: median_cost(c, ctx)))


def choose_greedy(job: JobRequest, now: float, ctx: ChoiceContext) -> Placement:
    """Spot else on-demand: the cheapest shape whose median meets the deadline."""
    for market in ("spot", "on-demand"):
        pool = cheapest_per_shape(job, ctx.catalog, market)
        fits = [c for c in pool if meets(job, now, ctx.startup_s + c.estimate.p50_s)]
        if fits:
            return placement(min(fits, key=lambda c: median_cost(c, ctx)), 1)
    pool = cheapest_per_shape(job, ctx.catalog, "on-demand")
    return placement(min(pool, key=lambda c: (c.estimate.p50_s, hourly_usd(c))))


def choose_fifo_worst(job: JobRequest, now: float, ctx: ChoiceContext) -> Placement:
    """The shape fastest by its high estimate, on-demand, cheapest region."""
    pool = cheapest_per_shape(job, ctx.catalog, "on-demand")
    return placement(min(pool, key=lambda c: (c.estimate.high_s, hourly_usd(c))))


def choose_known(job: JobRequest, now: float, ctx: ChoiceContext) -> Placement:
    """With known durations (``p50_s`` is the truth): the cheapest run meeting the deadline,
    start-up and expected preemption loss counted; else the fastest."""
    priced = []
    for cand in candidates(job, ctx.catalog):
        seconds = ctx.startup_s + wall_s(cand.estimate.p50_s, job.checkpoint)
        if cand.market == "spot":
            rate = cand.offer.interruptions_per_h * cand.shape.nodes * ctx.preemption_multiplier
            seconds += expected_loss_s(rate / 3600, seconds, ctx.startup_s, job.checkpoint)
        late = not meets(job, now, seconds)
        # in time: cheapest first; late: fastest first
        priced.append(((late, seconds if late else hourly_usd(cand) * seconds), cand.order, cand))
    return placement(min(priced, key=lambda p: (p[0], p[1]))[2], ctx.fallback_after)


def choose_planned(job: JobRequest, now: float, ctx: ChoiceContext) -> Placement:
    """The planner's choice (Monte Carlo over the estimate's log-normal and preemptions)."""
    settings = PlanSettings(
        seed=ctx.seed,
        startup_s=ctx.startup_s,
        preemption_multiplier=ctx.preemption_multiplier,
        fallback_after=ctx.fallback_after,
    )
    return plan_job(job, ctx.catalog, now, settings).placement


REACTIVE = RuntimePolicy(fallback_rate_per_h=1.0, upgrade=True)

POLICIES: Mapping[str, Policy] = {
    p.name: p
    for p in (
        Policy("autofe", choose_planned, runtime=REACTIVE, keeps_warm=True),
        Policy("static", choose_static),
        Policy("spot-only", choose_spot_only),
        Policy("greedy", choose_greedy),
        Policy("fifo-worst", choose_fifo_worst, order="fifo"),
        Policy("oracle", choose_known, runtime=REACTIVE, sees_truth=True, keeps_warm=True),
    )
}


def get_policy(name: str) -> Policy:
    """The policy called ``name``.

    Raises:
        ScheduleError: no such policy (the message lists the known ones).
    """
    try:
        return POLICIES[name]
    except KeyError:
        known = ", ".join(POLICIES)
        raise ScheduleError(f"unknown policy {name!r}; known: {known}") from None
