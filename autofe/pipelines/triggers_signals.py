"""The three signals that call for a retraining, as pure functions of what the home holds.

- **Degradation** (served predictions got worse than promised): over the served model's last
  ``window`` reported actuals, the rolling MAPE above its holdout MAPE by ``mape_rise`` or the
  80 % coverage below 80 % − ``coverage_drop``; and, per job, the job's last ``job_runs``
  actuals each off by ``job_factor`` or more in the same direction, outside their 80 % interval.
  The per-job rule is what catches one job going wrong fast: a job that is a tenth of the
  traffic moves a 50-run window by a few points only, long after its users noticed.
- **Drift** (the nightly report's per-job error drift): a job whose error on the runs since
  the champion's training rose by ``drift_change`` on at least ``drift_runs`` runs.
- **Skew** (training–serving skew): the PSI between the features runs were served with and
  the features training computes for the same runs once they are ingested
  (:mod:`autofe.pipelines.triggers_skew` says why the same runs); fires when the shifted
  features carry ``skew_share`` of the model's gain (importance-weighted, so a shifted
  feature the model hardly uses does not retrain it).

Each returns :class:`Signal` objects: the evidence, and whether it is severe enough to
regenerate from scratch rather than warm-start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from autofe.modeling.psi import psi
from autofe.pipelines.serve_ui_actuals import Actual

Kind = Literal["degradation", "drift", "skew", "scheduled"]
NOMINAL_80 = 0.80


@dataclass(frozen=True)
class TriggerSettings:
    """Thresholds of the three signals and what a firing asks of the scheduler.

    Read from ``HOME/triggers.json`` (any subset of these names) when it exists; every default
    is argued in docs/nightly.md, "Retraining triggers".
    """

    window: int = 50
    """Matched actuals of the served model in the global rolling window."""
    min_actuals: int = 20
    """No global verdict on fewer: a 20-run MAPE still moves by a third of itself by chance."""
    mape_rise: float = 0.5
    """Fire when the rolling MAPE exceeds the holdout MAPE by half of it again (1.5 x)."""
    coverage_drop: float = 0.15
    """Fire when the rolling 80 % coverage falls below 65 %: at 50 runs the standard error of
    an 80 % share is 5.7 points, so this is 2.6 standard errors down."""
    job_runs: int = 3
    """A job's last runs that must all be far off, on the same side (per-job degradation)."""
    job_factor: float = 2.0
    """How far off each must be (actual / predicted, or its inverse) — a factor of 2."""
    drift_change: float = 0.10
    """A job's MAPE rise (absolute) on the runs since the champion's training."""
    drift_runs: int = 5
    psi_shifted: float = 0.25
    """A feature counts as shifted above this PSI (the usual rule of thumb)."""
    skew_share: float = 0.2
    """Fire when shifted features carry this share of the model's split gain."""
    served_window: int = 500
    min_served: int = 200
    """Served runs compared (the latest ``served_window`` requests, those now ingested): with
    10 quantile bins PSI's small-sample bias is about 9 / n, 0.045 at 200, well below 0.25."""
    severe_factor: float = 2.0
    """Degradation with the rolling MAPE above this multiple of the holdout's (or coverage
    below 50 %), or skew on half the gain, regenerates from scratch."""
    account: str = "autofe-retraining"
    budget_usd: float | None = None
    """The account's budget per ``budget_period_s`` (None: no budget is set)."""
    budget_period_s: float = 86400.0
    shape: str = "m4.2xlarge x1"
    """Where ``autofe nightly`` runs: a catalog instance type and node count."""
    deadline_s: Mapping[str, float] = field(
        default_factory=lambda: {"P0": 2 * 3600.0, "P1": 8 * 3600.0, "P2": 24 * 3600.0}
    )
    budget_seconds: float = 300.0
    """The loop's time budget the retraining runs with (its duration prior)."""


@dataclass(frozen=True)
class Signal:
    """One condition that holds now, with its evidence."""

    kind: Kind
    subject: str
    """What it is about: ``model``, ``job:<id>`` or ``features``; one firing per subject and
    model version."""
    severe: bool
    reason: str
    evidence: Mapping[str, Any]


def degradation(
    actuals: Sequence[Actual],
    version: str,
    holdout_mape: float | None,
    settings: TriggerSettings,
) -> list[Signal]:
    """Degradation of ``version``'s served predictions on its reported actuals (oldest first)."""
    served = [a for a in actuals if a.model_version == version and a.p50_s is not None]
    found = _global(served[-settings.window :], holdout_mape, settings)
    by_job: dict[str, list[Actual]] = {}
    for actual in served:
        by_job.setdefault(actual.job_id, []).append(actual)
    for job, runs in sorted(by_job.items()):
        signal = _job_off(job, runs[-settings.job_runs :], settings)
        if signal is not None:
            found.append(signal)
    return found


