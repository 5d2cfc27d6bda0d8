"""Retraining triggers: when the served model's signals say so, ask the scheduler to retrain.

Checked after every batch of actuals (``autofe serve``, :func:`after_actuals`: degradation),
after every night (:func:`after_night`: all three, the drift from the night's own report,
skew on the served runs the night ingested) and on demand
(``autofe triggers check``, :func:`check_triggers`). A condition fires once per subject and
served model version (a model that keeps degrading is not re-reported on every actual), is
appended with its evidence to ``HOME/triggers.jsonl`` and becomes a retraining request
(:mod:`autofe.pipelines.retraining`); a promotion starts every subject afresh. The
signals and their thresholds are in :mod:`autofe.pipelines.triggers_signals`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autofe.errors import AutofeError, ConfigError
from autofe.json_file import append_json_line, read_json_lines
from autofe.modeling.registry import Version
from autofe.pipelines.home import Home
from autofe.pipelines.nightly_records import latest_done
from autofe.pipelines.retraining import held_request, request_retraining, retry_held
from autofe.pipelines.retraining_estimate import RetrainKind
from autofe.pipelines.served_log import read_served_tail
from autofe.pipelines.triggers_actuals import ActualsCursor, latest_actuals
from autofe.pipelines.triggers_signals import (
    Signal,
    TriggerSettings,
    degradation,
    drift,
    skew,
)
from autofe.pipelines.triggers_skew import paired_values
from autofe.scheduler.catalog import Catalog

SETTINGS_FILE = "triggers.json"


def load_settings(home: Home) -> TriggerSettings:
    """``HOME/triggers.json`` over the defaults (absent: the defaults).

    Raises:
        ConfigError: the file is not a JSON object, names an unknown setting or gives a
            value of the wrong type.
    """
    path = home.root / SETTINGS_FILE
    if not path.is_file():
        return TriggerSettings()
    try:
        given = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not readable as JSON ({exc})") from exc
    if not isinstance(given, dict):
        raise ConfigError(f"{path}: must be a JSON object of settings")
    known = {f.name: f for f in fields(TriggerSettings)}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(known)})")
    defaults = TriggerSettings()
    for name, value in given.items():
        default = getattr(defaults, name)
        numeric = isinstance(default, int | float) or (default is None and value is not None)
        if numeric and not _number(value):
            raise ConfigError(f"{path}: {name!r} must be a number, not {value!r}")
        if isinstance(default, str) and not isinstance(value, str):
            raise ConfigError(f"{path}: {name!r} must be text, not {value!r}")
    deadlines = given.get("deadline_s", {})
    if not isinstance(deadlines, dict) or not all(
        tier in defaults.deadline_s and _number(v) and v > 0 for tier, v in deadlines.items()
    ):
        tiers = ", ".join(defaults.deadline_s)
        raise ConfigError(f"{path}: 'deadline_s' must map tiers ({tiers}) to positive seconds")
    return TriggerSettings(**{**given, "deadline_s": {**defaults.deadline_s, **deadlines}})


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_triggers(path: Path) -> list[dict[str, Any]]:
    """Every firing in ``HOME/triggers.jsonl`` (a torn or unreadable line is skipped)."""
    return read_json_lines(path)


def after_actuals(
    home_root: Path, now: float | None = None, cursor: ActualsCursor | None = None
) -> list[dict[str, Any]]:
    """Degradation after a batch of actuals (skew needs the served runs ingested: nights);
    ``cursor``: the server's, which parses only the lines appended since its last check."""
    home = Home(home_root)
    version = home.registry.active()
    if version is None:
        return []
    settings = load_settings(home)
    actuals = cursor.read() if cursor is not None else latest_actuals(home.actuals)
    signals = degradation(actuals, version.name, holdout_mape(version), settings)
    return fire(home, signals, "actuals", version.name, settings, now)


def after_night(
    home_root: Path, record: Mapping[str, Any], now: float | None = None
) -> list[dict[str, Any]]:
    """Every signal after a night: its drift report speaks for the champion it kept."""
    home = Home(home_root)
    version = home.registry.active()
    if version is None:
        return []
    settings = load_settings(home)
    kept = record.get("decision") == "kept" and record.get("version") == version.name
    signals = drift(record.get("drift"), settings) if kept else []
    signals += _schema(record) if kept else []
    signals += _degradation(home, version, settings)
    signals += _skew(home, version, settings)
    return fire(home, signals, "nightly", version.name, settings, now)


