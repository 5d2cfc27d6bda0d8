"""``autofe lab generate``: data, plan, runs, workspace files, in that order, resumably."""

from __future__ import annotations

import importlib
import json
import logging
import os
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autofe.errors import ConfigError
from autofe.lab.data import prepare_data
from autofe.lab.plan import (
    FIRST_RUN_ID,
    LabJobLike,
    RunSpec,
    habit,
    plan_repeats,
    plan_runs,
    plan_sweep,
    script_version,
    select_jobs,
)
from autofe.lab.runner import Outcome, SparkHost, run_once
from autofe.lab.table_stats import write_table_stats
from autofe.lab.workspace_writer import (
    cluster_id,
    event_log_dir,
    read_end_ms,
    read_result_state,
    write_json,
    write_run,
    write_static,
)

log = logging.getLogger(__name__)

MANIFEST = "lab.json"
DEFAULT_SCALE_FACTORS = (0.01, 0.1)


@dataclass
class GenerateReport:
    """What one ``generate`` call did; ``run_seconds`` are this call's measured runs."""

    out: Path
    planned: int = 0
    executed: int = 0
    already_done: int = 0
    skipped_retries: int = 0
    failed: int = 0
    data_seconds: dict[float, float] = field(default_factory=dict)
    run_seconds: list[float] = field(default_factory=list)
    jvm_launches: int = 0


def load_jobs() -> tuple[LabJobLike, ...]:
    """The lab's job catalogue, ``autofe.lab.jobs.JOBS``.

    Raises:
        ConfigError: the catalogue is not installed.
    """
    try:
        module = importlib.import_module("autofe.lab.jobs")
    except ImportError as exc:
        raise ConfigError(f"the lab job catalogue autofe.lab.jobs is missing: {exc}") from exc
    return tuple(module.JOBS)


def generate(
    out: Path,
    runs: int,
    seed: int,
    days: int = 7,
    *,
    jobs: Sequence[LabJobLike] | None = None,
    job_names: Sequence[str] | None = None,
    scale_factors: Sequence[float] = DEFAULT_SCALE_FACTORS,
    sweep_points: int = 0,
    sweep_jobs: Sequence[str] = (),
    repeat_jobs: Sequence[str] = (),
    repeats: int = 0,
    recurring: bool = False,
    fresh_jvm: bool = False,
    adhoc: Adhoc | None = None,
    prime: bool = False,
    data_dir: Path | None = None,
    show_progress: bool = False,
) -> GenerateReport:
    """Run ``runs`` lab runs on local PySpark and write them as a workspace under ``out``.

    ``sweep_points`` and ``repeat_jobs``/``repeats`` append sweep and noise-floor runs to the
    plan, ``adhoc`` ad-hoc runs after them (see :func:`build_plan`). Re-running with the same
    arguments continues with the runs not yet written; a workspace generated without ad-hoc
    runs may be extended with them (its runs keep their ids).

    Raises:
        ConfigError: bad arguments, an unknown job name, an unwritable ``out``, or ``out``
            holding a lab workspace generated with other settings.
    """
    chosen = select_jobs(jobs if jobs is not None else load_jobs(), job_names)
    plan = build_plan(
        chosen,
        runs,
        seed,
        days,
        scale_factors,
        sweep_points,
        tuple(repeat_jobs),
        repeats,
        tuple(sweep_jobs),
        recurring,
        adhoc,
    )
    out = _writable(out)
    settings: dict[str, Any] = {
        "seed": seed,
        "runs": runs,
        "days": days,
        "scale_factors": list(scale_factors),
        "jobs": [j.name for j in chosen],
    }
    optional = {
        "sweep_points": sweep_points,
        "sweep_jobs": list(sweep_jobs),
        "repeat_jobs": list(repeat_jobs),
        "repeats": repeats,
        "recurring": recurring,
        "fresh_jvm": fresh_jvm,
        "prime_session": prime,
        **(adhoc.settings() if adhoc else {}),
    }
    # Only when used, so workspaces generated before these options existed still resume.
    settings |= {key: value for key, value in optional.items() if value}
    return execute_plan(out, plan, settings, days, data_dir, show_progress)


