"""A job's duration on one shape as a distribution: the model's interval made samplable.

The model gives a median and a 90 % interval per shape; the planner needs probabilities
("finishes within 40 minutes") and samples to push through preemptions and restarts. A
log-normal with the interval's median and spread (:attr:`Estimate.log_sigma`) gives both:
durations are positive and right-skewed, as job runtimes are.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from autofe.scheduler.jobs import Estimate

FloatArray = npt.NDArray[np.float64]
_STANDARD = NormalDist()


def p_within(estimate: Estimate, seconds: float) -> float:
    """Probability that the job takes at most ``seconds`` on this shape.

    >>> est = Estimate(600.0, 400.0, 900.0)
    >>> p_within(est, 600.0), round(p_within(est, 900.0), 3), p_within(est, 0.0)
    (0.5, 0.95, 0.0)
    """
    if seconds <= 0:
        return 0.0
    return _STANDARD.cdf(math.log(seconds / estimate.p50_s) / estimate.log_sigma)


def duration_quantile(estimate: Estimate, q: float) -> float:
    """The duration the job stays under with probability ``q`` (0 < q < 1).

    >>> est = Estimate(600.0, 400.0, 900.0)
    >>> duration_quantile(est, 0.5), round(duration_quantile(est, 0.95), 6)
    (600.0, 900.0)
    """
    return estimate.p50_s * math.exp(estimate.log_sigma * _STANDARD.inv_cdf(q))


def durations_from_normals(estimate: Estimate, z: FloatArray) -> FloatArray:
    """Durations for standard-normal draws ``z``: the same ``z`` for every shape of a job.

    Sharing the draws (common random numbers) makes shapes comparable sample by sample, so a
    choice between two shapes reflects their estimates, not sampling noise.

    >>> durations_from_normals(Estimate(600.0, 400.0, 900.0), np.zeros(2)).tolist()
    [600.0, 600.0]
    """
    return estimate.p50_s * np.exp(estimate.log_sigma * z)


def sample_durations(estimate: Estimate, n: int, seed: int) -> FloatArray:
    """``n`` durations drawn from the estimate's log-normal, reproducible for ``seed``.

    >>> s = sample_durations(Estimate(600.0, 400.0, 900.0), 4000, seed=1)
    >>> bool(abs(float(np.median(s)) - 600.0) < 15.0)
    True
    """
    rng = np.random.default_rng(seed)
    return durations_from_normals(estimate, rng.standard_normal(n))
