"""What the ``/ui`` dashboard shows, read from what the server already holds (no HTTP here).

- **Model**: the registry (versions with their metrics, the active pointer, the promotion
  history), the loaded model (its holdout metrics, feature specs and split-gain importance),
  and each night's ``HOME/nightly/<stamp>/nightly.json`` (champion against challenger);
- **Predictions**: the tail of ``HOME/actuals.jsonl`` (:mod:`~autofe.pipelines.serve_ui_actuals`)
  and the latest night's drift report;
- **Scheduler**: one :meth:`~autofe.scheduler.store.JobStore.snapshot` of
  ``HOME/scheduler.sqlite`` and each budget's current period.

Nothing here writes: a missing file is "no data yet", and an unreadable one (a corrupt line, a
damaged ``nightly.json``, a store that does not open) becomes a note on the page instead of an
error, so one bad file never hides the rest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autofe.errors import AutofeError
from autofe.modeling.importance import gain_shares
from autofe.pipelines.nightly_drift import PSI_MODERATE, PSI_SHIFTED
from autofe.pipelines.nightly_records import RECORD_FILE
from autofe.pipelines.serve_service import Loaded, Service
from autofe.pipelines.serve_ui_actuals import ActualsTail, read_actuals_tail
from autofe.pipelines.triggers import load_settings
from autofe.pipelines.triggers_signals import NOMINAL_80, TriggerSettings, job_drifted
from autofe.scheduler.budget_period import BudgetPeriod, budget_periods
from autofe.scheduler.store import Snapshot

NIGHTS_SHOWN = 90
"""The latest nights read for the Model page: three months of nightly runs."""
HISTORY_SHOWN = 200
JOBS_SHOWN = 200
EVENTS_SHOWN = 200
HEADLINE = ("mape", "median_ape", "r2", "within_20", "coverage_80")


@dataclass(frozen=True)
class VersionRow:
    name: str
    created: str
    headline: Mapping[str, float | None]
    features: int | None
    nightly: str | None
    active: bool


@dataclass(frozen=True)
class NightRow:
    stamp: str
    started: float | None
    status: str
    decision: str | None
    challenger_mape: float | None
    champion_mape: float | None
    deployed_mape: float | None
    version: str | None
    reason: str


@dataclass(frozen=True)
class FeatureRow:
    name: str
    category: str
    value_type: str
    importance: float | None
    gate: str
    kb_refs: tuple[str, ...]
    description: str


@dataclass(frozen=True)
class ModelData:
    active: str | None
    serving: str | None
    reload_error: str | None
    holdout: Mapping[str, float | None] | None
    """The served model's own holdout metrics (stored in its artifact)."""
    versions: tuple[VersionRow, ...]
    history: tuple[Mapping[str, Any], ...]
    """Promotion decisions, newest first."""
    nights: tuple[NightRow, ...]
    """Oldest first."""
    features: tuple[FeatureRow, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Drift:
    """The drift section of the latest night that has one."""

    stamp: str
    trained_through: str
    era_runs: int
    new_runs: int
    jobs: tuple[Mapping[str, Any], ...]
    features: tuple[Mapping[str, Any], ...]
    served: Mapping[str, Any] | None


@dataclass(frozen=True)
class PredictionsData:
    tail: ActualsTail
    holdout_mape: float | None
    mape_alert: float | None
    coverage_alert: float
    window: int
    drift: Drift | None
    notes: tuple[str, ...]
    settings: TriggerSettings
    """The retraining triggers' thresholds: the alert lines are where they fire."""


@dataclass(frozen=True)
class SchedulerData:
    snapshot: Snapshot | None
    budgets: tuple[BudgetPeriod, ...]
    notes: tuple[str, ...]


# ------------------------------------------------------------------------------ Model


def model_data(service: Service) -> ModelData:
    """The registry, the loaded model and the nights, for the Model page."""
    notes: list[str] = []
    loaded = service.live.current()
    registry = service.home.registry
    try:
        versions = registry.versions()
    except AutofeError as exc:
        notes.append(f"the registry could not be listed: {exc}")
        versions = []
    active = service.live.pointer
    rows = tuple(
        VersionRow(
            v.name,
            v.created,
            headline(v.metrics),
            _int(v.metrics.get("features")),
            _text(v.metrics.get("nightly")),
            v.name == active,
        )
        for v in versions
    )
    nights, night_notes = read_nights(service.home.nightly_runs, NIGHTS_SHOWN)
    return ModelData(
        active=active,
        serving=loaded.version if loaded else None,
        reload_error=service.live.error,
        holdout=_holdout(loaded),
        versions=rows,
        history=tuple(reversed(registry.history()[-HISTORY_SHOWN:])),
        nights=tuple(night_row(stamp, record) for stamp, record in nights),
        features=features_of(loaded),
        notes=(*notes, *night_notes),
    )


def headline(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """The comparable numbers of a version's metrics, wherever its writer put them (a
    nightly promotion stores its window score under ``window``, ``autofe train`` its holdout).

    >>> headline({"window": {"mape": 0.25, "r2": 0.5}})["mape"], headline({"mape": 0.3})["r2"]
    (0.25, None)
    """
    source = next(
        (metrics[k] for k in ("window", "holdout") if isinstance(metrics.get(k), Mapping)),
        metrics,
    )
    return {k: _number(source.get(k)) for k in HEADLINE}


def _holdout(loaded: Loaded | None) -> dict[str, float | None] | None:
    stored = loaded.artifact.metrics.get("holdout") if loaded else None
    return None if stored is None else {k: _number(v) for k, v in asdict(stored).items()}


def features_of(loaded: Loaded | None) -> tuple[FeatureRow, ...]:
    """The served model's features, most important first.

    Every feature of a registered model passed both gates (completeness and leakage): ``autofe
    train`` and the agent loop admit nothing else, and the verdict's details are not kept with
    the model, so the verdict is stated, not read.
    """
    if loaded is None:
        return ()
    shares = gain_shares(loaded.artifact.model)
    rows = [
        FeatureRow(
            spec.name,
            spec.category,
            spec.value_type,
            shares.get(spec.name),
            "passed",
            spec.kb_refs,
            spec.description or spec.rationale,
        )
        for spec in loaded.artifact.specs
    ]
    return tuple(sorted(rows, key=lambda r: (-(r.importance or 0.0), r.name)))


def read_nights(root: Path, limit: int) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The latest ``limit`` nights' records, oldest first, and a note per unreadable one.

    A folder without a record (a night killed outright) is listed as ``incomplete``.
    """
    if not root.is_dir() or limit <= 0:
        return [], []
    nights: list[tuple[str, dict[str, Any]]] = []
    notes: list[str] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir())[-limit:]:
        if not (folder / RECORD_FILE).is_file():
            nights.append((folder.name, {"status": "incomplete"}))
            continue
        night, note = read_night(folder)
        nights += [night] if night else []
        notes += [note] if note else []
    return nights, notes


def read_night(folder: Path) -> tuple[tuple[str, dict[str, Any]] | None, str | None]:
    """A night folder's record, or None and why not (None, None: it has no record)."""
    path = folder / RECORD_FILE
    if not path.is_file():
        return None, None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"nightly/{folder.name}/{RECORD_FILE} skipped: unreadable ({exc})"
    if not isinstance(record, dict):
        return None, f"nightly/{folder.name}/{RECORD_FILE} skipped: not a JSON object"
    return (folder.name, record), None


def night_row(stamp: str, record: Mapping[str, Any]) -> NightRow:
    """One night: its decision, and both models' MAPE on the comparison window.

    >>> r = night_row("20250101T000000Z", {"status": "done", "decision": "kept",
    ...     "challenger": {"window": {"mape": 0.4}}, "champion": None, "reason": "worse"})
    >>> r.challenger_mape, r.champion_mape, r.started
    (0.4, None, None)
    """
    return NightRow(
        stamp=stamp,
        started=_timestamp(record.get("started")),
        status=str(record.get("status", "unknown")),
        decision=_text(record.get("decision")),
        challenger_mape=_nested(record, "challenger", "window", "mape"),
        champion_mape=_nested(record, "champion", "window", "mape"),
        deployed_mape=_nested(record, "champion", "deployed", "mape"),
        version=_text(record.get("version")),
        reason=str(record.get("reason") or _nested_text(record, "error", "message") or ""),
    )


# ------------------------------------------------------------------------ Predictions


def predictions_data(service: Service) -> PredictionsData:
    """The latest actuals with their rolling scores and alert levels (the retraining
    triggers', ``HOME/triggers.json``), and the latest drift."""
    notes = []
    try:
        settings = load_settings(service.home)
    except AutofeError as exc:
        notes.append(f"trigger settings not read, defaults shown: {exc}")
        settings = TriggerSettings()
    tail = read_actuals_tail(service.home.actuals, window=settings.window)
    if tail.skipped:
        notes.append(
            f"{tail.skipped} unreadable line(s) of actuals.jsonl skipped (among the last read)"
        )
    holdout = _holdout(service.live.current())
    mape = holdout.get("mape") if holdout else None
    drift, drift_notes = latest_drift(service.home.nightly_runs, settings)
    return PredictionsData(
        tail=tail,
        holdout_mape=mape,
        mape_alert=None if mape is None else mape * (1.0 + settings.mape_rise),
        coverage_alert=NOMINAL_80 - settings.coverage_drop,
        window=settings.window,
        drift=drift,
        notes=(*notes, *drift_notes),
        settings=settings,
    )


def latest_drift(root: Path, settings: TriggerSettings) -> tuple[Drift | None, list[str]]:
    """The drift section of the newest of the latest nights that has one (newest first)."""
    if not root.is_dir():
        return None, []
    notes: list[str] = []
    newest = sorted((p for p in root.iterdir() if p.is_dir()), reverse=True)
    for folder in newest[:NIGHTS_SHOWN]:
        night, note = read_night(folder)
        notes += [note] if note else []
        if night is None or not isinstance(night[1].get("drift"), Mapping):
            continue
        try:
            return drift_of(night[0], night[1]["drift"], settings), notes
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            notes.append(f"nightly/{night[0]}: drift section skipped: malformed ({exc!r})")
    return None, notes


def drift_of(stamp: str, drift: Mapping[str, Any], settings: TriggerSettings) -> Drift:
    """A night's drift section, each job flagged where the drift trigger fires.

    Raises:
        KeyError, TypeError, ValueError: the section is not shaped as the nightly job writes it.
    """
    jobs = tuple({**row, "alert": job_alert(row, settings)} for row in drift.get("jobs") or ())
    actuals = drift.get("actuals")
    return Drift(
        stamp=stamp,
        trained_through=str(drift.get("trained_through", "")),
        era_runs=int(drift.get("era_runs", 0)),
        new_runs=int(drift.get("new_runs", 0)),
        jobs=jobs,
        features=tuple(dict(row) for row in drift.get("features") or ()),
        served=actuals.get("served") if isinstance(actuals, Mapping) else None,
    )


def job_alert(row: Mapping[str, Any], settings: TriggerSettings) -> bool:
    """
    >>> s = TriggerSettings()
    >>> job_alert({"change": 0.25, "new_runs": 9}, s), job_alert({"change": 0.25, "new_runs": 2}, s)
    (True, False)
    """
    change = _number(row.get("change"))
    return job_drifted(change, _int(row.get("new_runs")) or 0, settings)


PSI_LEVELS = (PSI_MODERATE, PSI_SHIFTED)
"""The feature drift levels the nightly report uses (stable / moderate / shifted)."""


# -------------------------------------------------------------------------- Scheduler


def scheduler_data(service: Service, now: float | None = None) -> SchedulerData:
    """The store's latest jobs, counts, events and budget periods (no store: nothing yet)."""
    try:
        snapshot = service.jobs.snapshot(JOBS_SHOWN, EVENTS_SHOWN, now)
    except AutofeError as exc:
        return SchedulerData(None, (), (f"the scheduler store could not be read: {exc}",))
    if snapshot is None:
        return SchedulerData(None, (), ())
    return SchedulerData(snapshot, tuple(budget_periods(snapshot)), ())


# ---------------------------------------------------------------------------- helpers


def _number(value: Any) -> float | None:
    """A finite number, else None (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _nested(record: Mapping[str, Any], *keys: str) -> float | None:
    value: Any = record
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return _number(value)


def _nested_text(record: Mapping[str, Any], *keys: str) -> str | None:
    value: Any = record
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return None if value is None else str(value)


def _timestamp(value: Any) -> float | None:
    """POSIX seconds of an ISO 8601 time, or None."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
