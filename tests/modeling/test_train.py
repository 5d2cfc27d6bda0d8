"""The runtime model on real runs (C3O): accuracy, determinism, honest intervals."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from autofe.errors import ConfigError
from autofe.modeling.conformal import LEVELS
from autofe.modeling.dataset import FeatureValues, build_dataset, labelled_runs
from autofe.modeling.metrics import coverage, score
from autofe.modeling.train import fit


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
