"""Discrete-event simulation of a scheduling policy over a trace of jobs with true runtimes.

Public API (used by ``autofe schedule simulate``, ``autofe.evals.traces`` and
``benchmarks/schedule.py``)::

    simulate(jobset: JobSet, catalog: Catalog, policy: Policy | str,
             settings: SimulationSettings | None = None) -> SimulationResult
    simulate_all(jobset, catalog, policies: Iterable[Policy | str] = POLICIES, settings=None)
        -> list[SimulationResult]
    SimulationSettings(seed=0, startup_s=300.0, preemption_multiplier=1.0, view="model",
                       noise_sigma=0.0, fleet=FleetSettings(), budget_mode="hard",
                       fallback_after=2)
    SimulationResult(policy, jobs: tuple[JobRecord, ...], log: tuple[LogEntry, ...],
                     summary: Summary, spend_by_budget)   # see autofe.scheduler.report
    POLICIES: Mapping[str, Policy]                        # see autofe.scheduler.policies

The world: a job arrives at ``submit`` and is *ready* once its dependencies are done (a
failed, stopped or held dependency cancels it). The policy's queue order dispatches ready jobs;
the policy's chooser places a job the first time it is dispatched. A dispatched job needs
room in the fleet (nodes in flight ≤ ``max_nodes``; the first job that does not fit holds
back every job behind it, so no large or urgent job is starved) and, under a hard cap, a
reservation of its worst-case cost on its budgets. It then pays its cluster from that moment:
a start-up (none on a warm cluster), a restore when resuming from a checkpoint, then work at
the speed of its *true* runtime on that shape, pausing ``write_s`` after every ``interval_s``
of work to save a checkpoint. On spot, the cluster is preempted after an exponential time with
rate ``interruptions_per_h × nodes × preemption_multiplier``; the job loses the work since
its last checkpoint, its cluster, and goes back to the queue (on-demand if the runtime policy
falls back). Random numbers come from (seed, job, attempt), so a seed fixes a run and all
policies face the same luck on the same job.

What the scheduler *sees*: ``view="model"`` — the trace's estimates; ``"noisy-oracle"`` —
the true runtime times ``exp(N(0, noise_sigma))`` as median, with a 90 % interval of the same
spread. The oracle policy sees the true runtimes.
"""

from __future__ import annotations

from collections.abc import Iterable

from autofe.scheduler.catalog import Catalog
from autofe.scheduler.jobfile import JobSet, check_dependencies
from autofe.scheduler.policies import POLICIES, Policy, get_policy
from autofe.scheduler.report import SimulationResult
from autofe.scheduler.simulate_engine import Engine
from autofe.scheduler.simulate_world import SimulationSettings

__all__ = ["POLICIES", "SimulationResult", "SimulationSettings", "simulate", "simulate_all"]


def simulate(
    jobset: JobSet,
    catalog: Catalog,
    policy: Policy | str,
    settings: SimulationSettings | None = None,
) -> SimulationResult:
    """Run ``policy`` over the trace ``jobset``.

    Raises:
        ScheduleError: a job is invalid for the simulation (names it): an unknown instance
            type, a chosen shape without ``true_s``, no shape fitting the fleet.
    """
    chosen = get_policy(policy) if isinstance(policy, str) else policy
    check_dependencies(jobset.jobs)
    return Engine(jobset, catalog, chosen, settings or SimulationSettings()).run()


def simulate_all(
    jobset: JobSet,
    catalog: Catalog,
    policies: Iterable[Policy | str] = tuple(POLICIES),
    settings: SimulationSettings | None = None,
) -> list[SimulationResult]:
    """:func:`simulate` for each policy, on the same trace and seed."""
    return [simulate(jobset, catalog, policy, settings) for policy in policies]
