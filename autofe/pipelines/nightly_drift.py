"""How far the world moved from the champion: its features' distributions and its errors.

Two eras split the labelled runs at the champion's last training run (``trained_through``,
a submit time): the **training era** it learnt from and the **new runs** submitted since.

- Feature drift: each of the champion's features' PSI (``autofe.modeling.psi``) between
  the eras, values computed on today's warehouse. A tree learnt its splits on the first era;
  a shifted feature sends new runs down branches fit to other runs.
- Error drift per job: the champion's MAPE on its training-era holdout (its features refit on
  the era's runs before the latest 20 %, as ``autofe train`` scores; the saved champion saw
  those runs, so only the refit gives an honest error) against the deployed champion's MAPE
  on the new runs (it never saw them). A job whose error grew is where the model went stale.
- Reported actuals: ``HOME/actuals.jsonl`` (one ``{"run_id", "job_id", "duration_s"}`` per
  line, written by the prediction API) matched to warehouse runs by ``run_id``, scored against
  the deployed champion's prediction for that run; and, where a line carries the
  ``predicted_p50_s`` the API served, that prediction's error (what users saw).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from autofe.modeling.artifact import Artifact
from autofe.modeling.dataset import FeatureValues, Labelled, build_dataset
from autofe.modeling.evaluate import Evaluation, evaluate_holdout
from autofe.modeling.psi import psi
from autofe.modeling.splits import holdout_cut
from autofe.pipelines.nightly_compare import deployed_score, metrics_of
from autofe.pipelines.train import HOLDOUT

PSI_MODERATE = 0.1
PSI_SHIFTED = 0.25
"""The usual rule of thumb: below 0.1 stable, above 0.25 shifted."""

RunInfo = tuple[str, datetime | None]
"""A warehouse run's job id and submit time."""


@dataclass(frozen=True)
class Actual:
    """A finished run's real duration as reported to the prediction API, and the p50 the API
    had served for it (when it had predicted that run)."""

    run_id: str
    duration_s: float
    served_p50_s: float | None = None


def drift_report(
    artifact: Artifact,
    labelled: Labelled,
    values: FeatureValues,
    trained_through: datetime,
    job_names: Mapping[str, str],
    runs: Mapping[str, RunInfo],
    actuals: Path,
) -> dict[str, Any]:
    """The champion's feature and error drift, and its errors on reported actuals.

    Args:
        artifact: the deployed champion.
        labelled: the labelled runs of today's warehouse, in submit order.
        values: the champion's feature values on today's warehouse (name → run → value).
        trained_through: submit time of the last run the champion was trained on.
        job_names: job id → name.
        runs: every warehouse run's job id and submit time (to match actuals).
        actuals: ``HOME/actuals.jsonl`` (absent: no actuals section).

    Raises:
        ConfigError: too few training-era runs to refit the champion's features.
    """
    era = [r for r in labelled if r[2] <= trained_through]
    new = [r for r in labelled if r[2] > trained_through]
    era_data = build_dataset(era, values)
    holdout = evaluate_holdout(era_data, holdout_cut(era_data.submit_times, HOLDOUT))
    recent = deployed_score(artifact, new, values) if new else None
    jobs = {r[0]: r[1] for r in labelled}
    return {
        "trained_through": trained_through,
        "era_runs": len(era),
        "new_runs": len(new),
        "holdout": metrics_of(holdout),
        "new": metrics_of(recent),
        "features": feature_drift(era, new, values, artifact.model.features),
        "jobs": error_drift(holdout, recent, jobs, job_names),
        "actuals": actual_errors(artifact, actuals, values, runs, job_names),
    }


def feature_drift(
    era: Labelled, new: Labelled, values: FeatureValues, features: Sequence[str]
) -> list[dict[str, Any]]:
    """Each feature's PSI between the eras (None without new runs), most shifted first."""
    rows = []
    for name in features:
        column = values.get(name, {})
        shift = (
            psi([column.get(r[0]) for r in era], [column.get(r[0]) for r in new]) if new else None
        )
        rows.append({"feature": name, "psi": _round(shift), "level": psi_level(shift)})
    return sorted(rows, key=lambda row: (-(row["psi"] or 0.0), row["feature"]))


def psi_level(shift: float | None) -> str | None:
    """
    >>> psi_level(0.02), psi_level(0.2), psi_level(3.1), psi_level(None)
    ('stable', 'moderate', 'shifted', None)
    """
    if shift is None:
        return None
    if shift > PSI_SHIFTED:
        return "shifted"
    return "moderate" if shift > PSI_MODERATE else "stable"