def check_triggers(
    home_root: Path,
    now: float | None = None,
    scheduled: bool = False,
    catalog: Catalog | None = None,
) -> list[dict[str, Any]]:
    """On demand: every signal, the drift from the latest night that kept the champion; with
    ``scheduled``, also the day's scheduled P2 retraining.

    Raises:
        ConfigError: ``home_root`` is not an autofe home, or its trigger settings are wrong.
    """
    home = Home(home_root)
    if not home_root.is_dir():
        raise ConfigError(f"--home {home_root}: not a folder")
    settings = load_settings(home)
    version = home.registry.active()
    name = version.name if version else None
    signals: list[Signal] = []
    if version is not None:
        night = latest_done(home.root)
        if night and night.get("decision") == "kept" and night.get("version") == name:
            signals += drift(night.get("drift"), settings) + _schema(night)
        signals += _degradation(home, version, settings)
        signals += _skew(home, version, settings)
    if scheduled:
        day = datetime.fromtimestamp(_now(now), UTC).date().isoformat()
        reason = f"the scheduled nightly retraining of {day}"
        signals.append(Signal("scheduled", f"schedule:{day}", False, reason, {"day": day}))
    return fire(home, signals, "check", name, settings, now, catalog)


def fire(
    home: Home,
    signals: Sequence[Signal],
    source: str,
    version: str | None,
    settings: TriggerSettings,
    now: float | None = None,
    catalog: Catalog | None = None,
) -> list[dict[str, Any]]:
    """Record each new signal and turn it into a retraining request; retry a held one."""
    at = _now(now)
    held = held_request(home)
    if not signals and not held:
        return []  # the usual case after an actual: nothing to read or write
    seen = {
        (r.get("kind"), r.get("subject"), r.get("model_version"))
        for r in read_triggers(home.triggers)
    }
    fired = []
    retried = retry_held(home, settings, at, catalog) if held else None
    if held and retried is not None and retried.action != "held":
        since = datetime.fromtimestamp(held["since"], UTC).isoformat(timespec="seconds")
        why = f"retried the retraining held since {since}: {held['reason']}"
        signal = Signal(held["kind"], "held", False, why, {"held_since": held["since"]})
        fired.append(_line(home, signal, retried, source, version, at))
    for signal in signals:
        if (signal.kind, signal.subject, version) in seen:
            continue
        seen.add((signal.kind, signal.subject, version))
        mode: RetrainKind = "full" if signal.severe else "incremental"
        outcome = request_retraining(home, signal.kind, mode, settings, at, catalog)
        fired.append(_line(home, signal, outcome, source, version, at))
    return fired


def _degradation(home: Home, version: Version, settings: TriggerSettings) -> list[Signal]:
    actuals = latest_actuals(home.actuals)
    return degradation(actuals, version.name, holdout_mape(version), settings)


def _skew(home: Home, version: Version, settings: TriggerSettings) -> list[Signal]:
    if not home.served.is_file():
        return []
    tail = read_served_tail(home.served, settings.served_window)
    try:
        paired = paired_values(home, version, tail.records)
    except AutofeError:
        return []  # the version does not load on today's warehouse: the schema signal says so
    if paired is None:
        return []
    return skew(paired.training, paired.served, paired.gain, settings)


def _schema(record: Mapping[str, Any]) -> list[Signal]:
    """The champion no longer loads on the warehouse (a schema change) and was kept anyway:
    its features cannot be warm-started, so the retraining is full."""
    champion = record.get("champion") or {}
    error = champion.get("error")
    if not error:
        return []
    reason = f"the champion cannot be used on today's warehouse: {error}"
    return [Signal("drift", "schema", True, reason, {"error": error})]


def holdout_mape(version: Version) -> float | None:
    """The MAPE the served version was promoted on (the nightly window's, or a run's holdout)."""
    for block in (version.metrics.get("window"), version.metrics.get("holdout"), version.metrics):
        if isinstance(block, dict) and isinstance(block.get("mape"), int | float):
            return float(block["mape"])
    return None


def _line(
    home: Home, signal: Signal, outcome: Any, source: str, version: str | None, at: float
) -> dict[str, Any]:
    record = {
        "at": datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds"),
        "at_s": round(at, 3),
        "kind": signal.kind,
        "subject": signal.subject,
        "tier": outcome.tier,
        "source": source,
        "model_version": version,
        "reason": signal.reason,
        "evidence": dict(signal.evidence),
        "action": outcome.action,
        "handle": outcome.handle,
        "mode": outcome.mode,
        "outcome": outcome.reason,
        "plan": outcome.plan,
    }
    append_json_line(home.triggers, record, default=str)
    return record


def _now(now: float | None) -> float:
    return time.time() if now is None else now
