"""Runtime reactions: what a scheduler does while a job runs, from what the job reports.

- **Checkpoint and resume**: a preempted job restarts from its last completed checkpoint
  (the simulator does this for every policy: it is the job's own mechanism).
- **Fallback to on-demand** after ``Placement.fallback_after`` preemptions, or as soon as the
  job's measured preemption rate (preemptions per hour on spot) exceeds
  ``RuntimePolicy.fallback_rate_per_h``.
- **Deadline-aware upgrade**: when the remaining slack no longer covers the high estimate of
  the remaining work (plus the expected preemption losses on spot), move the job to the
  cheapest on-demand placement (any shape, so more workers too) whose high estimate from the
  last checkpoint still meets the deadline. "Switch after 90 min if less than 50 % done" is the
  special case of a 3 h job with a 3 h deadline.
- **Progress re-estimation**: reported progress replaces the model's prior in proportion to
  the work it covers (:func:`remaining_high_s`).

Bid strategy (max price vs acquisition probability) is not modelled: the price snapshots have
no spot price time series to bid against, so spot capacity is always granted at the catalog
price and lost only by preemption.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autofe.errors import ConfigError
from autofe.scheduler.jobs import Checkpointing, Estimate, Placement
from autofe.scheduler.plan import ClusterOption


@dataclass(frozen=True)
class RuntimePolicy:
    """How a policy reacts while its jobs run.

    Args:
        fallback_rate_per_h: fall back to on-demand after a preemption once the job's
            preemptions per hour on spot (over at least an hour) exceed this (``None``: only
            the placement's ``fallback_after``).
        upgrade: move a job whose deadline is at risk to a faster or safer placement.
        check_every_s: how often a running job's progress is checked for an upgrade.
        max_upgrades: upgrades per job at most (no flapping between placements).
    """

    fallback_rate_per_h: float | None = None
    upgrade: bool = False
    check_every_s: float = 600.0
    max_upgrades: int = 1

    def __post_init__(self) -> None:
        if self.check_every_s <= 0 or self.max_upgrades < 0:
            raise ConfigError("runtime policy: check_every_s must be > 0, max_upgrades >= 0")


STATIC = RuntimePolicy()
"""No reaction at all: the placement's own ``fallback_after`` is the only rule applied."""


def wall_s(work_s: float, checkpoint: Checkpointing | None) -> float:
    """Seconds to do ``work_s`` of work, pausing to write a checkpoint after every interval.

    >>> wall_s(1000.0, Checkpointing(300.0, 20.0)), wall_s(1000.0, None)
    (1060.0, 1000.0)
    """
    if checkpoint is None:
        return work_s
    return work_s + checkpoint.write_s * math.floor(work_s / checkpoint.interval_s)


def remaining_high_s(estimate: Estimate, progress: float, gained: float, worked_s: float) -> float:
    """The high estimate of the work left, re-estimated from reported progress.

    ``gained`` is the fraction of the job done on this shape in ``worked_s`` seconds of work;
    the measured total (``worked_s / gained``) replaces the model's high estimate in
    proportion to ``gained``, so early reports move the estimate a little, late ones a lot.

    >>> remaining_high_s(Estimate(600.0, 400.0, 900.0), 0.0, 0.0, 0.0)
    900.0
    >>> remaining_high_s(Estimate(600.0, 400.0, 900.0), 0.5, 0.5, 400.0)
    425.0
    """
    total = estimate.high_s
    if gained > 0 and worked_s > 0:
        total = (1.0 - gained) * estimate.high_s + gained * (worked_s / gained)
    return max(1.0 - progress, 0.0) * total


def expected_loss_s(
    rate_per_s: float, remaining_s: float, startup_s: float, checkpoint: Checkpointing | None
) -> float:
    """Expected seconds lost to preemptions over ``remaining_s`` of spot running: each costs a
    new start-up, a restore and on average half the work since the last checkpoint (half the
    remaining work without checkpoints).

    >>> expected_loss_s(1 / 3600, 3600.0, 300.0, Checkpointing(600.0, 0.0, 60.0))
    660.0
    """
    if rate_per_s <= 0:
        return 0.0
    if checkpoint is None:
        per = startup_s + remaining_s / 2.0
    else:
        per = startup_s + checkpoint.restore_s + (checkpoint.interval_s + checkpoint.write_s) / 2
    return rate_per_s * remaining_s * per


def should_fall_back(
    placement: Placement, preemptions: int, spot_s: float, policy: RuntimePolicy
) -> bool:
    """Whether a just-preempted spot job should resume on-demand.

    The measured rate divides by at least one hour on spot, so one unlucky early preemption
    is not read as a storm.

    >>> from autofe.scheduler.jobs import Shape
    >>> spot = Placement(Shape("m4.xlarge", 4), "aws", "us-east-1", "spot", fallback_after=2)
    >>> should_fall_back(spot, 1, 3600.0, RuntimePolicy()), should_fall_back(spot, 2, 1.0, STATIC)
    (False, True)
    >>> free = Placement(Shape("m4.xlarge", 4), "aws", "us-east-1", "spot")
    >>> rate = RuntimePolicy(fallback_rate_per_h=1.0)
    >>> should_fall_back(free, 1, 600.0, rate), should_fall_back(free, 2, 1800.0, rate)
    (False, True)
    """
    if placement.market != "spot":
        return False
    if placement.fallback_after is not None and preemptions >= placement.fallback_after:
        return True
    limit = policy.fallback_rate_per_h
    return limit is not None and preemptions / max(spot_s / 3600.0, 1.0) > limit


@dataclass(frozen=True)
class Resume:
    """Where a job moving elsewhere resumes: from ``saved`` (fraction done), leaving
    ``candidate``. ``scale`` is the measured slowdown (re-estimated total over the model's
    high estimate on the current shape), applied to every shape's estimate: a job bigger than
    predicted on one shape is bigger on all of them."""

    candidate: ClusterOption
    saved: float
    startup_s: float
    scale: float = 1.0


def upgrade_choice(
    now: float,
    deadline: float | None,
    projected_finish: float,
    candidates: Sequence[ClusterOption],
    resume: Resume,
    checkpoint: Checkpointing | None,
) -> ClusterOption | None:
    """The on-demand candidate to move a job at risk to, or ``None`` to stay.

    At risk: ``projected_finish`` (high estimate of the rest, on the current placement) is past
    the deadline. The move restarts from the last checkpoint (``resume.saved``) after a
    start-up and restore; the cheapest candidate whose high estimate (times ``resume.scale``)
    then meets the deadline wins. ``resume.candidate`` is the current one (never chosen again).
    """
    if deadline is None or projected_finish <= deadline:
        return None
    restore = checkpoint.restore_s if checkpoint and resume.saved > 0 else 0.0
    best: tuple[float, ClusterOption] | None = None
    for cand in candidates:
        if cand.market != "on-demand" or cand == resume.candidate:
            continue
        rest = wall_s((1.0 - resume.saved) * cand.estimate.high_s * resume.scale, checkpoint)
        seconds = resume.startup_s + restore + rest
        cost = cand.offer.on_demand_usd_h * cand.shape.nodes * seconds
        if now + seconds <= deadline and (best is None or cost < best[0]):
            best = (cost, cand)
    return None if best is None else best[1]
