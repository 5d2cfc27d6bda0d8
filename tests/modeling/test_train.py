"""The runtime model on real runs (C3O): accuracy, determinism, honest intervals."""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb
import numpy as np
import pytest

from autofe.errors import ConfigError
from autofe.modeling.conformal import LEVELS
from autofe.modeling.dataset import FeatureValues, build_dataset, labelled_runs
from autofe.modeling.importance import gain_shares
from autofe.modeling.metrics import coverage, score
from autofe.modeling.train import anchor_log, fit


def test_model_is_accurate_and_its_intervals_cover(
    c3o: duckdb.DuckDBPyConnection, c3o_values: FeatureValues
) -> None:
    runs = labelled_runs(c3o)
    rng = np.random.default_rng(0)  # C3O's submit times are synthetic: order the runs at random
    runs = [runs[i] for i in rng.permutation(len(runs))]
    data = build_dataset(runs, c3o_values)
    cut = round(len(data) * 0.8)
    learn, holdout = np.arange(cut), np.arange(cut, len(data))
    model = fit(data.rows(learn), seed=1)
    test = data.rows(holdout)
    predicted, bounds = model.predict(test.x, test.job_ids)
    metrics = score(test.seconds, predicted)
    print(metrics)  # the numbers docs/modeling.md quotes (pytest -s)
    assert metrics.r2 > 0.9 and metrics.mape < 0.15, metrics
    for level in LEVELS:
        low, high = bounds[level]
        assert np.all(low <= predicted) and np.all(predicted <= high)
        measured = coverage(test.seconds, low, high)
        print(f"coverage of the {level:.0%} interval: {measured:.3f}")
        assert abs(measured - level) <= 0.05, (level, measured)


def test_fit_is_deterministic(c3o: duckdb.DuckDBPyConnection, c3o_values: FeatureValues) -> None:
    data = build_dataset(labelled_runs(c3o)[:600], c3o_values)
    a, b = fit(data, seed=3), fit(data, seed=3)
    assert a.trees == b.trees
    assert np.array_equal(a.predict_seconds(data.x), b.predict_seconds(data.x))


def test_text_features_are_coded_and_unseen_text_is_missing(
    c3o: duckdb.DuckDBPyConnection, c3o_values: FeatureValues
) -> None:
    data = build_dataset(labelled_runs(c3o)[:100], c3o_values)
    assert data.encoder.encode("node_type", "c4.2xlarge") >= 0
    assert np.isnan(data.encoder.encode("node_type", "never-seen.4xlarge"))
    assert np.isnan(data.encoder.encode("data_mb", None))


def test_too_few_runs_or_no_features_are_clear_errors(
    c3o: duckdb.DuckDBPyConnection, c3o_values: FeatureValues
) -> None:
    runs = labelled_runs(c3o)
    with pytest.raises(ConfigError, match="too few to train"):
        fit(build_dataset(runs[:10], c3o_values))
    with pytest.raises(ConfigError, match="no features"):
        fit(build_dataset(runs[:100], {}))


def _anchored_runs(
    n: int, seed: int, flag_factor: float, levels: int = 0, history_noise: float = 0.0
) -> tuple[list[tuple[str, str, datetime, float]], FeatureValues]:
    """Runs of 40 jobs whose duration is ``history_s`` (an estimate from earlier runs: a
    different level for every run, 10 s to 3 min, which trees can only cut into steps) with 5 %
    noise, times ``flag_factor`` when ``flag`` is set (3 runs in 10); ``size`` is an amount in
    proportion, not seconds; the first 20 runs have no history (a new job). With ``levels``,
    the runs share that many levels instead, and ``history_noise`` blurs the estimate."""
    rng = np.random.default_rng(seed)
    drawn = 10.0 * np.exp(rng.uniform(0.0, 3.0, levels or n))
    start = datetime(2024, 1, 1)
    runs, history, size, flag = [], {}, {}, {}
    for i in range(n):
        run_id, base = f"r{i:04d}", float(drawn[i % len(drawn)])
        on = bool(rng.random() < 0.3)
        seconds = base * (flag_factor if on else 1.0) * float(np.exp(rng.normal(0, 0.05)))
        runs.append((run_id, f"job{i % 40}", start + timedelta(minutes=i), seconds))
        blur = float(np.exp(rng.normal(0, history_noise))) if history_noise else 1.0
        history[run_id] = None if i < 20 else base * blur
        size[run_id], flag[run_id] = base * 1000.0, float(on)
    return runs, {"history_s": history, "size": size, "flag": flag}


def test_a_runtime_estimate_anchors_the_model_and_trees_move_it_only_where_it_helps() -> None:
    runs, values = _anchored_runs(400, 0, 1.0)
    data = build_dataset(runs, values)
    model = fit(data)
    assert [data.features[c] for c in model.anchors] == ["history_s"]  # not size, not flag
    assert model.residual is None  # the anchor alone is right: no tree can help
    history = data.x[:, data.features.index("history_s")]
    anchored = np.isfinite(history)
    assert np.allclose(model.predict_seconds(data.x)[anchored], history[anchored])
    assert gain_shares(model)["history_s"] >= 0.9

    runs, values = _anchored_runs(400, 1, 2.0)  # the anchor misses what `flag` doubles
    # without `size`, which would tell the plain booster each run's level as exactly
    data = build_dataset(runs, {k: v for k, v in values.items() if k != "size"})
    model = fit(data)
    assert model.residual is not None and model.residual_trees > 0
    predicted = model.predict_seconds(data.x)
    assert score(data.seconds[20:], predicted[20:]).mape < 0.1
    shares = gain_shares(model)
    assert shares["flag"] > 0.1 and shares["history_s"] > 0.3

    # five levels that `size` names exactly, a history estimate 15 % off: the plain booster wins
    runs, values = _anchored_runs(400, 1, 1.0, levels=5, history_noise=0.15)
    assert fit(build_dataset(runs, values)).anchors == ()


def test_runs_without_an_anchor_get_the_plain_booster() -> None:
    runs, values = _anchored_runs(400, 2, 2.0)
    data = build_dataset(runs, values)
    model = fit(data)
    x = data.x[:20].copy()  # no history: the plain booster's predictions
    plain = np.exp(model.booster.booster_.predict(x))
    assert np.all(np.isnan(anchor_log(x, model.anchors)))
    assert np.array_equal(model.predict_seconds(x), plain)
