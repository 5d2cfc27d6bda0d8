"""The cost gate (the seed paper's extraction budget B): how a feature's cost grows.

A feature that costs a second on this warehouse can cost an hour on next year's: the ones
that compare each run with every earlier run of its cluster or node type grow with the square
of the history. The gate runs the feature on two nested samples of whole jobs
(:mod:`autofe.gates.cost_sample`), counts the work each run did in rows
(:func:`~autofe.sandbox.work.plan_work`, the same on every machine, unlike a time), fits
``work = a · n^b`` through the two points and projects it to the warehouse and to the horizon
(``cost_horizon`` times the warehouse's runs; when the gated warehouse is the loop's sample of
a larger history, to that history and ``cost_horizon`` times it). It refuses a feature whose
cost grows faster than ``n log n`` does over the same samples (by more than ``GROWTH_MARGIN``),
or whose projected cost at the horizon exceeds ``feature_budget_s``; the reason says both, so
a model can rewrite the feature (a window over ordered runs, an ``ASOF`` join, a per-day
pre-aggregate).

More jobs is one way a history grows; longer histories per job is the other. A feature that
joins each run with every earlier run of its own job grows linearly with the jobs and with
the square of each job's runs, so the gate also fits the growth from the depth sample (the
largest sample's jobs over the start of their history) to the largest sample, and judges and
projects with the steeper of the two.

Work becomes seconds at :data:`SECONDS_PER_ROW`, a constant measured once on the reference
machine (``benchmarks/gates.py``), never on the machine the gate runs on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autofe.errors import AutofeError
from autofe.featurespec import FeatureSpec
from autofe.gates.codes import Cost
from autofe.gates.context import GateContext, Reason
from autofe.gates.cost_sample import Sample, Samples, cost_samples
from autofe.sandbox.session import LimitExceeded
from autofe.sandbox.work import plan_work

GATE = "cost"
SECONDS_PER_ROW = 5.0e-8
"""Seconds per row of work on the reference machine (2 cores), measured by
``benchmarks/gates.py`` over the example catalog's features on the example warehouse."""
MIN_SAMPLE_RUNS = 50
"""Below this many runs in the larger sample, fixed costs swamp any growth: the warehouse is
too small to tell (a test fixture, a first ingest), and cost is no concern at that size."""
GROWTH_MARGIN = 0.3
"""How much faster than ``n log n`` a feature's work may seem to grow between the samples
before it is refused: fixed costs (the shared tables every sample holds whole) bend small
samples' slopes either way; a quadratic feature's is near 2."""


@dataclass(frozen=True)
class Growth:
    """A feature's work on the samples and its fit ``work = a · n^b``."""

    runs: tuple[int, int]
    work: tuple[int, int]
    depth: bool = False
    """Measured over longer histories of the same jobs (else over more jobs)."""

    @property
    def exponent(self) -> float:
        """``b``: the log-log slope between the samples (0 when the work does not grow).

        >>> round(Growth((100, 400), (1_000, 16_000)).exponent, 3)
        2.0
        """
        (n1, n2), (w1, w2) = self.runs, self.work
        if n2 <= n1 or w1 <= 0 or w2 <= w1:
            return 0.0
        return math.log(w2 / w1) / math.log(n2 / n1)

    def work_at(self, runs: int) -> float:
        """The fitted work at ``runs`` runs.

        >>> Growth((100, 400), (1_000, 16_000)).work_at(800)
        64000.0
        """
        return float(self.work[1] * (runs / self.runs[1]) ** self.exponent)


def nlogn_exponent(n1: int, n2: int) -> float:
    """The log-log slope of ``n log n`` between ``n1`` and ``n2`` runs.

    >>> round(nlogn_exponent(49, 196), 2)
    1.22
    """
    if n2 <= n1 or n1 < 2:
        return 1.0
    return 1.0 + math.log(math.log(n2) / math.log(n1)) / math.log(n2 / n1)


def check_cost(spec: FeatureSpec, ctx: GateContext) -> list[Reason]:
    """Reasons ``spec`` would cost too much at the horizon; an empty list admits it.

    A query the samples cannot run is left to the completeness gate, which reports it on the
    whole warehouse.
    """
    settings = ctx.settings
    samples = cost_samples(
        ctx.db, ctx.catalog, settings.cost_sample_shares, settings.cost_sample_cap, settings.limits
    )
    large = samples.samples[-1]
    if large.runs < MIN_SAMPLE_RUNS:
        return []
    try:
        growth = feature_growth(spec, samples)
    except LimitExceeded as exc:
        message = f"stopped by {exc} on a sample of {large.runs} runs"
        return [Reason(GATE, str(Cost.SAMPLE_LIMIT), message, stopped_by=str(exc))]
    except AutofeError:
        return []
    return _verdict(growth, max(samples.warehouse_runs, settings.history_runs or 0), ctx)


def feature_growth(spec: FeatureSpec, samples: Samples) -> Growth:
    """The steeper of the feature's growths over more jobs and over longer job histories.

    Raises:
        LimitExceeded: a sandbox limit stopped it on a sample.
        AutofeError: a sample cannot run it.
    """
    small, large = samples.samples[0], samples.samples[-1]
    work = _work(spec, large)
    growth = Growth((small.runs, large.runs), (_work(spec, small), work))
    if samples.depth is None:
        return growth
    deeper = Growth((samples.depth.runs, large.runs), (_work(spec, samples.depth), work), True)
    return max(growth, deeper, key=_steepness)


def _steepness(growth: Growth) -> float:
    """How far a growth's exponent exceeds ``n log n``'s over its own sizes."""
    return growth.exponent - nlogn_exponent(*growth.runs)


def _work(spec: FeatureSpec, sample: Sample) -> int:
    return plan_work(sample.sandbox.profile(spec.sql))


def _verdict(growth: Growth, runs: int, ctx: GateContext) -> list[Reason]:
    settings = ctx.settings
    horizon = max(runs, round(runs * settings.cost_horizon))
    here = growth.work_at(runs) * SECONDS_PER_ROW
    there = growth.work_at(horizon) * SECONDS_PER_ROW
    b, limit = growth.exponent, nlogn_exponent(*growth.runs) + GROWTH_MARGIN
    projected = f"~{seconds_text(here)} at {runs:,} runs, ~{seconds_text(there)} at {horizon:,}"
    reasons = []
    if b > limit:
        reasons.append(
            Reason(
                GATE,
                str(Cost.SUPERLINEAR),
                f"grows as n^{b:.1f}{' with the history of each job' if growth.depth else ''}, "
                f"faster than n log n (n^{limit - GROWTH_MARGIN:.1f} over "
                f"{growth.runs[0]:,}-{growth.runs[1]:,} runs): {projected}; rewrite it with a "
                "window over ordered runs, an ASOF join or a per-(job, day) pre-aggregate",
            )
        )
    if there > settings.feature_budget_s:
        reasons.append(
            Reason(
                GATE,
                str(Cost.OVER_BUDGET),
                f"projected cost {projected} runs exceeds the feature budget of "
                f"{seconds_text(settings.feature_budget_s)}",
            )
        )
    return reasons


def seconds_text(seconds: float) -> str:
    """A duration as people say it.

    >>> seconds_text(0.004), seconds_text(12.3), seconds_text(1250), seconds_text(86_400 * 3)
    ('4 ms', '12 s', '21 min', '72 h')
    """
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
