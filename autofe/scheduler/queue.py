"""The queue: which ready job goes next, and whether its budget admits it.

Ordering (``priority`` policies): tier first (P0 before P1 …), so a short urgent job never
waits behind a long run of a lower tier. Within a tier, *urgent* jobs (slack below their
predicted work: less than twice the time they need is left) go first by least slack; the rest
by fair share — the account that has used the smallest share of its budget (or spent the
least, without one) first, then least slack. ``fifo`` policies order by submit time only.

Admission under a hard cap (:class:`Ledger`): an attempt starts only if every budget it is
charged to (its account's and its tier's, when defined) can *reserve* its worst-case cost
(:func:`worst_case_usd`: the high estimate of the work left, start-up, restore, checkpoint
writes, and on spot the restarts of a preemption allowance) on top of what the current period
has spent and what running jobs still hold. Spend moves from reserved to spent as it accrues;
a run that exhausts its reservation reserves its re-estimated remainder or is stopped, so
spend never passes the cap. After a preemption, the next attempt is admitted afresh.
A budget period is a window ``[k·period_s, (k+1)·period_s)`` on the trace's clock; a new
window starts at zero spend, while running jobs keep their reservations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from autofe.scheduler.jobfile import Budget
from autofe.scheduler.jobs import Checkpointing, JobRequest
from autofe.scheduler.runtime import wall_s

EPS_USD = 1e-9


def worst_case_usd(
    work_high_s: float,
    hourly_usd: float,
    startup_s: float,
    checkpoint: Checkpointing | None,
    preemptions: int = 0,
) -> float:
    """The most one attempt of a run may cost when its work takes its high estimate, plus
    ``preemptions`` restarts, each paying a start-up, a restore and the work since the last
    checkpoint (the whole run without checkpoints).

    >>> round(worst_case_usd(3600.0, 1.0, 300.0, None), 4)
    1.0833
    >>> round(worst_case_usd(3600.0, 0.3, 300.0, None, 2), 4)
    0.975
    """
    restore = checkpoint.restore_s if checkpoint else 0.0
    run = startup_s + restore + wall_s(work_high_s, checkpoint)
    lost = run
    if checkpoint is not None:
        lost = startup_s + restore + min(checkpoint.interval_s + checkpoint.write_s, run)
    return (preemptions * lost + run) * hourly_usd / 3600.0


def preemption_allowance(expected: float, tail: float = 0.05) -> int:
    """Preemptions to budget for: the least ``k`` a Poisson count with mean ``expected``
    exceeds with probability below ``tail``.

    >>> preemption_allowance(0.0004), preemption_allowance(1.0), preemption_allowance(3.0)
    (0, 3, 6)
    >>> preemption_allowance(400.0)  # normal approximation where exp(-mean) underflows
    433
    """
    if expected > 30.0:
        return math.ceil(expected + 1.6448536269514722 * math.sqrt(expected))
    k, term = 0, math.exp(-expected)
    below = term
    while 1.0 - below >= tail:
        k += 1
        term *= expected / k
        below += term
    return k


def window(t: float, period_s: float) -> int:
    """The budget period ``t`` falls in.

    >>> window(86399.0, 86400.0), window(86400.0, 86400.0)
    (0, 1)
    """
    return math.floor(t / period_s)


@dataclass
class Ledger:
    """Spend per budget and period, and what running work has reserved (hard caps)."""

    budgets: Mapping[str, Budget]
    spent: dict[tuple[str, int], float] = field(default_factory=dict)
    reserved: dict[str, float] = field(default_factory=dict)

    def charged_to(self, job: JobRequest) -> tuple[str, ...]:
        """The budgets a job's spend counts against: its account's and its tier's."""
        return tuple(name for name in (job.account, job.tier) if name in self.budgets)

    def headroom(self, names: Iterable[str], t: float) -> float:
        """The least any of ``names`` can still reserve in the period of ``t``."""
        room = math.inf
        for name in names:
            budget = self.budgets[name]
            used = self.spent.get((name, window(t, budget.period_s)), 0.0)
            room = min(room, budget.usd - used - self.reserved.get(name, 0.0))
        return room

    def reserve(self, names: Sequence[str], usd: float, t: float) -> bool:
        """Reserve ``usd`` on every budget of ``names`` if all have room; else change nothing."""
        if usd > self.headroom(names, t) + EPS_USD:
            return False
        for name in names:
            self.reserved[name] = self.reserved.get(name, 0.0) + usd
        return True

    def release(self, names: Sequence[str], usd: float) -> None:
        """Give back an unused reservation."""
        for name in names:
            self.reserved[name] = max(self.reserved.get(name, 0.0) - usd, 0.0)

    def charge(self, names: Sequence[str], hourly_usd: float, start: float, end: float) -> None:
        """Spend ``hourly_usd`` over ``[start, end)``, split across budget periods."""
        for name in names:
            period = self.budgets[name].period_s
            t = start
            while t < end:
                stop = min(end, (window(t, period) + 1) * period)
                key = (name, window(t, period))
                self.spent[key] = self.spent.get(key, 0.0) + hourly_usd * (stop - t) / 3600.0
                t = stop

    def overrun_usd(self) -> float:
        """How far the worst period of any budget went past its cap (0 when all held)."""
        over = [used - self.budgets[name].usd for (name, _), used in self.spent.items()]
        return max([0.0, *over])

    def share(self, account: str, spent_by_account: Mapping[str, float]) -> float:
        """Fair-share usage of an account: the fraction of its budget spent (USD without one)."""
        used = spent_by_account.get(account, 0.0)
        budget = self.budgets.get(account)
        return used / budget.usd if budget is not None and budget.usd > 0 else used


def slack_s(job: JobRequest, now: float, work_s: float) -> float:
    """Seconds to spare if the job's predicted work started now (infinite without deadline).

    >>> j = JobRequest("a", 0.0, {}, deadline=5000.0)
    >>> slack_s(j, 1000.0, 3000.0)
    1000.0
    """
    return math.inf if job.deadline is None else job.deadline - now - work_s


def priority_key(
    job: JobRequest, now: float, work_s: float, share: float
) -> tuple[int, int, float, float, float, str]:
    """Sort key of the ``priority`` order (see the module docstring).

    >>> calm = JobRequest("calm", 0.0, {}, tier="P1", deadline=90000.0)
    >>> tight = JobRequest("tight", 5.0, {}, tier="P1", account="b", deadline=4000.0)
    >>> p0 = JobRequest("p0", 9.0, {}, tier="P0")
    >>> keys = {j.job_id: priority_key(j, 0.0, 2500.0, 0.5) for j in (calm, tight, p0)}
    >>> sorted(keys, key=keys.__getitem__)
    ['p0', 'tight', 'calm']
    """
    slack = slack_s(job, now, work_s)
    urgent = slack < work_s
    return (
        job.priority,
        0 if urgent else 1,
        0.0 if urgent else share,
        slack,
        job.submit,
        job.job_id,
    )


def fifo_key(
    job: JobRequest, now: float, work_s: float, share: float
) -> tuple[int, int, float, float, float, str]:
    """Sort key of the ``fifo`` order: submit time, nothing else.

    >>> fifo_key(JobRequest("a", 7.0, {}, tier="P0"), 0.0, 1.0, 0.0)
    (0, 0, 0.0, 0.0, 7.0, 'a')
    """
    return (0, 0, 0.0, 0.0, job.submit, job.job_id)


ORDERS = {"priority": priority_key, "fifo": fifo_key}
