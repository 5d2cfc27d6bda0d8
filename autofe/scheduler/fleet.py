"""Fleet capacity: how many nodes may be in flight, and when a warm cluster is kept or reused.

The simulated fleet is a set of clusters, one per running job, plus idle *warm* clusters a
job left behind. Scale-out is demand-driven: a queued job provisions its own cluster while the
nodes in flight (starting, running or idle) stay within ``max_nodes``; the queue's depth is
what grows the fleet. Scale-in is by idle timeout: a freed cluster stays warm for
``idle_timeout_s`` (paid), then is released, down to zero, or down to ``min_nodes`` warm nodes
while work remains. Short jobs are *batched* onto a warm cluster of a shape they can run on
when that costs less than paying a start-up for their own cluster (:func:`pick_warm`).

Policies that keep a warm pool (the planner's, the oracle's) default the idle timeout to the
start-up time (:func:`idle_timeout`): the ski-rental break-even, where a cluster idles for at
most what a fresh start-up of it would cost. They keep a freed cluster warm only while jobs
that would batch onto it arrive faster than one per start-up (:func:`worth_keeping`): with
Poisson arrivals that is exactly when the start-ups saved outweigh the idle time paid, whatever
the timeout. Baselines default to no warm clusters (a job cluster each).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autofe.errors import ConfigError
from autofe.scheduler.jobs import Estimate, Placement


@dataclass(frozen=True)
class FleetSettings:
    """Capacity limits of the simulated fleet.

    Args:
        max_nodes: nodes in flight at most (default: cloud elasticity, effectively unbounded).
        min_nodes: warm nodes kept through idle timeouts while jobs remain unfinished.
        idle_timeout_s: how long a freed cluster stays warm for the next job (0: scale to zero
            as soon as a job ends, every job pays its own start-up); ``None`` (default): the
            policy's own (:func:`idle_timeout`), kept only when :func:`worth_keeping`.
        rate_window_s: how far back the policy's default counts the jobs that would have
            batched onto a freed cluster (their arrival rate decides whether to keep it).
    """

    max_nodes: int = 1_000_000
    min_nodes: int = 0
    idle_timeout_s: float | None = None
    rate_window_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.max_nodes < 1 or self.min_nodes < 0 or self.min_nodes > self.max_nodes:
            raise ConfigError(
                f"fleet: need 0 <= min_nodes <= max_nodes and max_nodes >= 1, "
                f"got min {self.min_nodes}, max {self.max_nodes}"
            )
        if self.rate_window_s <= 0:
            raise ConfigError(f"fleet: rate_window_s must be > 0, got {self.rate_window_s}")
        timeout = self.idle_timeout_s
        if (timeout is not None and timeout < 0) or (self.min_nodes > 0 and not timeout):
            raise ConfigError(
                "fleet: idle_timeout_s must be >= 0, and set > 0 when min_nodes keeps nodes warm"
            )


def idle_timeout(fleet: FleetSettings, keeps_warm: bool, startup_s: float) -> float:
    """How long a freed cluster stays warm: the fleet's setting when given; else the start-up
    time for a policy that keeps a warm pool (ski rental: idling longer than a start-up costs
    more than starting afresh), 0 for one that does not.

    >>> idle_timeout(FleetSettings(), True, 300.0), idle_timeout(FleetSettings(), False, 300.0)
    (300.0, 0.0)
    >>> idle_timeout(FleetSettings(idle_timeout_s=0.0), True, 300.0)
    0.0
    """
    if fleet.idle_timeout_s is not None:
        return fleet.idle_timeout_s
    return startup_s if keeps_warm else 0.0


@dataclass(frozen=True)
class WarmCluster:
    """An idle cluster still running (and paid) since ``idle_since``, ready for a job."""

    placement: Placement
    hourly_usd: float
    idle_since: float
    name: str = ""


@dataclass(frozen=True)
class WarmChoice:
    """A job's candidate run on a warm cluster: the cluster and the job's estimate there."""

    cluster: WarmCluster
    estimate: Estimate


def fits(nodes: int, in_flight: int, fleet: FleetSettings) -> bool:
    """Whether ``nodes`` more nodes keep the fleet within ``max_nodes``.

    >>> fits(4, 6, FleetSettings(max_nodes=10)), fits(5, 6, FleetSettings(max_nodes=10))
    (True, False)
    """
    return in_flight + nodes <= fleet.max_nodes


def room_from_idle(
    needed: int, in_flight: int, idle: Sequence[WarmCluster], fleet: FleetSettings
) -> list[WarmCluster] | None:
    """The idle clusters to release (oldest first) so ``needed`` nodes fit; ``None`` if even
    releasing every idle cluster is not enough (the job must wait for running ones).

    >>> from autofe.scheduler.jobs import Shape
    >>> old = WarmCluster(Placement(Shape("m4.xlarge", 4), "aws", "r", "on-demand"), 0.9, 5.0)
    >>> new = WarmCluster(Placement(Shape("m4.xlarge", 2), "aws", "r", "on-demand"), 0.4, 9.0)
    >>> [c.idle_since for c in room_from_idle(3, 8, [new, old], FleetSettings(max_nodes=8))]
    [5.0]
    >>> room_from_idle(9, 8, [new, old], FleetSettings(max_nodes=8)) is None
    True
    """
    released: list[WarmCluster] = []
    for cluster in sorted(idle, key=lambda c: c.idle_since):
        if fits(needed, in_flight, fleet):
            return released
        released.append(cluster)
        in_flight -= cluster.placement.shape.nodes
    return released if fits(needed, in_flight, fleet) else None


def keep_past_timeout(cluster: WarmCluster, warm_nodes: int, fleet: FleetSettings) -> bool:
    """Whether an idle cluster whose timeout passed is kept to hold ``min_nodes`` warm.

    >>> from autofe.scheduler.jobs import Shape
    >>> c = WarmCluster(Placement(Shape("m4.xlarge", 2), "aws", "r", "on-demand"), 0.4, 0.0)
    >>> keep_past_timeout(c, 4, FleetSettings(min_nodes=3, idle_timeout_s=60))
    True
    >>> keep_past_timeout(c, 5, FleetSettings(min_nodes=3, idle_timeout_s=60))
    False
    """
    return warm_nodes - cluster.placement.shape.nodes < fleet.min_nodes


def pick_warm(
    choices: Sequence[WarmChoice],
    own_cost_usd: float,
    now: float,
    deadline: float | None,
    restore_s: float = 0.0,
) -> WarmCluster | None:
    """The warm cluster to batch a job onto, or ``None`` to pay for its own cluster.

    A warm cluster is taken when running the job there (its median estimate, no start-up)
    costs less than ``own_cost_usd`` (its own placement, start-up included) and the interval's
    high end still meets the deadline; the cheapest such cluster wins.

    >>> from autofe.scheduler.jobs import Shape
    >>> c = WarmCluster(Placement(Shape("m4.xlarge", 2), "aws", "r", "on-demand"), 0.43, 0.0)
    >>> short = WarmChoice(c, Estimate(120.0, 90.0, 200.0))
    >>> pick_warm([short], own_cost_usd=0.05, now=0.0, deadline=600.0) is c
    True
    >>> pick_warm([short], own_cost_usd=0.01, now=0.0, deadline=600.0) is None
    True
    """
    best: tuple[float, WarmCluster] | None = None
    for choice in choices:
        cost = choice.cluster.hourly_usd * choice.estimate.p50_s / 3600.0
        late = deadline is not None and now + restore_s + choice.estimate.high_s > deadline
        if cost < own_cost_usd and not late and (best is None or cost < best[0]):
            best = (cost, choice.cluster)
    return None if best is None else best[1]


def worth_keeping(eligible: float, window_s: float, startup_s: float) -> bool:
    """Whether a freed cluster is worth keeping warm, given ``eligible`` jobs that would have
    batched onto it arrived in the last ``window_s`` seconds.

    With jobs arriving at rate λ, idling up to a timeout τ costs E[min(T, τ)] = (1 − e^{−λτ})/λ
    of node-time and saves a start-up S with probability 1 − e^{−λτ}: worth it iff λ·S > 1.

    >>> worth_keeping(13, 3600.0, 300.0), worth_keeping(12, 3600.0, 300.0)
    (True, False)
    """
    return window_s > 0 and eligible * startup_s > window_s


def idle_reservation_usd(hourly_usd: float, fleet: FleetSettings) -> float:
    """What keeping a freed cluster warm for one idle timeout may cost (reserved up front so a
    budget cap holds even if nobody reuses it).

    >>> idle_reservation_usd(0.86, FleetSettings(idle_timeout_s=1800))
    0.43
    """
    seconds = fleet.idle_timeout_s or 0.0
    return hourly_usd * seconds / 3600.0 if math.isfinite(hourly_usd) else math.inf
