"""Time-ordered cross-validation on real runs (C3O)."""

from __future__ import annotations

import duckdb
import numpy as np

from autofe.modeling.conformal import LEVELS
from autofe.modeling.dataset import FeatureValues, build_dataset, labelled_runs
from autofe.modeling.evaluate import cross_validate
from autofe.modeling.metrics import score


def test_every_test_row_is_predicted_once_from_its_past(
    c3o: duckdb.DuckDBPyConnection, c3o_values: FeatureValues
) -> None:
    runs = labelled_runs(c3o)
    rng = np.random.default_rng(1)  # synthetic submit times: a seeded random history order
    runs = [runs[i] for i in rng.permutation(len(runs))][:1500]
    data = build_dataset(runs, c3o_values)
    result = cross_validate(data, folds=3, min_train=0.5)
    assert len(result.run_ids) == len(set(result.run_ids)) == len(data) - int(len(data) * 0.5)
    assert result.run_ids == data.run_ids[len(data) - len(result.run_ids) :]
    assert result.metrics == score(result.actual, result.predicted)
    assert result.metrics.mape < 0.2 and result.metrics.r2 > 0.85, result.metrics
    for level in LEVELS:
        low, high = result.bounds[level]
        assert np.all(low <= result.predicted) and np.all(result.predicted <= high)
        assert abs(result.coverage[level] - level) <= 0.08, (level, result.coverage[level])