def _global(
    recent: Sequence[Actual], holdout_mape: float | None, settings: TriggerSettings
) -> list[Signal]:
    if len(recent) < settings.min_actuals:
        return []
    mape = sum(_ape(a) for a in recent) / len(recent)
    bounded = [a for a in recent if a.low_80 is not None and a.high_80 is not None]
    coverage = sum(_inside(a) for a in bounded) / len(bounded) if bounded else None
    floor = NOMINAL_80 - settings.coverage_drop
    ceiling = None if holdout_mape is None else holdout_mape * (1.0 + settings.mape_rise)
    worse = ceiling is not None and mape > ceiling
    uncovered = coverage is not None and len(bounded) >= settings.min_actuals and coverage < floor
    if not (worse or uncovered):
        return []
    severe = (holdout_mape is not None and mape > settings.severe_factor * holdout_mape) or (
        coverage is not None and coverage < 0.5
    )
    parts = [f"rolling MAPE {mape:.1%} over the last {len(recent)} actuals"]
    parts.append(f"(holdout {holdout_mape:.1%}, limit {ceiling:.1%})" if ceiling else "")
    if coverage is not None:
        parts.append(f"80 % coverage {coverage:.1%} (limit {floor:.0%})")
    evidence = {
        "actuals": len(recent),
        "mape": round(mape, 4),
        "holdout_mape": holdout_mape,
        "mape_limit": None if ceiling is None else round(ceiling, 4),
        "coverage_80": None if coverage is None else round(coverage, 4),
        "coverage_limit": round(floor, 4),
        "first_run": recent[0].run_id,
        "last_run": recent[-1].run_id,
    }
    reason = " ".join(p for p in parts if p)
    return [Signal("degradation", "model", severe, reason, evidence)]


def _job_off(job: str, last: Sequence[Actual], settings: TriggerSettings) -> Signal | None:
    """The job's last runs all off by ``job_factor`` on one side, outside their interval."""
    if len(last) < settings.job_runs:
        return None
    ratios = [a.duration_s / a.p50_s for a in last if a.p50_s]
    bound = math.log(settings.job_factor)
    slow = all(math.log(r) >= bound for r in ratios) and all(_above(a) for a in last)
    fast = all(math.log(r) <= -bound for r in ratios) and all(_below(a) for a in last)
    if not (slow or fast):
        return None
    side = "slower" if slow else "faster"
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    reason = (
        f"job {job}: its last {len(last)} runs were {geo:.2f} x their predictions "
        f"({side}, each beyond {settings.job_factor:g} x and outside its 80 % interval)"
    )
    evidence = {
        "job_id": job,
        "runs": [a.run_id for a in last],
        "actual_over_predicted": [round(r, 4) for r in ratios],
    }
    return Signal("degradation", f"job:{job}", False, reason, evidence)


def _ape(actual: Actual) -> float:
    assert actual.p50_s is not None
    return abs(actual.p50_s - actual.duration_s) / actual.duration_s


def _inside(actual: Actual) -> bool:
    return not (_above(actual) or _below(actual))


def _above(actual: Actual) -> bool:
    """Slower than the interval's top (no interval: the p50 decides alone)."""
    return actual.high_80 is None or actual.duration_s > actual.high_80


def _below(actual: Actual) -> bool:
    return actual.low_80 is None or actual.duration_s < actual.low_80


def drift(report: Mapping[str, Any] | None, settings: TriggerSettings) -> list[Signal]:
    """Jobs whose error rose since the champion's training (a nightly ``drift`` report)."""
    if not report:
        return []
    found = []
    for job in report.get("jobs") or []:
        change, runs = job.get("change"), job.get("new_runs") or 0
        if not job_drifted(change, runs, settings):
            continue
        name = job.get("job_name") or job.get("job_id")
        reason = (
            f"job {name}: MAPE {job['holdout_mape']:.1%} on its holdout, {job['new_mape']:.1%} "
            f"on {runs} new runs (+{change * 100:.1f} points, limit "
            f"+{settings.drift_change * 100:.0f})"
        )
        found.append(Signal("drift", f"job:{job.get('job_id')}", False, reason, dict(job)))
    return found


def job_drifted(change: float | None, runs: int, settings: TriggerSettings) -> bool:
    """A job's MAPE rose by ``drift_change`` or more on at least ``drift_runs`` new runs (the
    drift trigger, and the dashboard's flag)."""
    return change is not None and runs >= settings.drift_runs and change >= settings.drift_change


def skew(
    training: Mapping[str, Sequence[Any]],
    served: Mapping[str, Sequence[Any]],
    gain: Mapping[str, float],
    settings: TriggerSettings,
) -> list[Signal]:
    """Training–serving skew: the same runs' features as training computes them and as they
    were served (each name's two lists in one run order)."""
    n = min((len(v) for v in served.values()), default=0)
    if n < settings.min_served:
        return []
    scores = {name: psi(training.get(name, ()), served[name]) for name in sorted(served)}
    shifted = {k: v for k, v in scores.items() if v > settings.psi_shifted}
    share = sum(gain.get(name, 0.0) for name in shifted)
    if share < settings.skew_share:
        return []
    top = sorted(shifted, key=lambda k: -gain.get(k, 0.0))[:5]
    named = ", ".join(f"{k} (PSI {shifted[k]:.2f})" for k in top)
    reason = (
        f"{len(shifted)} features carrying {share:.0%} of the model's gain shifted between "
        f"training and serving on the last {n} served runs: {named}"
    )
    evidence = {
        "served": n,
        "gain_share": round(share, 4),
        "shifted": {k: round(v, 4) for k, v in sorted(shifted.items(), key=lambda kv: -kv[1])},
    }
    return [Signal("skew", "features", share >= 0.5, reason, evidence)]
