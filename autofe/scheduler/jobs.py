"""Job requests: what a scheduler is asked to run, and the predictions it plans with.

Times are seconds on one clock (a trace's start, or the Unix epoch for live requests); a
duration is seconds. A job's candidate *shapes* (instance type × node count) carry the model's
duration estimate on that hardware; the market (spot or on-demand) and the region are the
planner's choice, since they change the price and the risk, not the work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Tier = Literal["P0", "P1", "P2", "P3"]
TIERS: tuple[Tier, ...] = ("P0", "P1", "P2", "P3")
Market = Literal["on-demand", "spot"]
MARKETS: tuple[Market, ...] = ("on-demand", "spot")


@dataclass(frozen=True, order=True)
class Shape:
    """The hardware a job runs on: ``nodes`` machines of ``instance_type``."""

    instance_type: str
    nodes: int = 1

    @property
    def key(self) -> str:
        """``"m4.xlarge x4"``: how traces and plans name the shape.

        >>> Shape("m4.xlarge", 4).key
        'm4.xlarge x4'
        """
        return f"{self.instance_type} x{self.nodes}"

    @classmethod
    def parse(cls, key: str) -> Shape:
        """The inverse of :attr:`key`; a count must be ASCII digits (``"x²"`` is not one, though
        ``str.isdigit`` says so, and ``int`` cannot read it).

        >>> Shape.parse("m4.xlarge x4"), Shape.parse("m4.xlarge x²")
        (Shape(instance_type='m4.xlarge', nodes=4), Shape(instance_type='m4.xlarge x²', nodes=1))
        """
        name, _, count = key.rpartition(" x")
        digits = name and count.isascii() and count.isdigit()
        return cls(name, int(count)) if digits else cls(key, 1)


@dataclass(frozen=True)
class Estimate:
    """The model's duration prediction on one shape: median and the 90 % interval's bounds.

    ``true_s`` is the runtime the job really had on this shape; only traces know it (the
    simulator uses it as ground truth, the planner never reads it). ``high99_s``, when the
    model gives it, is a 99 % upper bound calibrated the same way as ``high_s``: the upper
    tail beyond the 95th percentile is read off it instead of extrapolating the interval
    (:mod:`autofe.scheduler.duration`).
    """

    p50_s: float
    low_s: float
    high_s: float
    true_s: float | None = None
    high99_s: float | None = None

    @property
    def log_sigma(self) -> float:
        """Spread of a log-normal whose 5th/95th percentiles are the interval's bounds.

        >>> round(Estimate(100.0, 50.0, 200.0).log_sigma, 4)
        0.4214
        """
        z95 = 1.6448536269514722
        span = math.log(max(self.high_s, self.p50_s) / max(min(self.low_s, self.p50_s), 1e-9))
        return max(span / (2.0 * z95), 1e-6)


@dataclass(frozen=True)
class Checkpointing:
    """How a job saves progress: every ``interval_s`` of work, costing ``write_s`` each time;
    resuming after a preemption costs ``restore_s``."""

    interval_s: float
    write_s: float = 0.0
    restore_s: float = 0.0


@dataclass(frozen=True)
class JobRequest:
    """One job to schedule.

    ``deadline`` is absolute (same clock as ``submit``), ``None`` for best effort.
    ``shapes`` maps :attr:`Shape.key` to the duration estimate on that shape.
    """

    job_id: str
    submit: float
    shapes: Mapping[str, Estimate]
    tier: Tier = "P2"
    account: str = "default"
    deadline: float | None = None
    depends_on: tuple[str, ...] = ()
    checkpoint: Checkpointing | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    markets: tuple[Market, ...] = MARKETS
    """The markets the job may run in: ``("on-demand",)`` for a job that must not be
    preempted (an urgent retraining: a preemption would keep a bad model serving longer)."""

    @property
    def priority(self) -> int:
        """0 for P0 (most urgent) … 3 for P3."""
        return TIERS.index(self.tier)


@dataclass(frozen=True)
class Placement:
    """Where and how a job runs: a shape, in one cloud region, in one market.

    ``fallback_after`` is how many spot preemptions the job tolerates before it moves to
    on-demand (``None``: never falls back; on-demand placements ignore it).
    """

    shape: Shape
    cloud: str
    region: str
    market: Market
    fallback_after: int | None = None


@dataclass(frozen=True)
class Plan:
    """The planner's answer for one job: a placement and what it expects of it.

    ``p_deadline`` is the probability of finishing before the deadline (1.0 without one),
    counting start-up, expected preemptions, checkpoint and restart overhead;
    ``expected_cost_usd`` counts every node-hour paid, lost work included.
    """

    job_id: str
    placement: Placement
    expected_cost_usd: float
    p_deadline: float
    p50_s: float
    high_s: float
    expected_preemptions: float = 0.0
    hourly_usd: float = 0.0
