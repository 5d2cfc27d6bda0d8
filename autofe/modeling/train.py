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

**Anchored on history.** A feature set may hold estimates of the run's own duration read from
earlier runs (the job's median on the same configuration, a per-job scaling fit...). Trees
cannot pass such a number through: they cut it into steps, and on a few hundred runs the steps
are coarse (in a one-off comparison on the example workspace during issue #28, not a test,
LightGBM on the job x configuration median scored 29.8 % MAPE on the holdout where the median
itself scored 24.0 %). So the features that predict the
duration on their own within :data:`ANCHOR_MAX_LOG_ERROR` (median, over the training runs
that have them) form a chain, most accurate first; a run's first value in the chain is its
*anchor*, the model's offset, and a second booster learns the log ratio of the duration to
it, with as many trees as the inner folds show to help -- none when none do (then the anchor
is the prediction). Runs without an anchor (a new job) get the plain booster. The anchors are
point-in-time features (the gates prove they read only runs that ended before submission), so
their accuracy on the training runs is an out-of-sample accuracy, not a fit.
"""

from __future__ import annotations

import math
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
ANCHOR_MAX_LOG_ERROR = math.log(1.25)
"""A feature anchors the model when its values, read as seconds, are within 25 % of the
training runs' durations at the median: a runtime estimate (the job's earlier durations, a
scaling fit), not a size or a rate that happens to correlate."""
MIN_ANCHOR_RUNS = 10
"""Training runs a feature needs values on before its accuracy counts."""
RESIDUAL_OBJECTIVE = "regression_l1"
"""The anchored booster's loss: absolute log error. Its leaves move an anchor by the median
ratio of their runs, so a few runs far off their job's history (a script change, a straggler)
do not drag every anchored prediction with them, as squared error did (the example's log ratios
to the job x configuration median: mean 0.12, median 0.04)."""
MIN_RESIDUAL_RUNS = 20
"""Anchored runs every inner fold must train on for the anchored booster to be tried."""
ANCHOR_TRUST_LEVEL = 0.95
"""An anchored prediction is kept within the plain booster's prediction times e^(±w), w this
quantile of the plain booster's absolute log errors on the inner folds: a second opinion. A
history estimate can be poisoned in a way no training run shows (the mean of a job's last
three runs right after a run 60 times longer; in a one-off comparison on the example during
issue #28, not a test: MAPE 181 % on the latest quarter, 68 % with the guard, 21.2 % unchanged
for the generated catalog)."""


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
    anchors: tuple[int, ...] = ()
    """Columns of ``features`` whose values anchor a run, in the order tried (module docstring)."""
    residual: Any = None
    """The anchored booster (``lightgbm.LGBMRegressor`` on the log ratio to the anchor), or
    None when the anchor alone predicted the inner folds best."""
    residual_folds: tuple[Any, ...] = ()
    """The inner folds' anchored boosters (one per fold when ``residual`` is set)."""
    residual_trees: int = 0
    anchor_shares: tuple[float, ...] = ()
    """The share of the training runs each of ``anchors`` anchored (its importance)."""
    anchor_trust: float = math.inf
    """How far (in log) an anchored prediction may be from the plain booster's
    (:data:`ANCHOR_TRUST_LEVEL`)."""

    def predict_seconds(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Median duration predictions (seconds)."""
        return np.exp(self.predict_log(x))

    def predict_log(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Log-duration predictions: the anchor moved by the anchored booster, else the plain
        booster's."""
        plain = np.asarray(self.booster.booster_.predict(x), dtype=np.float64)
        residual = self.residual.booster_ if self.residual is not None else None
        offset = anchor_log(x, self.anchors)
        return _anchored(plain, offset, x, residual, self.residual_trees, self.anchor_trust)

    def fold_log(self, k: int, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Inner fold ``k``'s log-duration predictions (what CV+ centres its residuals on)."""
        plain = _predict_log(self.folds[k], x, self.trees)
        residual = self.residual_folds[k] if self.residual_folds else None
        offset = anchor_log(x, self.anchors)
        return _anchored(plain, offset, x, residual, self.residual_trees, self.anchor_trust)

    def predict(
        self,
        x: NDArray[np.float64],
        jobs: Sequence[str],
        novel: Sequence[bool | None] | None = None,
    ) -> Predicted:
        """Medians (seconds) and, per level, the (low, high) interval bounds of every row;
        ``novel`` says which rows are new to their job's history (None: unknown)."""
        p50 = self.predict_seconds(x)
        by_fold = np.column_stack([self.fold_log(k, x) for k in range(len(self.folds))])
        flags = [None] * len(jobs) if novel is None else list(novel)
        return p50, {level: self._bounds(p50, by_fold, jobs, flags, level) for level in LEVELS}

    def _bounds(
        self,
        p50: NDArray[np.float64],
        by_fold: NDArray[np.float64],
        jobs: Sequence[str],
        novel: Sequence[bool | None],
        level: float,
    ) -> Bounds:
        """CV+ bounds in seconds, widened to hold the median where every fold model disagrees
        with the final one (CV+ bounds the fold models' predictions, not the final model's)."""
        low, high = np.exp(self.calibration.bounds_many(by_fold, level, jobs, novel)).T
        return np.minimum(low, p50), np.maximum(high, p50)


def fit(data: Dataset, seed: int = 0) -> RuntimeModel:
    """Fit on ``data`` (time-ordered); see the module docstring for the folds."""
    if len(data) < MIN_RUNS:
        raise ConfigError(f"{len(data)} labelled runs are too few to train (need {MIN_RUNS})")
    if not data.features:
        raise ConfigError("no features to train on")
    folds = time_folds(len(data), INNER_FOLDS, INNER_MIN_TRAIN, data.submit_times)
    boosters = tuple(_early_stopped(data, train, test, seed).booster_ for train, test in folds)
    trees = max(1, round(float(np.median([_best(b) for b in boosters]))))
    model = regressor(seed, trees).fit(data.x, np.log(data.seconds))
    anchors = anchor_chain(data)
    residual = _residual(data, anchor_log(data.x, anchors), folds, seed)
    tests = [test for _, test in folds]
    plain = [_predict_log(b, data.x[t], trees) for b, t in zip(boosters, tests, strict=True)]
    trust = _trust(data, tests, plain)
    held = _held_out(data, tests, plain, anchors, residual, trust)
    if anchors and not _anchoring_helps(data, tests, plain, held, anchors):
        anchors, residual, held = (), (None, (), 0), plain
    calibration = _calibrate(data, tests, held)
    window = (data.submit_times[0], data.submit_times[-1])
    shares = anchor_shares(data.x, anchors)
    return RuntimeModel(
        model,
        data.features,
        data.encoder,
        calibration,
        trees,
        window,
        boosters,
        anchors,
        *residual,
        shares,
        trust,
    )


def _trust(data: Dataset, tests: Folded, plain: Folded) -> float:
    """:data:`ANCHOR_TRUST_LEVEL` quantile of the plain inner folds' absolute log errors."""
    log_y = np.log(data.seconds)
    errors = np.concatenate([np.abs(p - log_y[t]) for p, t in zip(plain, tests, strict=True)])
    return float(np.quantile(errors, ANCHOR_TRUST_LEVEL))


def _held_out(
    data: Dataset,
    tests: Folded,
    plain: Folded,
    anchors: Sequence[int],
    residual: Residual,
    trust: float,
) -> list[Any]:
    """Each inner fold's log predictions of its test runs, anchored where they have an anchor
    (``plain``: the plain fold boosters' predictions of the same runs)."""
    _, fold_residuals, residual_trees = residual
    out = []
    for k, (test, p) in enumerate(zip(tests, plain, strict=True)):
        x = data.x[test]
        moved = fold_residuals[k] if fold_residuals else None
        out.append(_anchored(p, anchor_log(x, anchors), x, moved, residual_trees, trust))
    return out


def anchor_chain(data: Dataset) -> tuple[int, ...]:
    """The columns that anchor runs (see the module docstring), most accurate first (ties by
    name): numeric features with values on at least :data:`MIN_ANCHOR_RUNS` runs whose median
    absolute log error as a duration is at most :data:`ANCHOR_MAX_LOG_ERROR`."""
    log_y = np.log(data.seconds)
    ranked = []
    for column, name in enumerate(data.features):
        if name in data.encoder.vocab:
            continue
        values = data.x[:, column]
        present = np.isfinite(values) & (values > 0)
        if int(present.sum()) < MIN_ANCHOR_RUNS:
            continue
        error = float(np.median(np.abs(np.log(values[present]) - log_y[present])))
        if error <= ANCHOR_MAX_LOG_ERROR:
            ranked.append((error, name, column))
    return tuple(column for _, _, column in sorted(ranked))


def anchor_log(x: NDArray[np.float64], anchors: Sequence[int]) -> NDArray[np.float64]:
    """Each row's log anchor: its first positive value among ``anchors`` (NaN when none).

    >>> anchor_log(np.array([[np.nan, 2.0], [1.0, 4.0]]), (0, 1)).round(3).tolist()
    [0.693, 0.0]
    """
    out = np.full(len(x), np.nan)
    for column in anchors:
        values = x[:, column]
        fill = np.isnan(out) & np.isfinite(values) & (values > 0)
        out[fill] = np.log(values[fill])
    return out


def anchor_shares(x: NDArray[np.float64], anchors: Sequence[int]) -> tuple[float, ...]:
    """The share of the rows of ``x`` each of ``anchors`` is the first value for.

    >>> anchor_shares(np.array([[np.nan, 2.0], [1.0, 4.0], [np.nan, np.nan]]), (0, 1))
    (0.3333, 0.3333)
    """
    taken = np.zeros(len(x), dtype=bool)
    shares = []
    for column in anchors:
        values = x[:, column]
        first = ~taken & np.isfinite(values) & (values > 0)
        shares.append(round(float(first.mean()), 4) if len(x) else 0.0)
        taken |= first
    return tuple(shares)


def _anchored(
    plain: NDArray[np.float64],
    offset: NDArray[np.float64],
    x: NDArray[np.float64],
    residual: Any,
    trees: int,
    trust: float,
) -> NDArray[np.float64]:
    """The anchor (moved by ``residual``'s first ``trees`` trees) where a row has one, kept
    within ``trust`` of the plain booster's ``plain`` log prediction; elsewhere ``plain``."""
    anchored = np.isfinite(offset)
    out = plain.copy()
    if anchored.any():
        moved = offset[anchored]
        if residual is not None:
            moved = moved + _predict_log(residual, x[anchored], trees)
        near = plain[anchored]
        out[anchored] = np.clip(moved, near - trust, near + trust)
    return out


Folded = Sequence[NDArray[Any]]
"""One array per inner fold (its test runs' indexes, or their predictions)."""
Residual = tuple[Any, tuple[Any, ...], int]
"""The anchored booster (or None), its inner folds' boosters and its tree count."""


def _residual(
    data: Dataset,
    offset: NDArray[np.float64],
    folds: Sequence[tuple[NDArray[np.intp], NDArray[np.intp]]],
    seed: int,
) -> Residual:
    """An anchored booster when the inner folds show that one helps.

    Each fold early-stops a booster on its anchored training runs against its anchored test
    runs. Their absolute log errors, pooled over the folds, are measured at a doubling grid of
    tree counts from none (the anchors alone) up; the count kept is the smallest whose mean
    error is within one standard error of the lowest (Breiman's one-standard-error rule): a
    few hundred runs cannot tell apart counts within it, and the smaller model moves the
    anchors less on runs unlike the training runs. No booster when no run is anchored or a
    fold has too few anchored runs to learn from.
    """
    anchored = np.isfinite(offset)
    pairs = [(train[anchored[train]], test[anchored[test]]) for train, test in folds]
    if any(len(tr) < MIN_RESIDUAL_RUNS or len(te) == 0 for tr, te in pairs):
        return None, (), 0
    boosters = tuple(
        _early_stopped(data, train, test, seed, RESIDUAL_OBJECTIVE, offset).booster_
        for train, test in pairs
    )
    trees = _one_standard_error(data, offset, boosters, [test for _, test in pairs])
    if trees < 1:
        return None, (), 0
    rows = np.flatnonzero(anchored)
    final = regressor(seed, trees, RESIDUAL_OBJECTIVE)
    final.fit(data.x[rows], np.log(data.seconds[rows]), init_score=offset[rows])
    return final, boosters, trees


def _one_standard_error(
    data: Dataset,
    offset: NDArray[np.float64],
    boosters: Sequence[Any],
    tests: Sequence[NDArray[np.intp]],
) -> int:
    """The tree count the anchored booster keeps (see :func:`_residual`)."""
    grown = max(int(b.current_iteration()) for b in boosters)
    grid = [0, *(2**i for i in range(grown.bit_length())), grown]
    log_y = np.log(data.seconds)
    means: list[tuple[float, int]] = []
    errors: dict[int, NDArray[np.float64]] = {}
    for trees in sorted(set(grid)):
        moved = [
            offset[t] + (_predict_log(b, data.x[t], trees) if trees else 0.0)
            for b, t in zip(boosters, tests, strict=True)
        ]
        errors[trees] = np.abs(np.concatenate(moved) - np.concatenate([log_y[t] for t in tests]))
        means.append((float(errors[trees].mean()), trees))
    best, at = min(means)
    bound = best + float(errors[at].std(ddof=1)) / math.sqrt(len(errors[at]))
    return min(trees for mean, trees in means if mean <= bound)


def _anchoring_helps(
    data: Dataset, tests: Folded, plain: Folded, held: Folded, anchors: Sequence[int]
) -> bool:
    """Whether to anchor: unless the inner folds predict their anchored test runs clearly
    better with the plain booster, by more than one standard error of the paired difference of
    absolute log errors. The anchor is the simpler model (no fitted parameter when no tree
    moves it), so it is kept where a few hundred runs cannot tell the two apart: on the
    example's earliest folds the plain booster was ahead by 0.02 in mean and behind in median.
    Where a run's own columns say far more than any history (C3O's data sizes and parameters),
    the plain booster wins clearly and the model is not anchored."""
    log_y = np.log(data.seconds)
    gaps = []
    for test, p, h in zip(tests, plain, held, strict=True):
        rows = np.isfinite(anchor_log(data.x[test], anchors))
        truth = log_y[test][rows]
        gaps.append(np.abs(h[rows] - truth) - np.abs(p[rows] - truth))
    gap = np.concatenate(gaps)
    if len(gap) < 2:
        return True
    return float(gap.mean()) <= float(gap.std(ddof=1)) / math.sqrt(len(gap))


def _calibrate(data: Dataset, tests: Folded, held: Folded) -> Calibration:
    """The folds' held-out runs, each predicted (``held``) by the fold model that held it out."""
    index = np.concatenate(tests)
    fold_of = np.concatenate([np.full(len(t), k, dtype=np.intp) for k, t in enumerate(tests)])
    jobs = [data.job_ids[i] for i in index]
    novel = None if data.novel is None else data.novel[index].tolist()
    return Calibration.fit(np.log(data.seconds[index]), np.concatenate(held), fold_of, jobs, novel)


def _early_stopped(
    data: Dataset,
    train: NDArray[np.intp],
    test: NDArray[np.intp],
    seed: int,
    objective: str = "regression",
    offset: NDArray[np.float64] | None = None,
) -> Any:
    """A regressor grown on ``train`` until ``test`` stops improving; with ``offset``, the
    anchored booster of those rows (their log anchors as the starting score)."""
    import lightgbm

    log_y = np.log(data.seconds)
    starts: dict[str, Any] = {}
    if offset is not None:
        starts = {"init_score": offset[train], "eval_init_score": [offset[test]]}
    model = regressor(seed, MAX_TREES, objective)
    model.fit(
        data.x[train],
        log_y[train],
        eval_X=(data.x[test],),
        eval_y=(log_y[test],),
        callbacks=[lightgbm.early_stopping(PATIENCE, verbose=False)],
        **starts,
    )
    return model


def _best(booster: Any) -> int:
    return int(booster.best_iteration or MAX_TREES)


def _predict_log(booster: Any, x: NDArray[np.float64], trees: int) -> NDArray[np.float64]:
    """Predictions with ``trees`` trees, or every tree the fold grew if it stopped sooner."""
    grown = int(booster.current_iteration())
    return np.asarray(booster.predict(x, num_iteration=min(trees, grown)), dtype=np.float64)


def regressor(seed: int, trees: int, objective: str = "regression") -> Any:
    """The product's LightGBM model (``lightgbm.LGBMRegressor``) with ``trees`` trees.

    :func:`fit` sizes ``trees`` by early stopping; the evaluation protocols pass a fixed count,
    so that what they score is this model, not a look-alike with other settings. The anchored
    booster uses :data:`RESIDUAL_OBJECTIVE`.
    """
    from lightgbm import LGBMRegressor

    return LGBMRegressor(
        n_estimators=trees, random_state=seed, **(PARAMS | {"objective": objective})
    )
