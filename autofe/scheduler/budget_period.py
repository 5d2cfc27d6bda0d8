"""A budget's current period: what was spent so far, when, and where it is heading.

A budget caps what one account's (or one tier's) jobs may spend per period (periods as in
:func:`autofe.scheduler.queue.window`). Charges accrue continuously, so the spend over the
period is a piecewise-linear curve whose slope is the hourly price of the jobs running at each
moment; the projection to the period's end adds what the waiting work is already committed to.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autofe.scheduler.jobfile import Budget
from autofe.scheduler.store import Charge, Pending, Snapshot

CURVE_POINTS = 200
"""At most this many points per curve: a chart has no more pixels than that to draw them on."""


@dataclass(frozen=True)
class BudgetPeriod:
    """One budget in the period of ``as_of``.

    ``projected_usd`` is the spend so far, plus each running job's current hourly price until
    its predicted completion (or the period's end, whichever is first), plus each queued job's
    planned expected cost when it is predicted to finish within the period.
    """

    name: str
    usd: float
    start: float
    end: float
    as_of: float
    spent_usd: float
    projected_usd: float
    curve: tuple[tuple[float, float], ...]
    """(time, spend since ``start``) from ``start`` to ``as_of``."""

    @property
    def share_elapsed(self) -> float:
        """How much of the period has passed (0 to 1)."""
        return (self.as_of - self.start) / (self.end - self.start)


def budget_periods(snapshot: Snapshot, points: int = CURVE_POINTS) -> list[BudgetPeriod]:
    """Every budget of the snapshot in its current period, in name order."""
    return [
        budget_period(budget, snapshot.charges, snapshot.pending, snapshot.as_of, points)
        for budget in sorted(snapshot.budgets, key=lambda b: b.name)
    ]


def budget_period(
    budget: Budget,
    charges: Sequence[Charge],
    pending: Sequence[Pending],
    at: float,
    points: int = CURVE_POINTS,
) -> BudgetPeriod:
    """``budget`` in the period of ``at``, from the charges and the waiting work of all jobs.

    >>> c = Charge("h", "team-a", "P1", 0.0, None, 36.0)  # $36/h since the period began
    >>> p = Pending("team-a", "P1", "running", 36.0, 7200.0, 0.0)
    >>> b = budget_period(Budget("team-a", 100.0, 86400.0), [c], [p], 3600.0)
    >>> b.spent_usd, b.projected_usd, b.curve[-1]
    (36.0, 72.0, (3600.0, 36.0))
    """
    start = math.floor(at / budget.period_s) * budget.period_s
    end = start + budget.period_s
    mine = [c for c in charges if budget.name in (c.account, c.tier)]
    curve = spend_curve(mine, start, at, points)
    spent = curve[-1][1]
    committed = sum(_committed(p, at, end) for p in pending if budget.name in (p.account, p.tier))
    return BudgetPeriod(budget.name, budget.usd, start, end, at, spent, spent + committed, curve)


def spend_curve(
    charges: Sequence[Charge], start: float, stop: float, points: int = CURVE_POINTS
) -> tuple[tuple[float, float], ...]:
    """Cumulative spend of ``charges`` within ``[start, stop]``, at every price change.

    A sweep over the moments a charge begins or ends (the slope changes only there), thinned
    to at most ``points`` points; the last point is always ``stop`` with the total.

    >>> spend_curve([Charge("h", "a", "P1", 0.0, 1800.0, 10.0)], 0.0, 3600.0)
    ((0.0, 0.0), (1800.0, 5.0), (3600.0, 5.0))
    """
    changes: list[tuple[float, float]] = []
    for c in charges:
        begin, end = max(c.start, start), min(stop if c.stop is None else c.stop, stop)
        if end > begin:
            changes += [(begin, c.hourly_usd), (end, -c.hourly_usd)]
    changes.sort()
    curve = [(start, 0.0)]
    rate = spent = 0.0
    last = start
    for moment, delta in changes:
        spent += rate * (moment - last) / 3600.0
        rate += delta
        last = moment
        if moment > curve[-1][0]:
            curve.append((moment, spent))
        else:
            curve[-1] = (moment, spent)
    spent += rate * (stop - last) / 3600.0
    if stop > curve[-1][0]:
        curve.append((stop, spent))
    else:
        curve[-1] = (stop, spent)
    return _thin(curve, points)


def _committed(job: Pending, at: float, end: float) -> float:
    if job.state == "running":
        until = min(end, job.predicted_completion or end)
        return job.hourly_usd * max(until - at, 0.0) / 3600.0
    finish = job.predicted_completion
    return job.expected_cost_usd if finish is not None and finish <= end else 0.0


def _thin(curve: list[tuple[float, float]], points: int) -> tuple[tuple[float, float], ...]:
    """Every k-th point and the last, so the curve keeps its ends and its shape.

    >>> _thin([(float(i), 0.0) for i in range(10)], 4)
    ((0.0, 0.0), (3.0, 0.0), (6.0, 0.0), (9.0, 0.0))
    """
    if len(curve) <= points:
        return tuple(curve)
    step = math.ceil((len(curve) - 1) / (points - 1))
    kept = curve[::step]
    if kept[-1] != curve[-1]:
        kept.append(curve[-1])
    return tuple(kept)
