"""Which runs a lab workspace holds: job, parameters, virtual submit time, configuration.

A plan is a pure function of the seed and the settings, so re-running ``generate`` rebuilds
the same plan and continues with the runs that have no ``runs/<run_id>.json`` yet. The
generate, sweep and noise-floor modes differ only in how they build the list of
:class:`RunSpec`; the runner and writer do not know which mode made it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from autofe.errors import ConfigError
from autofe.lab.clock import submit_ms
from autofe.lab.configs import SPOT_LOSS_SHARE, ClusterConfig, draw_config, sweep_configs

FIRST_RUN_ID = 1001
SCHEDULE_WEIGHT = {"hourly": 3.0, "daily": 1.0, "weekly": 0.3, "adhoc": 0.5}
OFF_HABIT_SHARE = 0.15
"""Recurring mode: the share of a scheduled job's runs that leave its habit (a backfill, a
manual re-run with other parameters, someone trying another cluster)."""


class LabJobLike(Protocol):
    """What the runner needs of a job (``autofe.lab.jobs.LabJob`` satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def script(self) -> str: ...
    @property
    def tables(self) -> tuple[str, ...]: ...
    @property
    def schedule(self) -> str: ...
    @property
    def variants(self) -> tuple[str, ...]: ...
    def params(self, rng: random.Random, day: int) -> dict[str, str]: ...


@dataclass(frozen=True)
class RunSpec:
    """One planned run. ``retry_of`` names the failed attempt this run retries."""

    run_id: int
    job: LabJobLike
    job_id: int
    day: int
    submit_ms: int
    params: dict[str, str]
    config: ClusterConfig
    scale_factor: float
    attempt: int = 0
    retry_of: int | None = None
    tags: dict[str, object] = field(default_factory=dict)
    version: int = 0
    """0 runs the job's script; k runs its k-th variant (a later version of the script)."""

    @property
    def script(self) -> str:
        return self.job.script if self.version == 0 else self.job.variants[self.version - 1]


def job_ids(jobs: Sequence[LabJobLike]) -> dict[str, int]:
    """Stable job ids: position in the job list, from 101."""
    return {job.name: 101 + i for i, job in enumerate(jobs)}


def select_jobs(jobs: Sequence[LabJobLike], names: Sequence[str] | None) -> list[LabJobLike]:
    """The jobs named (all when ``names`` is empty).

    Raises:
        ConfigError: a name is not a lab job.
    """
    if not names:
        return list(jobs)
    known = {job.name: job for job in jobs}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"unknown lab job {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return [known[n] for n in names]


def plan_runs(
    jobs: Sequence[LabJobLike],
    runs: int,
    seed: int,
    days: int,
    scale_factors: Sequence[float],
    recurring: bool = False,
    pool: Sequence[LabJobLike] | None = None,
    namespace: str = "run",
) -> list[RunSpec]:
    """``runs`` runs over ``days`` virtual days; spot losses add a retry run after them.

    Jobs are drawn by schedule weight (from ``pool``, default all ``jobs``; ids always come
    from ``jobs``), then a day, a time fitting the schedule, parameters, a scale factor and a
    configuration, from random streams named by ``namespace`` (another namespace, another
    independent plan). With ``recurring``, a scheduled (not ad-hoc) job keeps its
    :func:`habit` — the same parameter draws (its dates follow the day) and configuration —
    except for a share ``OFF_HABIT_SHARE`` of its runs, as production jobs do. Run ids follow
    virtual submit order.
    """
    ids = job_ids(jobs)
    drawn = list(pool if pool is not None else jobs)
    hours = {job.name: random.Random(f"{seed}:hour:{job.name}").randrange(24) for job in jobs}
    weights = [SCHEDULE_WEIGHT.get(job.schedule, 1.0) for job in drawn]
    drafts = []
    for i in range(runs):
        rng = random.Random(f"{seed}:{namespace}:{i}")
        job = rng.choices(drawn, weights=weights)[0]
        day = rng.randrange(days)
        when = submit_ms(rng, job.schedule, day, hours[job.name])
        params, sf, config = job.params(rng, day), rng.choice(list(scale_factors)), draw_config(rng)
        if recurring and job.schedule != "adhoc" and rng.random() >= OFF_HABIT_SHARE:
            params, config = _habitual(job, seed, day, days, rng)
        drafts.append((when, i, job, day, params, sf, config))
    drafts.sort(key=lambda d: (d[0], d[1]))
    plan: list[RunSpec] = []
    for when, _, job, day, params, sf, config in drafts:
        spec = RunSpec(len(plan) + FIRST_RUN_ID, job, ids[job.name], day, when, params, config, sf)
        plan.append(spec)
        if config.spot_loss:
            plan.append(_retry(spec, len(plan) + FIRST_RUN_ID))
    return plan


@dataclass(frozen=True)
class Habit:
    """How a scheduled job usually runs: a parameter seed and a configuration that changes once."""

    params_seed: int
    configs: tuple[ClusterConfig, ClusterConfig]
    change_day: int

    def params(self, job: LabJobLike, day: int) -> dict[str, str]:
        """The job's usual parameters on ``day`` (the same draws every run; dates move)."""
        return job.params(random.Random(self.params_seed), day)

    def config(self, day: int) -> ClusterConfig:
        return self.configs[0] if day < self.change_day else self.configs[1]


def habit(job: LabJobLike, seed: int, days: int) -> Habit:
    """A job's habit, drawn from the seed: its configuration changes on a day in the middle
    third of the calendar, so its history has runs before and after the change.

    >>> class J:
    ...     name = "j"
    >>> habit(J(), 1, 30) == habit(J(), 1, 30) and 10 <= habit(J(), 1, 30).change_day <= 20
    True
    """
    rng = random.Random(f"{seed}:habit:{job.name}")
    configs = (draw_config(rng), draw_config(rng))
    change_day = rng.randrange(days // 3, 2 * days // 3 + 1)
    return Habit(rng.randrange(2**31), configs, change_day)


def _habitual(
    job: LabJobLike, seed: int, day: int, days: int, rng: random.Random
) -> tuple[dict[str, str], ClusterConfig]:
    """A habitual run's parameters and configuration; whether a spot node is lost stays a
    per-run draw."""
    usual = habit(job, seed, days)
    config = usual.config(day)
    lost = config.spot and rng.random() < SPOT_LOSS_SHARE
    return usual.params(job, day), replace(config, spot_loss=lost)


def _retry(failed: RunSpec, run_id: int) -> RunSpec:
    """The retry of a spot attempt: a new cluster of the same kind, without the node loss."""
    return replace(
        failed,
        run_id=run_id,
        config=replace(failed.config, spot_loss=False),
        attempt=failed.attempt + 1,
        retry_of=failed.run_id,
    )


def plan_sweep(
    job: LabJobLike,
    jobs: Sequence[LabJobLike],
    seed: int,
    day: int,
    scale_factor: float,
    usual: Habit | None = None,
) -> list[RunSpec]:
    """The same job, parameters and data day under every candidate configuration (the job's
    usual parameters when its ``usual`` habit is given)."""
    rng = random.Random(f"{seed}:sweep:{job.name}:{day}")
    params = job.params(rng, day)
    if usual is not None:
        params = usual.params(job, day)
    when = submit_ms(rng, "adhoc", day, 0)
    configs = sweep_configs()
    tags: list[dict[str, object]] = [{"sweep": True} for _ in configs]
    return _same_work(job, jobs, day, when, params, scale_factor, configs, tags)


def plan_repeats(
    job: LabJobLike,
    jobs: Sequence[LabJobLike],
    seed: int,
    repeats: int,
    day: int,
    scale_factor: float,
) -> list[RunSpec]:
    """``repeats`` identical runs of one job: the noise floor of the measured runtime."""
    rng = random.Random(f"{seed}:repeat:{job.name}:{day}")
    params, config = job.params(rng, day), replace(draw_config(rng), spot=False, spot_loss=False)
    when = submit_ms(rng, "adhoc", day, 0)
    tags: list[dict[str, object]] = [{"repeat": i} for i in range(repeats)]
    return _same_work(job, jobs, day, when, params, scale_factor, [config] * repeats, tags)


def _same_work(
    job: LabJobLike,
    jobs: Sequence[LabJobLike],
    day: int,
    when: int,
    params: dict[str, str],
    scale_factor: float,
    configs: Sequence[ClusterConfig],
    tags: Sequence[dict[str, object]],
) -> list[RunSpec]:
    """Runs of the same job, parameters and data, one per (configuration, tags) pair."""
    job_id = job_ids(jobs)[job.name]
    return [
        RunSpec(
            FIRST_RUN_ID + i, job, job_id, day, when + i, params, config, scale_factor, tags=tag
        )
        for i, (config, tag) in enumerate(zip(configs, tags, strict=True))
    ]


def script_version(job: LabJobLike, day: int, days: int, seed: int) -> int:
    """Which version of its script a job runs on ``day``: the occasional script change.

    A job with variants switches to each in turn on days drawn from the seed in the middle
    third of the calendar, so its history has runs before and after every change.

    >>> class J:
    ...     name, variants = "j", ("v2",)
    >>> [script_version(J(), d, 30, 1) for d in (0, 29)]
    [0, 1]
    """
    if not job.variants:
        return 0
    rng = random.Random(f"{seed}:script-change:{job.name}")
    switches = sorted(rng.randrange(days // 3, 2 * days // 3 + 1) for _ in job.variants)
    return sum(1 for switch in switches if day >= switch)
