"""Accuracy of runtime predictions, in the units users plan with (seconds and percent)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class Metrics:
    n: int
    r2: float
    """On log duration, where the model is fit (runtimes span decades)."""
    mae_s: float
    mape: float
    median_ape: float
    within_10: float
    within_20: float


def score(actual: NDArray[np.float64], predicted: NDArray[np.float64]) -> Metrics:
    """Metrics of ``predicted`` against ``actual`` seconds (both positive).

    >>> m = score(np.array([10.0, 20.0]), np.array([11.0, 20.0]))
    >>> round(m.mape, 3), m.within_10, m.mae_s
    (0.05, 1.0, 0.5)
    """
    ape = np.abs(predicted - actual) / actual
    log_a, log_p = np.log(actual), np.log(predicted)
    total = float(np.sum((log_a - log_a.mean()) ** 2))
    r2 = 1.0 - float(np.sum((log_a - log_p) ** 2)) / total if total > 0 else float("nan")
    return Metrics(
        n=len(actual),
        r2=r2,
        mae_s=float(np.mean(np.abs(predicted - actual))),
        mape=float(np.mean(ape)),
        median_ape=float(np.median(ape)),
        within_10=float(np.mean(ape <= 0.10)),
        within_20=float(np.mean(ape <= 0.20)),
    )


def coverage(
    actual: NDArray[np.float64], low: NDArray[np.float64], high: NDArray[np.float64]
) -> float:
    """Share of actual durations inside their interval."""
    return float(np.mean((actual >= low) & (actual <= high)))
