"""Conformal prediction intervals on log duration: time-ordered CV+.

Each calibration run was held out by one of the fit's time-ordered folds and predicted by that
fold's model, which saw nothing submitted later; its absolute log residual is an error a
deployed model makes. CV+ (Barber et al., "Predictive inference with the jackknife+", 2021)
centres every residual on *its own fold model's* prediction for the new run, not on the final
model's: where the fold models disagree about a run (a script version, a window or a
configuration the early folds never saw) the interval widens by that disagreement. The
earlier design put the final model's prediction ± one residual quantile, which was as narrow
for a novel run as for a familiar one: on the example workspace its 80 % / 90 % intervals
covered 66 % / 75 % of the holdout, CV+ 76 % / 88 % (``docs/run.md``, "Intervals"). Widths
are in log space, so intervals are multiplicative (a 10 s job gets ±seconds, a 1 h job
±minutes).
``by_job`` calibrates per job where a job has enough calibration runs (Mondrian conformal),
falling back to every run elsewhere.

**Novel runs apart.** A run on a configuration, node type or script version its job's history
has not seen (:mod:`autofe.modeling.novelty`) asks a what-if question, and its errors are of
another size than a rerun's. Where the calibration runs hold at least :data:`MIN_GROUP` novel
ones, a novel run's interval comes from them (the time folds' runs on a setting new to their
job, each predicted by a model that never saw it: what-if folds the history itself ran), per
job where the job has enough. Every other run keeps the calibration on all runs: the reruns
inside a training period can be too few and too alike to calibrate on their own (on the
example, 38 of 193 calibration runs; calibrated on them alone, the manual set's 80 % intervals
covered 64 % of the holdout's reruns, against 89 % pooled). On the example workspace the pooled
80 % intervals covered 62.8 % of the novel holdout runs and 94.3 % of the reruns
(``docs/results.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

LEVELS = (0.8, 0.9)
MIN_GROUP = 20
"""Calibration runs a job needs for its own widths (fewer gives unstable high quantiles)."""


BATCH_ROWS = 16
"""Rows sharing one calibration pool from which :meth:`Calibration.bounds_many` takes their
bounds from the pool's sorted residuals (:func:`shifted_order_statistic`) instead of a
selection over the pool per row; both give the same numbers (tests), this one only faster."""


def conformal_rank(n: int, level: float) -> int:
    """The 1-based rank of the finite-sample-corrected ``level`` quantile of ``n`` values."""
    return min(n, math.ceil((n + 1) * level))


def conformal_quantile(residuals: NDArray[np.float64], level: float) -> float:
    """The finite-sample-corrected quantile: rank ceil((n + 1) · level) of n residuals.

    >>> conformal_quantile(np.arange(1.0, 10.0), 0.8)
    8.0
    """
    rank = conformal_rank(len(residuals), level)
    return float(np.partition(residuals, rank - 1)[rank - 1])


def shifted_order_statistic(
    ranked: Sequence[NDArray[np.float64]], shifts: NDArray[np.float64], rank: int
) -> NDArray[np.float64]:
    """Per row ``i``, the ``rank``-th smallest (1-based) of the union over ``k`` of the float
    sums ``shifts[i, k] + ranked[k]`` (``ranked[k]`` sorted ascending): what
    :func:`conformal_quantile` returns for that row's CV+ values, exactly (adding a constant
    keeps a sorted array sorted in floating point too).

    A holdout of 200 k runs on a pool of hundreds of thousands of residuals made a selection
    over the pool per row, 200 k times per level and side, in the million-run final fit.
    Here each row's answer is the smallest element of some fold's array whose count of values
    at or below it reaches ``rank``: a binary search per fold over its indexes, all rows at
    once, each count a few ``searchsorted`` calls.

    >>> shifted_order_statistic([np.array([0.1, 0.3]), np.array([0.2])], np.array([[1.0, 0.0]]), 2)
    array([1.1])
    """
    rows = shifts.shape[0]
    best = np.full(rows, np.inf)
    for k, values in enumerate(ranked):
        if len(values) == 0:
            continue
        lo, hi = np.zeros(rows, dtype=np.intp), np.full(rows, len(values), dtype=np.intp)
        while bool((lo < hi).any()):
            active = lo < hi
            mid = (lo + hi) // 2
            at = shifts[:, k] + values[np.minimum(mid, len(values) - 1)]
            enough = _count_at_most(ranked, shifts, at) >= rank
            hi = np.where(active & enough, mid, hi)
            lo = np.where(active & ~enough, mid + 1, lo)
        found = lo < len(values)
        value = shifts[:, k] + values[np.minimum(lo, len(values) - 1)]
        best = np.where(found, np.minimum(best, value), best)
    return best


def _count_at_most(
    ranked: Sequence[NDArray[np.float64]], shifts: NDArray[np.float64], at: NDArray[np.float64]
) -> NDArray[np.intp]:
    """Per row, how many of its shifted values are at most ``at``: ``searchsorted`` on
    ``at - shift`` (rounded), then moved to where the float sums themselves cross ``at``."""
    total = np.zeros(len(at), dtype=np.intp)
    for k, values in enumerate(ranked):
        n = len(values)
        if n == 0:
            continue
        shift = shifts[:, k]
        p = np.searchsorted(values, at - shift, side="right").astype(np.intp)
        while True:
            up = (p < n) & (shift + values[np.minimum(p, n - 1)] <= at)
            if not bool(up.any()):
                break
            p = p + up
        while True:
            down = (p > 0) & (shift + values[np.maximum(p - 1, 0)] > at)
            if not bool(down.any()):
                break
            p = p - down
        total += p
    return total


@dataclass(frozen=True)
class Calibration:
    """The calibration runs' absolute log residuals, the fold that predicted each, and which of
    them belong to each job calibrated on its own."""

    residuals: NDArray[np.float64]
    folds: NDArray[np.intp]
    by_job: dict[str, NDArray[np.intp]] = field(default_factory=dict)
    """Indexes of the calibration runs of each job with at least :data:`MIN_GROUP` of them."""
    novel_by_job: dict[str, NDArray[np.intp]] = field(default_factory=dict)
    """The same for each job's novel calibration runs."""
    novel: NDArray[np.intp] | None = None
    """Indexes of the novel calibration runs, None when they are too few to calibrate on."""

    @classmethod
    def fit(
        cls,
        log_actual: NDArray[np.float64],
        log_pred: NDArray[np.float64],
        folds: NDArray[np.intp],
        jobs: Sequence[str],
        novel: Sequence[bool] | None = None,
    ) -> Calibration:
        """``novel``: whether each calibration run is new to its job's history (None: unknown)."""
        residuals = np.abs(log_actual - log_pred)
        folds = np.asarray(folds, dtype=np.intp)
        every = _by_job(jobs, np.arange(len(jobs)))
        flags = np.zeros(len(jobs), dtype=bool) if novel is None else np.asarray(novel, bool)
        if int(flags.sum()) < MIN_GROUP:
            return cls(residuals, folds, every)
        novel_ix = np.flatnonzero(flags)
        return cls(residuals, folds, every, _by_job(jobs, novel_ix), novel_ix)

    def bounds(
        self,
        fold_log_p50: NDArray[np.float64],
        level: float,
        job: str = "",
        novel: bool | None = None,
    ) -> tuple[float, float]:
        """CV+ (low, high) log-duration bounds for a run whose fold models predict
        ``fold_log_p50`` (one log prediction per fold); ``novel``: whether the run is new to
        its job's history; False and None (unknown) take the calibration on every run, per job
        where the job has enough.

        >>> c = Calibration(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0, 0, 1, 1]))
        >>> c.bounds(np.array([1.0, 2.0]), 0.5)
        (0.9, 2.3)
        """
        pick = self._pick(job, novel)
        residuals = self.residuals if pick is None else self.residuals[pick]
        centres = fold_log_p50[self.folds if pick is None else self.folds[pick]]
        high = conformal_quantile(centres + residuals, level)
        low = -conformal_quantile(residuals - centres, level)
        return low, high

    def bounds_many(
        self,
        fold_log_p50: NDArray[np.float64],
        level: float,
        jobs: Sequence[str],
        novel: Sequence[bool | None],
    ) -> NDArray[np.float64]:
        """:meth:`bounds` of every row (``fold_log_p50``: one row of fold predictions each), as
        an array of (low, high) rows; rows drawing on the same calibration runs are taken
        together (:data:`BATCH_ROWS`)."""
        out = np.empty((len(jobs), 2), dtype=np.float64)
        groups: dict[int, tuple[NDArray[np.intp] | None, list[int]]] = {}
        for i, (job, flag) in enumerate(zip(jobs, novel, strict=True)):
            pick = self._pick(job, flag)
            groups.setdefault(-1 if pick is None else id(pick), (pick, []))[1].append(i)
        for pick, rows in groups.values():
            if len(rows) < BATCH_ROWS:
                for i in rows:
                    out[i] = self.bounds(fold_log_p50[i], level, jobs[i], novel[i])
                continue
            out[rows] = self._pooled(fold_log_p50[rows], level, pick)
        return out

    def _pooled(
        self, fold_log_p50: NDArray[np.float64], level: float, pick: NDArray[np.intp] | None
    ) -> NDArray[np.float64]:
        """(low, high) rows of :meth:`bounds` for rows sharing the calibration runs ``pick``."""
        residuals = self.residuals if pick is None else self.residuals[pick]
        folds = self.folds if pick is None else self.folds[pick]
        ranked = [np.sort(residuals[folds == k]) for k in range(fold_log_p50.shape[1])]
        rank = conformal_rank(len(residuals), level)
        high = shifted_order_statistic(ranked, fold_log_p50, rank)
        low = -shifted_order_statistic(ranked, -fold_log_p50, rank)
        return np.column_stack([low, high])

    def _pick(self, job: str, novel: bool | None) -> NDArray[np.intp] | None:
        """The calibration runs a run's interval comes from (None: all of them)."""
        if novel and self.novel is not None:
            return self.novel_by_job.get(job, self.novel)
        return self.by_job.get(job)


def _by_job(jobs: Sequence[str], index: NDArray[np.intp]) -> dict[str, NDArray[np.intp]]:
    """Each job's entries of ``index`` where it has at least :data:`MIN_GROUP` of them."""
    groups: dict[str, list[int]] = {}
    for i in index:
        groups.setdefault(jobs[int(i)], []).append(int(i))
    return {job: np.array(ix, dtype=np.intp) for job, ix in groups.items() if len(ix) >= MIN_GROUP}
