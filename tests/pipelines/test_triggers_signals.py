"""The three retraining signals at their thresholds (the replay on real runs is in
test_triggers_replay.py)."""

from __future__ import annotations

import random

from autofe.pipelines.serve_ui_actuals import Actual
from autofe.pipelines.triggers_signals import TriggerSettings, degradation, drift, skew

SETTINGS = TriggerSettings()


def actual(i: int, job: str, duration: float, p50: float, spread: float = 1.5) -> Actual:
    return Actual(
        float(i), float(i), f"r{i}", job, duration, p50, p50 / spread, p50 * spread, "v0001"
    )


def calibrated(n: int, seed: int = 0, jobs: int = 8) -> list[Actual]:
    """Actuals whose errors match a 37 % holdout MAPE, about 80 % inside the interval."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ratio = rng.lognormvariate(0.0, 0.32)  # |log| < log 1.5 for ~80 %
        out.append(actual(i, f"job{i % jobs}", 100.0 * ratio, 100.0))
    return out


def test_calibrated_errors_fire_nothing() -> None:
    for seed in range(20):
        assert degradation(calibrated(300, seed), "v0001", 0.30, SETTINGS) == []


def test_a_global_rise_fires_once_the_window_has_its_minimum() -> None:
    slow = [actual(i, f"job{i % 10}", 100.0, 40.0) for i in range(19)]
    assert degradation(slow, "v0001", 0.30, SETTINGS) == []  # 19 < min_actuals, 2 per job
    slow.append(actual(19, "job9", 100.0, 40.0))
    found = degradation(slow, "v0001", 0.30, SETTINGS)
    assert [s.subject for s in found] == ["model"]
    (signal,) = found
    assert signal.kind == "degradation" and signal.severe  # no actual inside its interval
    assert signal.evidence["mape"] == 0.6 and signal.evidence["coverage_80"] == 0.0
    assert "rolling MAPE 60.0% over the last 20 actuals" in signal.reason


def test_coverage_alone_fires_without_a_holdout_mape() -> None:
    wide = [
        actual(i, f"job{i % 8}", 100.0, 100.0 / (1.2 if i % 2 else 0.8), 1.1) for i in range(40)
    ]
    (signal,) = [s for s in degradation(wide, "v0001", None, SETTINGS) if s.subject == "model"]
    assert signal.evidence["coverage_80"] == 0.0 and signal.evidence["mape_limit"] is None


def test_one_job_three_times_slower_fires_on_its_third_run() -> None:
    history = calibrated(200)
    shifted = []
    for k in range(3):
        shifted.append(actual(200 + k, "job1", 300.0, 100.0))
        found = degradation(history + shifted, "v0001", 0.30, SETTINGS)
        assert [s.subject for s in found] == ([] if k < 2 else ["job:job1"])
    assert found[0].evidence["actual_over_predicted"] == [3.0, 3.0, 3.0]
    assert not found[0].severe


def test_a_job_off_on_both_sides_or_inside_its_interval_does_not_fire() -> None:
    mixed = [
        actual(0, "j", 300.0, 100.0),
        actual(1, "j", 30.0, 100.0),
        actual(2, "j", 300.0, 100.0),
    ]
    assert degradation(mixed, "v0001", 0.30, SETTINGS) == []
    wide = [actual(i, "j", 300.0, 100.0, spread=4.0) for i in range(3)]  # inside 80 %
    assert degradation(wide, "v0001", 0.30, SETTINGS) == []


def test_only_the_served_versions_actuals_count() -> None:
    old = [
        Actual(float(i), float(i), f"r{i}", "j", 300.0, 100.0, 80.0, 120.0, "v0000")
        for i in range(50)
    ]
    assert degradation(old, "v0001", 0.30, SETTINGS) == []


def test_drift_needs_the_rise_on_enough_runs() -> None:
    report = {
        "jobs": [
            {
                "job_id": "1",
                "job_name": "a",
                "holdout_mape": 0.2,
                "new_mape": 0.35,
                "change": 0.15,
                "new_runs": 6,
            },
            {
                "job_id": "2",
                "job_name": "b",
                "holdout_mape": 0.2,
                "new_mape": 0.5,
                "change": 0.3,
                "new_runs": 4,
            },
            {
                "job_id": "3",
                "job_name": "c",
                "holdout_mape": 0.2,
                "new_mape": 0.25,
                "change": 0.05,
                "new_runs": 9,
            },
        ]
    }
    (signal,) = drift(report, SETTINGS)
    assert signal.subject == "job:1" and "+15.0 points" in signal.reason
    assert drift(None, SETTINGS) == []


def test_skew_weighs_shifted_features_by_their_gain() -> None:
    rng = random.Random(1)
    training = {
        "a": [rng.gauss(0, 1) for _ in range(400)],
        "b": [rng.gauss(0, 1) for _ in range(400)],
    }
    same = {"a": [rng.gauss(0, 1) for _ in range(300)], "b": [rng.gauss(0, 1) for _ in range(300)]}
    moved = {"a": [rng.gauss(2, 1) for _ in range(300)], "b": same["b"]}
    assert skew(training, same, {"a": 0.9, "b": 0.1}, SETTINGS) == []
    (signal,) = skew(training, moved, {"a": 0.9, "b": 0.1}, SETTINGS)
    assert list(signal.evidence["shifted"]) == ["a"] and signal.severe  # 90 % of the gain
    assert skew(training, moved, {"a": 0.1, "b": 0.9}, SETTINGS) == []  # a barely used feature
    few = {k: v[:100] for k, v in moved.items()}
    assert skew(training, few, {"a": 0.9, "b": 0.1}, SETTINGS) == []  # below min_served
