"""Conformal prediction intervals on log duration.

Out-of-fold residuals, each from a model that saw nothing submitted later (the time-ordered
folds of :func:`autofe.modeling.train.fit`), give the interval half-width in log space, so
intervals are multiplicative (a 10 s job gets ±seconds, a 1 h job ±minutes) and their
coverage holds under exchangeability without assuming any error distribution. ``by_job``
calibrates per job where a job has enough calibration runs (Mondrian conformal), falling back
to the global width elsewhere.
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


def conformal_quantile(residuals: NDArray[np.float64], level: float) -> float:
    """The finite-sample-corrected quantile: rank ceil((n + 1) · level) of n residuals.

    >>> conformal_quantile(np.arange(1.0, 10.0), 0.8)
    8.0
    """
    n = len(residuals)
    rank = min(n, math.ceil((n + 1) * level))
    return float(np.sort(residuals)[rank - 1])


@dataclass(frozen=True)
class Calibration:
    """Log-space half-widths per level, globally and per job."""

    widths: dict[float, float]
    by_job: dict[str, dict[float, float]] = field(default_factory=dict)
    n: int = 0

    @classmethod
    def fit(
        cls, log_actual: NDArray[np.float64], log_pred: NDArray[np.float64], jobs: Sequence[str]
    ) -> Calibration:
        residuals = np.abs(log_actual - log_pred)
        widths = {lv: conformal_quantile(residuals, lv) for lv in LEVELS}
        groups: dict[str, list[float]] = {}
        for job, r in zip(jobs, residuals, strict=True):
            groups.setdefault(job, []).append(float(r))
        by_job = {
            job: {lv: conformal_quantile(np.array(rs), lv) for lv in LEVELS}
            for job, rs in groups.items()
            if len(rs) >= MIN_GROUP
        }
        return cls(widths, by_job, len(residuals))

    def interval(self, p50_s: float, level: float, job: str = "") -> tuple[float, float]:
        """(low, high) seconds around a median prediction."""
        width = self.by_job.get(job, self.widths)[level]
        return p50_s * math.exp(-width), p50_s * math.exp(width)