def build_plan(
    jobs: Sequence[LabJobLike],
    runs: int,
    seed: int,
    days: int,
    scale_factors: Sequence[float],
    sweep_points: int = 0,
    repeat_jobs: Sequence[str] = (),
    repeats: int = 0,
    sweep_jobs: Sequence[str] = (),
    recurring: bool = False,
    adhoc: Adhoc | None = None,
) -> list[RunSpec]:
    """The main plan, then ``sweep_points`` sweeps, ``repeats`` runs of each repeat job, and
    the ``adhoc`` runs.

    Sweep points go round ``sweep_jobs`` (default: every job). With ``recurring``, scheduled
    jobs keep their habit (:func:`autofe.lab.plan.habit`) in the main plan, and their sweep
    points use their usual parameters.

    Appended runs are numbered after the main plan; all of it is a pure function of the
    arguments.

    Raises:
        ConfigError: a count out of range or an unknown repeat job.
    """
    adhoc_runs = adhoc.runs if adhoc else 0
    _check_numbers(runs, days, scale_factors, sweep_points, repeat_jobs, repeats, adhoc_runs)
    extra = [
        *_sweep_plan(
            jobs,
            _named(jobs, sweep_jobs, "sweep"),
            SweepSettings(
                seed, days, tuple(scale_factors), sweep_points, not sweep_jobs, recurring
            ),
        ),
        *_repeat_plan(jobs, seed, days, scale_factors, repeat_jobs, repeats),
    ]
    plan = plan_runs(jobs, runs, seed, days, scale_factors, recurring) if runs else []
    first = FIRST_RUN_ID + len(plan)
    plan += [replace(spec, run_id=first + i) for i, spec in enumerate(extra)]
    if adhoc is not None:
        sfs = adhoc.scale_factors or tuple(scale_factors)
        plan += _adhoc_plan(jobs, seed, days, replace(adhoc, scale_factors=sfs), len(plan))
    return [replace(s, version=script_version(s.job, s.day, days, seed)) for s in plan]


def _named(jobs: Sequence[LabJobLike], names: Sequence[str], role: str) -> list[LabJobLike]:
    """The jobs called ``names`` (all of ``jobs`` when none are named).

    Raises:
        ConfigError: a name is not among ``jobs``.
    """
    if not names:
        return list(jobs)
    by_name = {j.name: j for j in jobs}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise ConfigError(f"--{role}-jobs names jobs not in this workspace: {', '.join(unknown)}")
    return [by_name[n] for n in dict.fromkeys(names)]


@dataclass(frozen=True)
class SweepSettings:
    """How sweep points are drawn (see :func:`_sweep_plan`)."""

    seed: int
    days: int
    scale_factors: tuple[float, ...]
    points: int
    shuffle: bool = True
    recurring: bool = False


def _sweep_plan(
    jobs: Sequence[LabJobLike], swept: Sequence[LabJobLike], settings: SweepSettings
) -> list[RunSpec]:
    """Sweep points go round the ``swept`` jobs (so with at least as many points as jobs every
    job has a sweep); each point draws a day, scale factor and parameter seed.

    All jobs go round in a seeded order; named ``--sweep-jobs`` in the order given, so the first
    ones get the extra points when the points are not a multiple of the jobs. Job ids come
    from ``jobs`` (the whole workspace), so a job's sweep runs share its id.
    """
    order = list(swept)
    if settings.shuffle:
        random.Random(f"{settings.seed}:sweep-order").shuffle(order)
    plan: list[RunSpec] = []
    for k in range(settings.points):
        rng = random.Random(f"{settings.seed}:sweep-point:{k}")
        job, day = order[k % len(order)], rng.randrange(settings.days)
        sf, point_seed = rng.choice(list(settings.scale_factors)), rng.randrange(2**31)
        usual = None
        if settings.recurring and job.schedule != "adhoc":
            usual = habit(job, settings.seed, settings.days)
        plan += plan_sweep(job, jobs, point_seed, day, sf, usual)
    return plan


@dataclass(frozen=True)
class Adhoc:
    """Ad-hoc runs appended to a workspace: one-off analyses with freshly drawn parameters.

    Scheduled jobs under ``--recurring`` keep their date windows and the main plan has one
    scale factor; ad-hoc runs of the same jobs over drawn windows (log-uniform lengths) and on
    other scale factors show how runtime follows the data a run reads.
    """

    runs: int
    jobs: tuple[str, ...] = ()
    scale_factors: tuple[float, ...] = ()

    def settings(self) -> dict[str, Any]:
        """How the manifest records them (only what was given)."""
        given = {
            "adhoc_runs": self.runs,
            "adhoc_jobs": list(self.jobs),
            "adhoc_scale_factors": list(self.scale_factors),
        }
        return {key: value for key, value in given.items() if value}