def per_job(evaluation: Evaluation, jobs: Mapping[str, str]) -> dict[str, tuple[float, int]]:
    """MAPE and run count per job of an evaluation's runs.

    >>> from autofe.modeling.metrics import score
    >>> a, p = np.array([10.0, 20.0, 40.0]), np.array([11.0, 20.0, 20.0])
    >>> ev = Evaluation(("r1", "r2", "r3"), a, p, {}, score(a, p), {})
    >>> per_job(ev, {"r1": "j", "r2": "j", "r3": "k"})
    {'j': (0.05, 2), 'k': (0.5, 1)}
    """
    ape = np.abs(evaluation.predicted - evaluation.actual) / evaluation.actual
    errors: dict[str, list[float]] = {}
    for run_id, error in zip(evaluation.run_ids, ape, strict=True):
        errors.setdefault(jobs.get(run_id, ""), []).append(float(error))
    return {job: (float(np.mean(e)), len(e)) for job, e in sorted(errors.items())}


def error_drift(
    holdout: Evaluation,
    new: Evaluation | None,
    jobs: Mapping[str, str],
    job_names: Mapping[str, str],
) -> list[dict[str, Any]]:
    """Per job: training-era holdout MAPE, new-run MAPE and the change; largest rise first."""
    before = per_job(holdout, jobs)
    after = per_job(new, jobs) if new is not None else {}
    rows = []
    for job in sorted(before.keys() | after.keys()):
        old, now = before.get(job), after.get(job)
        change = now[0] - old[0] if old and now else None
        rows.append(
            {
                "job_id": job,
                "job_name": job_names.get(job, ""),
                "holdout_mape": _round(old[0] if old else None),
                "holdout_runs": old[1] if old else 0,
                "new_mape": _round(now[0] if now else None),
                "new_runs": now[1] if now else 0,
                "change": _round(change),
            }
        )
    return sorted(rows, key=lambda r: (r["change"] is None, -(r["change"] or 0.0), r["job_id"]))


def read_actuals(path: Path) -> tuple[list[Actual], int]:
    """The valid lines of an actuals file, and how many lines were not (skipped, counted).

    A line is valid when it is a JSON object with a ``run_id`` and a positive finite
    ``duration_s``; the API appends while we read, so a torn last line is just invalid.
    """
    valid: list[Actual] = []
    invalid = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        actual = _actual(line)
        if actual is None:
            invalid += 1
        else:
            valid.append(actual)
    return valid, invalid


def _actual(line: str) -> Actual | None:
    """
    >>> _actual('{"run_id": 7, "job_id": "1", "duration_s": 12.5}')
    Actual(run_id='7', duration_s=12.5, served_p50_s=None)
    >>> _actual('{"run_id": "7", "duration_s": 10, "predicted_p50_s": 8.0}').served_p50_s
    8.0
    >>> _actual('{"run_id": "7", "duration_s": -1}') is None, _actual('{"run_') is None
    (True, True)
    """
    try:
        data = json.loads(line)
        run_id, seconds = str(data["run_id"]), float(data["duration_s"])
        served = _positive(data.get("predicted_p50_s"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return Actual(run_id, seconds, served) if _positive(seconds) else None


def _positive(value: Any) -> float | None:
    """A positive finite number, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def actual_errors(
    artifact: Artifact,
    path: Path,
    values: FeatureValues,
    runs: Mapping[str, RunInfo],
    job_names: Mapping[str, str],
) -> dict[str, Any] | None:
    """The deployed champion's errors on the reported actuals it can match (None: no file)."""
    if not path.is_file():
        return None
    actuals, invalid = read_actuals(path)
    latest = {a.run_id: a for a in actuals}  # a run reported twice counts once, the last
    matched = [(rid, *runs[rid], a.duration_s) for rid, a in latest.items() if rid in runs]
    report: dict[str, Any] = {
        "path": str(path),
        "lines": len(actuals) + invalid,
        "invalid": invalid,
        "runs": len(latest),
        "matched": len(matched),
        "unmatched": len(latest) - len(matched),
        "metrics": None,
        "jobs": [],
        "served": _served(list(latest.values())),
    }
    if matched:
        scored = deployed_score(artifact, matched, values)
        by_job = per_job(scored, {m[0]: m[1] for m in matched})
        report["metrics"] = metrics_of(scored)
        report["jobs"] = [
            {"job_id": j, "job_name": job_names.get(j, ""), "mape": _round(e), "runs": n}
            for j, (e, n) in sorted(by_job.items(), key=lambda kv: -kv[1][0])
        ]
    return report


def _served(actuals: Sequence[Actual]) -> dict[str, Any] | None:
    """The API's own predictions (the ``predicted_p50_s`` it logged) against the actuals: the
    error users saw, whichever model served it (None: no line carries one)."""
    pairs = [(a.duration_s, a.served_p50_s) for a in actuals if a.served_p50_s is not None]
    if not pairs:
        return None
    ape = [abs(p - d) / d for d, p in pairs]
    return {"n": len(pairs), "mape": _round(float(np.mean(ape)))}


def _round(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 4)
