"""Fit the runtime model: LightGBM on log duration, early stopping and calibration in time order.

The labelled runs (already in submit order) are cut into fit (70 %), stop (15 %) and calibrate
(15 %) blocks: early stopping picks the number of trees on the stop block, the model is refit
on fit + stop with that many trees, and conformal widths come from the calibrate block, which no
tree has seen. Seeds, one thread and LightGBM's deterministic mode make a fit repeatable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autofe.errors import ConfigError
from autofe.modeling.conformal import Calibration
from autofe.modeling.dataset import Dataset, Encoder
from autofe.modeling.splits import tail_split

MIN_RUNS = 30
PARAMS: dict[str, Any] = {
    "objective": "regression",
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_child_samples": 5,
    "subsample": 0.8,
    "subsample_freq": 1,
    "colsample_bytree": 0.8,
    "reg_lambda": 1.0,
    "n_jobs": 1,
    "deterministic": True,
    "force_row_wise": True,
    "verbose": -1,
}
MAX_TREES = 2000
PATIENCE = 50


@dataclass
class RuntimeModel:
    """A fitted model with what it needs to predict and to say how wrong it can be."""

    booster: Any
    features: tuple[str, ...]
    encoder: Encoder
    calibration: Calibration
    trees: int
    window: tuple[datetime, datetime]
    """Submit times of the first and last run it learnt from."""

    def predict_seconds(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Median duration predictions (seconds)."""
        return np.exp(np.asarray(self.booster.predict(x), dtype=np.float64))


def fit(data: Dataset, seed: int = 0) -> RuntimeModel:
    """Fit on ``data`` (time-ordered); see the module docstring for the three blocks."""
    if len(data) < MIN_RUNS:
        raise ConfigError(f"{len(data)} labelled runs are too few to train (need {MIN_RUNS})")
    if not data.features:
        raise ConfigError("no features to train on")
    fit_i, stop_i, cal_i = tail_split(len(data), (0.7, 0.15, 0.15))
    trees = _best_trees(data, fit_i, stop_i, seed)
    learnt = np.concatenate([fit_i, stop_i])
    booster = _regressor(seed, trees).fit(data.x[learnt], np.log(data.seconds[learnt]))
    log_pred = np.asarray(booster.predict(data.x[cal_i]), dtype=np.float64)
    jobs = [data.job_ids[i] for i in cal_i]
    calibration = Calibration.fit(np.log(data.seconds[cal_i]), log_pred, jobs)
    window = (data.submit_times[int(learnt[0])], data.submit_times[int(learnt[-1])])
    return RuntimeModel(booster, data.features, data.encoder, calibration, trees, window)


def _best_trees(data: Dataset, fit_i: NDArray[np.intp], stop_i: NDArray[np.intp], seed: int) -> int:
    import lightgbm

    model = _regressor(seed, MAX_TREES)
    model.fit(
        data.x[fit_i],
        np.log(data.seconds[fit_i]),
        eval_X=(data.x[stop_i],),
        eval_y=(np.log(data.seconds[stop_i]),),
        callbacks=[lightgbm.early_stopping(PATIENCE, verbose=False)],
    )
    return max(1, int(model.best_iteration_ or MAX_TREES))


def _regressor(seed: int, trees: int) -> Any:
    from lightgbm import LGBMRegressor

    return LGBMRegressor(n_estimators=trees, random_state=seed, **PARAMS)