ADHOC_KEYS = ("adhoc_runs", "adhoc_jobs", "adhoc_scale_factors")


def _adhoc_plan(
    jobs: Sequence[LabJobLike], seed: int, days: int, adhoc: Adhoc, before: int
) -> list[RunSpec]:
    """The ``adhoc`` runs, numbered after the ``before`` planned ones: not recurring, drawn
    from their own random streams (so adding them leaves every other run as it was), tagged
    ``adhoc``.

    Raises:
        ConfigError: no runs, a job not in the workspace, or a scale factor ≤ 0.
    """
    if adhoc.runs <= 0:
        raise ConfigError(f"--adhoc-runs must be positive, got {adhoc.runs}")
    if any(sf <= 0 for sf in adhoc.scale_factors):
        raise ConfigError(f"--adhoc-scale-factor must be positive, got {adhoc.scale_factors}")
    pool = _named(jobs, adhoc.jobs, "adhoc")
    drawn = plan_runs(
        jobs, adhoc.runs, seed, days, adhoc.scale_factors, pool=pool, namespace="adhoc"
    )
    return [
        replace(
            spec,
            run_id=spec.run_id + before,
            retry_of=None if spec.retry_of is None else spec.retry_of + before,
            tags={**spec.tags, "adhoc": True},
        )
        for spec in drawn
    ]


