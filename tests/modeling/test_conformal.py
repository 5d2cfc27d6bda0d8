"""CV+ bounds taken many rows at a time equal the per-row bounds, to the bit."""

from __future__ import annotations

import duckdb
import numpy as np

from autofe.modeling.conformal import (
    BATCH_ROWS,
    LEVELS,
    Calibration,
    conformal_quantile,
    shifted_order_statistic,
)
from autofe.modeling.dataset import FeatureValues, build_dataset, labelled_runs
from autofe.modeling.train import fit


def _per_row(
    calibration: Calibration,
    by_fold: np.ndarray,
    level: float,
    jobs: list[str],
    novel: list[bool | None],
) -> np.ndarray:
    rows = [
        calibration.bounds(f, level, j, n) for f, j, n in zip(by_fold, jobs, novel, strict=True)
    ]
    return np.array(rows, dtype=np.float64).reshape(-1, 2)


def test_the_order_statistic_of_shifted_sorted_arrays_is_the_selection_over_their_sums() -> None:
    rng = np.random.default_rng(4)
    # ties within and across folds, values far apart in size (float sums round)
    residuals = np.round(rng.exponential(0.3, 2_000), 2) * rng.choice([1.0, 1e-9, 1e6], 2_000)
    folds = rng.integers(0, 4, 2_000)
    shifts = rng.normal(3.0, 2.0, (50, 4))
    shifts[:5] = 0.0
    ranked = [np.sort(residuals[folds == k]) for k in range(4)]
    for rank in (1, 2, 1_000, 1_801, 2_000):
        got = shifted_order_statistic(ranked, shifts, rank)
        want = [np.partition(s[folds] + residuals, rank - 1)[rank - 1] for s in shifts]
        assert np.array_equal(got, np.array(want)), rank
    # an empty fold contributes nothing
    got = shifted_order_statistic([ranked[0], np.array([])], shifts[:, :2], 3)
    want = [np.sort(s[0] + ranked[0])[2] for s in shifts]
    assert np.array_equal(got, np.array(want))


def test_bounds_of_many_rows_equal_each_rows_bounds_on_c3o(
    c3o: duckdb.DuckDBPyConnection, c3o_values: FeatureValues
) -> None:
    runs = labelled_runs(c3o)
    rng = np.random.default_rng(0)
    runs = [runs[i] for i in rng.permutation(len(runs))]
    data = build_dataset(runs, c3o_values)
    cut = round(len(data) * 0.8)
    model = fit(data.rows(np.arange(cut)), seed=1)
    test = data.rows(np.arange(cut, len(data)))
    by_fold = np.column_stack([model.fold_log(k, test.x) for k in range(len(model.folds))])
    jobs = list(test.job_ids)
    pooled = ["unseen job"] * len(jobs)  # no calibration of its own: every calibration run
    flags: list[bool | None] = [bool(v) for v in rng.integers(0, 2, len(jobs))]
    unknown: list[bool | None] = [None] * len(jobs)
    assert len(jobs) >= BATCH_ROWS
    for level in LEVELS:
        for who in (jobs, pooled):
            for novel in (unknown, flags):
                many = model.calibration.bounds_many(by_fold, level, who, novel)
                assert np.array_equal(many, _per_row(model.calibration, by_fold, level, who, novel))
    # the pooled path really ran on the whole calibration
    whole = model.calibration.bounds_many(by_fold, 0.9, pooled, unknown)
    first = by_fold[0][model.calibration.folds] + model.calibration.residuals
    assert whole[0, 1] == conformal_quantile(first, 0.9)
