"""Fit the runtime model: LightGBM on log duration, its size and its intervals from time-ordered CV.

Inside the labelled runs (already in submit order), expanding-window folds each early-stop a
model on the block that follows its training runs. The median of their best tree counts sizes
the final model, which learns from every run: the latest runs, which the next job resembles
most, are not left out. Each fold's predictions of its block come from a model that saw nothing
submitted later, so their residuals are the errors a deployed model makes; the fold models are
kept beside the final one, and an interval is CV+ over them (:mod:`autofe.modeling.conformal`).
An earlier design held the latest 15 % out for calibration and stopped on the 15 % before it:
on the example workspace that kept 1 tree for the manual features (a constant) and 24 for the
generated ones. Seeds, one thread and LightGBM's deterministic mode make a fit repeatable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autofe.errors import ConfigError
from autofe.modeling.conformal import LEVELS, Calibration
from autofe.modeling.dataset import Dataset, Encoder
from autofe.modeling.splits import time_folds

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
INNER_FOLDS = 4
INNER_MIN_TRAIN = 0.5
"""The first half of the runs always trains; the rest is cut into the folds' blocks."""


Bounds = tuple[NDArray[np.float64], NDArray[np.float64]]
Predicted = tuple[NDArray[np.float64], dict[float, Bounds]]
"""Medians (seconds) and, per level, each row's (low, high) interval bounds."""


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
    folds: tuple[Any, ...]
    """The inner folds' boosters (``lightgbm.Booster``), each predicting with ``trees`` trees."""

    def predict_seconds(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Median duration predictions (seconds)."""
        return np.exp(np.asarray(self.booster.booster_.predict(x), dtype=np.float64))

    def predict(self, x: NDArray[np.float64], jobs: Sequence[str]) -> Predicted:
        """Medians (seconds) and, per level, the (low, high) interval bounds of every row."""
        p50 = self.predict_seconds(x)
        by_fold = np.column_stack([_predict_log(b, x, self.trees) for b in self.folds])
        return p50, {level: self._bounds(p50, by_fold, jobs, level) for level in LEVELS}

    def _bounds(
        self,
        p50: NDArray[np.float64],
        by_fold: NDArray[np.float64],
        jobs: Sequence[str],
        level: float,
    ) -> Bounds:
        """CV+ bounds in seconds, widened to hold the median where every fold model disagrees
        with the final one (CV+ bounds the fold models' predictions, not the final model's)."""
        pairs = [self.calibration.bounds(f, level, j) for f, j in zip(by_fold, jobs, strict=True)]
        low, high = np.exp(np.array(pairs, dtype=np.float64).reshape(-1, 2)).T
        return np.minimum(low, p50), np.maximum(high, p50)


def fit(data: Dataset, seed: int = 0) -> RuntimeModel:
    """Fit on ``data`` (time-ordered); see the module docstring for the folds."""
    if len(data) < MIN_RUNS:
        raise ConfigError(f"{len(data)} labelled runs are too few to train (need {MIN_RUNS})")
    if not data.features:
        raise ConfigError("no features to train on")
    folds = time_folds(len(data), INNER_FOLDS, INNER_MIN_TRAIN)
    boosters = tuple(_early_stopped(data, train, test, seed).booster_ for train, test in folds)
    trees = max(1, round(float(np.median([_best(b) for b in boosters]))))
    model = regressor(seed, trees).fit(data.x, np.log(data.seconds))
    calibration = _calibrate(data, [test for _, test in folds], boosters, trees)
    window = (data.submit_times[0], data.submit_times[-1])
    return RuntimeModel(model, data.features, data.encoder, calibration, trees, window, boosters)


def _calibrate(
    data: Dataset, tests: Sequence[NDArray[np.intp]], boosters: Sequence[Any], trees: int
) -> Calibration:
    """The folds' held-out runs, each predicted by the fold model that held it out."""
    held = np.concatenate(tests)
    fold_of = np.concatenate([np.full(len(t), k, dtype=np.intp) for k, t in enumerate(tests)])
    log_pred = np.concatenate(
        [_predict_log(b, data.x[t], trees) for b, t in zip(boosters, tests, strict=True)]
    )
    jobs = [data.job_ids[i] for i in held]
    return Calibration.fit(np.log(data.seconds[held]), log_pred, fold_of, jobs)


def _early_stopped(
    data: Dataset, train: NDArray[np.intp], test: NDArray[np.intp], seed: int
) -> Any:
    import lightgbm

    model = regressor(seed, MAX_TREES)
    model.fit(
        data.x[train],
        np.log(data.seconds[train]),
        eval_X=(data.x[test],),
        eval_y=(np.log(data.seconds[test]),),
        callbacks=[lightgbm.early_stopping(PATIENCE, verbose=False)],
    )
    return model


def _best(booster: Any) -> int:
    return int(booster.best_iteration or MAX_TREES)


def _predict_log(booster: Any, x: NDArray[np.float64], trees: int) -> NDArray[np.float64]:
    """Predictions with ``trees`` trees, or every tree the fold grew if it stopped sooner."""
    grown = int(booster.current_iteration())
    return np.asarray(booster.predict(x, num_iteration=min(trees, grown)), dtype=np.float64)


def regressor(seed: int, trees: int) -> Any:
    """The product's LightGBM model (``lightgbm.LGBMRegressor``) with ``trees`` trees.

    :func:`fit` sizes ``trees`` by early stopping; the evaluation protocols pass a fixed count,
    so that what they score is this model, not a look-alike with other settings.
    """
    from lightgbm import LGBMRegressor

    return LGBMRegressor(n_estimators=trees, random_state=seed, **PARAMS)
