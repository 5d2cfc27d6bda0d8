"""How long a retraining (one ``autofe nightly``) will take, from autofe's own past nights.

A retraining request goes to the scheduler like any job, and a job needs a duration estimate:
a median and a 90 % interval, as :class:`autofe.scheduler.jobs.Estimate` has. autofe's own
retraining runs are runs like any other, so the estimate comes from them: the total seconds
of the past nights of the same kind (``incremental``: warm started from the champion's
catalog; ``full``: cold) that finished (status ``done``), from
:func:`autofe.pipelines.nightly_records.nightly_history`. Records written before nights had a mode
count as ``incremental``, the only behaviour there was.

With at least :data:`MIN_NIGHTS` such nights the median is theirs and the interval a
log-normal fit's (:func:`history_estimate`); with fewer, a prior from the loop's budget
(:func:`prior_estimate`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from autofe.errors import ConfigError
from autofe.pipelines.nightly_records import MODES, Mode, nightly_history

RetrainKind = Mode
"""``incremental`` or ``full``: the night's ``--mode`` (one definition, in the nightly)."""
KINDS: tuple[RetrainKind, ...] = MODES

MIN_NIGHTS = 3
"""Fewer nights than this give no spread worth fitting: the prior is used instead."""
RECENT_NIGHTS = 30
"""Only the latest nights count (a month of nightly retraining): the history grows and the
settings change, so last year's nights say little about tonight's."""
Z90 = 1.6448536269514722
"""The standard normal's 95th percentile: the 90 % interval is mean log ± Z90 · sd."""
MIN_LOG_SD = 0.15
"""The least spread of log seconds the interval assumes (90 %: p50 / 1.28 … p50 · 1.28).

A handful of near-equal nights would otherwise give a zero-width interval, while a night's
length moves with the new runs it ingests, the rounds the loop gets through and the load of
the machine: the four nights measured in docs/nightly.md with the same settings (totals 71.5,
81.1, 85.9 and 104.5 s) have a log sd of 0.16."""

OVERHEAD_S = 30.0
"""Seconds of a night outside the loop: ingest, champion, compare, drift, register. Measured
on the shipped workspace (docs/nightly.md): 4–7 s on a night with few new runs, 20 s on a
first night ingesting 490 runs; 30 s leaves room for a larger or busier home."""
LOOP_SHARE: Mapping[RetrainKind, float] = {"incremental": 0.75, "full": 1.0}
"""The prior's median loop time as a share of its budget. The budget is the loop's safety
stop (it stops before a round it could not finish within it); an incremental night often
stops earlier, at its round cap or targets, since the warm start brings the champion's
features back in round 0 (measured: 43–83 % of the budget, docs/nightly.md and README). A
full regeneration rebuilds the feature set from nothing, usually because the champion's
features stopped serving, so it is planned to use its whole budget: erring long is the safe
side of a deadline."""
LOW_SHARE = 0.25
"""The prior's 5th percentile of loop time: a loop that stops after a round or two."""
HIGH_SHARE = 1.5
"""The prior's 95th percentile of loop time: the budget, plus a last round longer than the
one before it (the stop rule extrapolates the previous one) and the final fit after it."""


@dataclass(frozen=True)
class RetrainingEstimate:
    """A retraining's median seconds and 90 % interval (``low_s`` ≤ ``p50_s`` ≤ ``high_s``),
    from ``nights`` past nights of its kind (``history``) or from the budget (``prior``)."""

    p50_s: float
    low_s: float
    high_s: float
    nights: int
    source: Literal["history", "prior"]


def estimate_retraining(home: Path, kind: RetrainKind, budget_seconds: float) -> RetrainingEstimate:
    """The duration of one more night of ``kind`` on ``home`` with the loop's budget.

    Args:
        home: the autofe home folder (a missing one has no nights: the prior).
        kind: ``incremental`` or ``full``.
        budget_seconds: the loop's ``--budget-seconds``, which the prior scales.

    Raises:
        ConfigError: an unknown kind, or a budget that is not a positive number.
    """
    if kind not in KINDS:
        raise ConfigError(f"retraining kind {kind!r}: must be one of {', '.join(KINDS)}")
    if not (math.isfinite(budget_seconds) and budget_seconds > 0):
        raise ConfigError(f"--budget-seconds {budget_seconds}: must be a positive number")
    seconds = night_seconds(nightly_history(home), kind)[-RECENT_NIGHTS:]
    if len(seconds) >= MIN_NIGHTS:
        return history_estimate(seconds)
    return prior_estimate(kind, budget_seconds, len(seconds))


def night_seconds(records: Iterable[Mapping[str, Any]], kind: RetrainKind) -> list[float]:
    """The total seconds of each finished night of ``kind``, oldest first.

    >>> night_seconds([{"status": "done", "seconds": {"total": 80.0}},
    ...                {"status": "failed", "seconds": {"total": 5.0}},
    ...                {"status": "done", "mode": "full", "seconds": {"total": 99.0}}],
    ...               "incremental")
    [80.0]
    """
    out = []
    for record in records:
        if record.get("status") != "done" or record.get("mode", "incremental") != kind:
            continue
        total = _total(record)
        if total is not None and math.isfinite(total) and total > 0:
            out.append(total)
    return out


def _total(record: Mapping[str, Any]) -> float | None:
    """The night's total phase seconds, or its wall time from start to finish without them."""
    seconds = record.get("seconds")
    if isinstance(seconds, Mapping) and isinstance(seconds.get("total"), int | float):
        return float(seconds["total"])
    try:
        started = datetime.fromisoformat(str(record["started"]))
        finished = datetime.fromisoformat(str(record["finished"]))
    except (KeyError, ValueError):
        return None
    return (finished - started).total_seconds()


def history_estimate(seconds: Sequence[float]) -> RetrainingEstimate:
    """The nights' median and a log-normal fit's 90 % interval (its sd at least
    :data:`MIN_LOG_SD`), widened when needed to contain the median.

    >>> e = history_estimate([100.0, 100.0, 100.0])
    >>> e.p50_s, round(e.low_s, 1), round(e.high_s, 1), e.source
    (100.0, 78.1, 128.0, 'history')
    >>> e = history_estimate([60.0, 90.0, 120.0, 300.0])
    >>> e.p50_s, e.low_s < 60.0, e.high_s > 300.0
    (105.0, True, True)
    """
    logs = [math.log(s) for s in seconds]
    mean = statistics.fmean(logs)
    sd = max(statistics.stdev(logs), MIN_LOG_SD)
    p50 = float(statistics.median(seconds))
    low = min(math.exp(mean - Z90 * sd), p50)
    high = max(math.exp(mean + Z90 * sd), p50)
    return RetrainingEstimate(p50, low, high, len(seconds), "history")


def prior_estimate(kind: RetrainKind, budget_seconds: float, nights: int = 0) -> RetrainingEstimate:
    """The prior from the loop's budget (see :data:`LOOP_SHARE`, :data:`OVERHEAD_S`).

    >>> prior_estimate("incremental", 300.0)
    RetrainingEstimate(p50_s=255.0, low_s=105.0, high_s=480.0, nights=0, source='prior')
    >>> prior_estimate("full", 300.0).p50_s
    330.0
    """
    return RetrainingEstimate(
        OVERHEAD_S + LOOP_SHARE[kind] * budget_seconds,
        OVERHEAD_S + LOW_SHARE * budget_seconds,
        OVERHEAD_S + HIGH_SHARE * budget_seconds,
        nights,
        "prior",
    )
