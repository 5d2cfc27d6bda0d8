"""The simulated world's settings, and what the scheduler sees of each job in it.

:class:`SimulationSettings` fixes the world (seed, start-up time, preemption rate, fleet,
budget mode) and the scheduler's view of it; :func:`seen_job` applies that view to one job
(the trace's estimates, a noisy oracle's, or the oracle's exact truth). See
:mod:`autofe.scheduler.simulate` for the world itself.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from typing import Literal

from autofe.errors import ConfigError, ScheduleError
from autofe.scheduler.fleet import FleetSettings
from autofe.scheduler.jobfile import MAX_SECONDS
from autofe.scheduler.jobs import Estimate, JobRequest, Shape
from autofe.scheduler.plan import MAX_PREEMPTION_MULTIPLIER

Z95 = 1.6448536269514722
MAX_NOISE_SIGMA = 10.0
"""The noisy oracle's largest log error: at 10 one standard deviation is already a factor of
22,000, and a far larger one would let ``math.exp`` of a draw overflow (an exception)."""


@dataclass(frozen=True)
class SimulationSettings:
    """The simulated world and what the scheduler sees of it.

    Args:
        seed: fixes preemptions and the noisy oracle's errors (same seed, same result).
        startup_s: seconds from asking for a cluster to running on it (paid).
        preemption_multiplier: scales every offer's interruption rate (the planner is told).
        view: ``"model"`` (the trace's estimates) or ``"noisy-oracle"`` (true runtimes with a
            log-normal relative error of ``noise_sigma``).
        fleet: capacity limits, warm clusters.
        budget_mode: ``"hard"`` enforces every budget as a cap; ``"off"`` only reports spend.
        fallback_after: spot preemptions tolerated before on-demand (autofe, oracle).
        max_preemptions: a job preempted this often is given up (status ``failed``), so a
            policy that never leaves spot cannot keep a stormy simulation running forever.
    """

    seed: int = 0
    startup_s: float = 300.0
    preemption_multiplier: float = 1.0
    view: Literal["model", "noisy-oracle"] = "model"
    noise_sigma: float = 0.0
    fleet: FleetSettings = field(default_factory=FleetSettings)
    budget_mode: Literal["hard", "off"] = "hard"
    fallback_after: int = 2
    max_preemptions: int = 100

    def __post_init__(self) -> None:
        if self.startup_s < 0 or self.preemption_multiplier < 0 or self.noise_sigma < 0:
            raise ConfigError(
                "simulation: startup_s, preemption_multiplier and noise_sigma must be >= 0"
            )
        too_big = (
            self.startup_s > MAX_SECONDS
            or self.preemption_multiplier > MAX_PREEMPTION_MULTIPLIER
            or self.noise_sigma > MAX_NOISE_SIGMA
        )
        if too_big:
            raise ConfigError(
                f"simulation: startup_s must be at most {MAX_SECONDS:.0f} s (10 years), "
                f"preemption_multiplier at most {MAX_PREEMPTION_MULTIPLIER:g}, noise_sigma at "
                f"most {MAX_NOISE_SIGMA:g}; got {self.startup_s}, {self.preemption_multiplier}, "
                f"{self.noise_sigma}"
            )
        if self.view not in ("model", "noisy-oracle") or self.budget_mode not in ("hard", "off"):
            raise ConfigError(
                f"simulation: view {self.view!r} / budget_mode {self.budget_mode!r} unknown"
            )
        if self.fallback_after < 1 or self.max_preemptions < 1:
            raise ConfigError("simulation: fallback_after and max_preemptions must be at least 1")


def noisy_estimate(estimate: Estimate, sigma: float, rng: random.Random) -> Estimate:
    """A noisy oracle's estimate: the true runtime off by a log-normal factor, with a 90 %
    interval as wide as that error.

    >>> est = noisy_estimate(Estimate(1, 1, 1, true_s=600.0), 0.0, random.Random(0))
    >>> (est.p50_s, est.low_s, est.high_s, est.true_s)
    (600.0, 600.0, 600.0, None)
    """
    if estimate.true_s is None:
        return replace(estimate, true_s=None)
    p50 = estimate.true_s * math.exp(sigma * rng.gauss(0.0, 1.0))
    return Estimate(p50, p50 * math.exp(-Z95 * sigma), p50 * math.exp(Z95 * sigma))


def seen_job(job: JobRequest, settings: SimulationSettings, truth: bool = False) -> JobRequest:
    """The job as the scheduler sees it: no true runtimes, only shapes that fit the fleet;
    with ``truth`` (the oracle) only shapes whose true runtime is known, as exact estimates."""
    shapes: dict[str, Estimate] = {}
    for key, est in job.shapes.items():
        if shape_nodes(key) > settings.fleet.max_nodes:
            continue
        if truth:
            if est.true_s is not None:
                shapes[key] = Estimate(est.true_s, est.true_s, est.true_s)
        elif settings.view == "noisy-oracle":
            rng = random.Random(f"{settings.seed}/noise/{job.job_id}/{key}")
            shapes[key] = noisy_estimate(est, settings.noise_sigma, rng)
        else:
            shapes[key] = replace(est, true_s=None)
    if not shapes:
        raise ScheduleError(
            "no shape it can run on (a true runtime for the oracle, nodes within "
            f"max_nodes={settings.fleet.max_nodes})",
            job.job_id,
        )
    return replace(job, shapes=shapes)


def shape_nodes(key: str) -> int:
    """The nodes of the shape ``key`` names.

    >>> shape_nodes("m5.xlarge x4")
    4
    """
    return Shape.parse(key).nodes
