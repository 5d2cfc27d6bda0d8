"""A job's duration on one shape as a distribution: the model's interval made samplable.

The model gives a median and a 90 % interval per shape; the planner needs probabilities
("finishes within 40 minutes") and samples to push through preemptions and restarts. A
log-normal with the interval's median and spread (:attr:`Estimate.log_sigma`) gives both:
durations are positive and right-skewed, as job runtimes are.

Beyond the interval's upper end (the 95th percentile) that log-normal is an extrapolation, and
the targets that matter most live there (P0: 0.99). When the estimate carries a calibrated
99 % bound (:attr:`Estimate.high99_s`), the tail above the 95th percentile is a second
log-normal piece through it: the quantile function is continuous and increasing, log-linear in
the normal score on each side of z₉₅ (:func:`log_quantile`).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from autofe.scheduler.jobs import Estimate

FloatArray = npt.NDArray[np.float64]
_STANDARD = NormalDist()
Z95 = _STANDARD.inv_cdf(0.95)
Z99 = _STANDARD.inv_cdf(0.99)
LONGEST_SAMPLE_S = 1e12
"""No sampled duration is longer (about 31,700 years). Within a job file's bounds (estimates of
1 ms to 10 years, :mod:`autofe.scheduler.jobfile`) a median of 1 ms under a 99 % bound of 10
years gives the tail a log-spread near 39, so a draw far out in it could reach any float
(issue #27); clipping there keeps every cost finite and moves no plan a real job could have."""


def tail_sigma(estimate: Estimate) -> float:
    """The log-spread above the 95th percentile: through the 99 % bound when given, else the
    interval's own (one log-normal).

    >>> round(tail_sigma(Estimate(600.0, 400.0, 900.0, high99_s=1800.0)), 4)
    1.0171
    >>> tail_sigma(Estimate(600.0, 400.0, 900.0)) == Estimate(600.0, 400.0, 900.0).log_sigma
    True
    """
    sigma = estimate.log_sigma
    if estimate.high99_s is None:
        return sigma
    knot = math.log(estimate.p50_s) + sigma * Z95
    return max((math.log(estimate.high99_s) - knot) / (Z99 - Z95), 1e-6)


def log_quantile(estimate: Estimate, z: float) -> float:
    """log(duration) at normal score ``z``: the interval's log-normal up to z₉₅, the tail's
    above it.

    >>> est = Estimate(600.0, 400.0, 900.0, high99_s=1800.0)
    >>> round(math.exp(log_quantile(est, Z99)), 6), round(math.exp(log_quantile(est, 0.0)), 6)
    (1800.0, 600.0)
    """
    sigma = estimate.log_sigma
    base = math.log(estimate.p50_s)
    if z <= Z95:
        return base + sigma * z
    return base + sigma * Z95 + tail_sigma(estimate) * (z - Z95)


def p_within(estimate: Estimate, seconds: float) -> float:
    """Probability that the job takes at most ``seconds`` on this shape.

    >>> est = Estimate(600.0, 400.0, 900.0)
    >>> p_within(est, 600.0), round(p_within(est, 900.0), 3), p_within(est, 0.0)
    (0.5, 0.95, 0.0)
    """
    if seconds <= 0:
        return 0.0
    x = math.log(seconds / estimate.p50_s)
    sigma = estimate.log_sigma
    if x <= sigma * Z95:
        return _STANDARD.cdf(x / sigma)
    return _STANDARD.cdf(Z95 + (x - sigma * Z95) / tail_sigma(estimate))


def duration_quantile(estimate: Estimate, q: float) -> float:
    """The duration the job stays under with probability ``q`` (0 < q < 1).

    >>> est = Estimate(600.0, 400.0, 900.0)
    >>> duration_quantile(est, 0.5), round(duration_quantile(est, 0.95), 6)
    (600.0, 900.0)
    """
    return math.exp(log_quantile(estimate, _STANDARD.inv_cdf(q)))


def durations_from_normals(estimate: Estimate, z: FloatArray) -> FloatArray:
    """Durations for standard-normal draws ``z``: the same ``z`` for every shape of a job.

    Sharing the draws (common random numbers) makes shapes comparable sample by sample, so a
    choice between two shapes reflects their estimates, not sampling noise.

    Each duration is at most :data:`LONGEST_SAMPLE_S` (for a median of at least 1 ns).

    >>> durations_from_normals(Estimate(600.0, 400.0, 900.0), np.zeros(2)).tolist()
    [600.0, 600.0]
    >>> durations_from_normals(Estimate(1e-3, 1e-3, 1e-3, high99_s=3e8), np.array([40.0]))
    array([1.e+12])
    """
    sigma = estimate.log_sigma
    if estimate.high99_s is None:
        exponent = sigma * z
    else:
        tail = sigma * Z95 + tail_sigma(estimate) * (z - Z95)
        exponent = np.where(z <= Z95, sigma * z, tail)
    longest = math.log(LONGEST_SAMPLE_S) - math.log(estimate.p50_s)
    return estimate.p50_s * np.exp(np.minimum(exponent, longest))


def sample_durations(estimate: Estimate, n: int, seed: int) -> FloatArray:
    """``n`` durations drawn from the estimate's log-normal, reproducible for ``seed``.

    >>> s = sample_durations(Estimate(600.0, 400.0, 900.0), 4000, seed=1)
    >>> bool(abs(float(np.median(s)) - 600.0) < 15.0)
    True
    """
    rng = np.random.default_rng(seed)
    return durations_from_normals(estimate, rng.standard_normal(n))