def _repeat_plan(
    jobs: Sequence[LabJobLike],
    seed: int,
    days: int,
    scale_factors: Sequence[float],
    names: Sequence[str],
    repeats: int,
) -> list[RunSpec]:
    """``repeats`` identical runs per named job, on the middle day of the calendar.

    Not the last day: the latest runs are the usual holdout, and it should be ordinary history,
    not dozens of copies of three jobs.
    """
    plan: list[RunSpec] = []
    for job in select_jobs(jobs, names) if names else []:
        sf = random.Random(f"{seed}:repeat-sf:{job.name}").choice(list(scale_factors))
        plan += plan_repeats(job, jobs, seed, repeats, days // 2, sf)
    return plan


def execute_plan(
    out: Path,
    plan: Sequence[RunSpec],
    settings: dict[str, Any],
    days: int,
    data_dir: Path | None = None,
    show_progress: bool = False,
) -> GenerateReport:
    """Run every planned run not yet in ``out`` (shared by generate, sweep and repeat modes)."""
    manifest = _open_manifest(out, settings)
    data_root = data_dir or out / ".data"
    report = GenerateReport(out, planned=len(plan))
    scale_factors = tuple(sorted({s.scale_factor for s in plan}))
    report.data_seconds = prepare_data(data_root, scale_factors, int(settings["seed"])).seconds
    write_static(out, _unique_jobs(plan))
    write_table_stats(out, data_root, scale_factors, days)
    host = SparkHost(
        fresh_jvm=bool(settings.get("fresh_jvm")), prime=bool(settings.get("prime_session"))
    )
    try:
        with _progress(show_progress, len(plan)) as advance:
            for spec in sorted(plan, key=execution_order):
                _one(out, spec, host, data_root, days, manifest, report)
                advance()
    finally:
        host.close()
    report.jvm_launches = host.jvm_launches
    return report


def execution_order(spec: RunSpec) -> tuple[bool, str, int]:
    """Noise-floor repeats last, so they can run on a machine left idle; then by driver memory.

    Grouping by driver memory keeps JVM restarts few (see ``runner.SparkHost``).
    """
    return ("repeat" in spec.tags, spec.config.driver_memory, spec.run_id)


def _one(
    out: Path,
    spec: RunSpec,
    host: SparkHost,
    data_root: Path,
    days: int,
    manifest: dict[str, Any],
    report: GenerateReport,
) -> None:
    if read_result_state(out, spec.run_id) is not None:
        report.already_done += 1
        return
    if spec.retry_of is not None and read_result_state(out, spec.retry_of) == "SUCCESS":
        report.skipped_retries += 1  # the node loss came after the work had finished
        return
    spec = _after_failure(out, spec)
    scratch = data_root / "scratch" / str(spec.run_id)
    outcome = run_once(
        spec, host, event_log_dir(out, spec), data_root, days, scratch, cluster_id(spec)
    )
    _record(manifest, spec, outcome)
    write_json(out / MANIFEST, manifest)
    write_run(out, spec, outcome)
    report.executed += 1
    report.failed += outcome.result_state != "SUCCESS"
    report.run_seconds.append(outcome.execution_ms / 1000)


RETRY_DELAY_MS = 60_000
"""A retry is submitted a minute after its failed attempt ended (the job's retry interval)."""


def _after_failure(out: Path, spec: RunSpec) -> RunSpec:
    """A retry's virtual submit time: after the attempt it retries ended, never at the same time."""
    if spec.retry_of is None:
        return spec
    ended = read_end_ms(out, spec.retry_of)
    if ended is None:
        return spec
    return replace(spec, submit_ms=max(spec.submit_ms, ended + RETRY_DELAY_MS))


def _record(manifest: dict[str, Any], spec: RunSpec, outcome: Outcome) -> None:
    manifest["runs"][str(spec.run_id)] = {
        "job": spec.job.name,
        "virtual_day": spec.day,
        "scale_factor": spec.scale_factor,
        "virtual_start_ms": spec.submit_ms,
        "real_start_ms": outcome.real_start_ms,
        "real_to_virtual_offset_ms": spec.submit_ms - outcome.real_start_ms,
        "result_state": outcome.result_state,
    }


def _open_manifest(out: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """The manifest of a resumed workspace, or a new one.

    Raises:
        ConfigError: ``out`` holds a lab workspace made with other settings.
    """
    path = out / MANIFEST
    if path.is_file():
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if _extends(manifest.get("settings"), settings):
            manifest["settings"] = settings
            write_json(path, manifest)
        if manifest.get("settings") != settings:
            raise ConfigError(
                f"{out} holds a lab workspace generated with other settings "
                f"({manifest.get('settings')}); use another --out"
            )
        return manifest
    manifest = {
        "settings": settings,
        "time_mapping": "JSON times are virtual; event-log times are real wall clock. "
        "virtual_ms = real_ms + runs[run_id].real_to_virtual_offset_ms",
        "runs": {},
    }
    write_json(path, manifest)
    return manifest


def _extends(recorded: Any, settings: dict[str, Any]) -> bool:
    """Whether ``settings`` are the ``recorded`` ones plus ad-hoc runs the workspace lacks."""
    if not isinstance(recorded, dict) or any(key in recorded for key in ADHOC_KEYS):
        return False
    base = {key: value for key, value in settings.items() if key not in ADHOC_KEYS}
    return base == recorded and base != settings


def _check_numbers(
    runs: int,
    days: int,
    scale_factors: Sequence[float],
    sweep_points: int,
    repeat_jobs: Sequence[str],
    repeats: int,
    adhoc_runs: int = 0,
) -> None:
    if runs < 0 or (runs == 0 and not sweep_points and not repeat_jobs and adhoc_runs <= 0):
        raise ConfigError(f"--runs must be positive, got {runs}")
    if days <= 0:
        raise ConfigError(f"--days must be positive, got {days}")
    if not scale_factors or any(sf <= 0 for sf in scale_factors):
        raise ConfigError(f"scale factors must be positive, got {list(scale_factors)}")
    if sweep_points < 0:
        raise ConfigError(f"--sweep-points must not be negative, got {sweep_points}")
    if repeat_jobs and repeats <= 0:
        raise ConfigError(f"--repeats must be positive, got {repeats}")
    if repeats and not repeat_jobs:
        raise ConfigError("--repeats needs --repeat-jobs")


def _writable(out: Path) -> Path:
    """``out``, created if needed.

    Raises:
        ConfigError: it cannot be created or written.
    """
    probe = out / ".lab-write-probe"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"cannot write to {out}: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK):
        raise ConfigError(f"cannot write to {out}")
    return out


def _unique_jobs(plan: Sequence[RunSpec]) -> dict[int, LabJobLike]:
    return {spec.job_id: spec.job for spec in plan}


@contextmanager
def _progress(show: bool, total: int) -> Iterator[Any]:
    if not show:
        yield lambda: None
        return
    from rich.progress import Progress

    started = time.perf_counter()
    with Progress(transient=False) as bar:
        task = bar.add_task("lab runs", total=total)
        yield lambda: bar.advance(task)
    log.info("lab runs took %.1f s", time.perf_counter() - started)
