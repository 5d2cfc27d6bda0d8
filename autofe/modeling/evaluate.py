"""Time-ordered cross-validation: out-of-fold predictions, accuracy and interval coverage.

Each fold's model is fit (with its own early-stopping and calibration blocks) on everything
submitted before the fold's test block, exactly as a deployed model would have been, so the
metrics are what a user would have seen, not an in-sample flattery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray

from autofe.errors import ConfigError
from autofe.modeling.conformal import LEVELS
from autofe.modeling.dataset import Dataset
from autofe.modeling.metrics import Metrics, coverage, score
from autofe.modeling.splits import time_folds
from autofe.modeling.train import Bounds, RuntimeModel, fit


@dataclass(frozen=True)
class Evaluation:
    """Out-of-fold predictions (seconds) for the test rows, in time order, and their scores."""

    run_ids: tuple[str, ...]
    actual: NDArray[np.float64]
    predicted: NDArray[np.float64]
    bounds: dict[float, tuple[NDArray[np.float64], NDArray[np.float64]]]
    metrics: Metrics
    coverage: dict[float, float]
    novel: NDArray[np.bool_] | None = None
    """Which test runs were new to their job's history, when known."""

    def as_dict(self) -> dict[str, object]:
        """Metrics and coverage (keys ``coverage_80`` / ``coverage_90``), JSON-ready; with
        novelty known, also the novel runs' count and each kind's coverage
        (``coverage_80_novel``, ``coverage_80_familiar``...), since a pooled coverage can
        hide intervals too narrow for the what-if runs and too wide for the reruns."""
        covered = {f"coverage_{round(lv * 100)}": round(c, 4) for lv, c in self.coverage.items()}
        return {
            **{k: _rounded(v) for k, v in asdict(self.metrics).items()},
            **covered,
            **self._by_novelty(),
        }

    def _by_novelty(self) -> dict[str, object]:
        if self.novel is None:
            return {}
        out: dict[str, object] = {"novel_runs": int(self.novel.sum())}
        for kind, rows in (("novel", self.novel), ("familiar", ~self.novel)):
            for level, (low, high) in sorted(self.bounds.items()):
                value = coverage(self.actual[rows], low[rows], high[rows]) if rows.any() else None
                key = f"coverage_{round(level * 100)}_{kind}"
                out[key] = None if value is None else round(value, 4)
        return out


def cross_validate(
    data: Dataset, folds: int = 5, min_train: float = 0.5, seed: int = 0
) -> Evaluation:
    """Expanding-window CV over ``data`` (see :func:`autofe.modeling.splits.time_folds`)."""
    ids: list[str] = []
    novel: list[bool] = []
    actual: list[float] = []
    predicted: list[float] = []
    low: dict[float, list[float]] = {level: [] for level in LEVELS}
    high: dict[float, list[float]] = {level: [] for level in LEVELS}
    for train, test in time_folds(len(data), folds, min_train, data.submit_times):
        model, block = fit(data.rows(train), seed), data.rows(test)
        p50, bounds = model.predict(block.x, block.job_ids, _flags(block))
        ids += block.run_ids
        novel += [] if block.novel is None else list(block.novel)
        actual += list(block.seconds)
        predicted += list(p50)
        for level in LEVELS:
            low[level] += list(bounds[level][0])
            high[level] += list(bounds[level][1])
    joined = {lv: (np.array(low[lv]), np.array(high[lv])) for lv in LEVELS}
    flags = None if data.novel is None else np.array(novel, dtype=bool)
    return _evaluation(ids, np.array(actual), np.array(predicted), joined, flags)


def evaluate_holdout(data: Dataset, cut: int, seed: int = 0) -> Evaluation:
    """Fit on the runs before index ``cut`` (time order), predict the rest.

    Raises:
        ConfigError: fewer than one run to predict, or too few to fit.
    """
    if not 0 < cut < len(data):
        raise ConfigError(f"holdout cut {cut} of {len(data)} runs leaves nothing to fit or predict")
    model = fit(data.rows(np.arange(cut)), seed)
    return evaluate_model(model, data.rows(np.arange(cut, len(data))))


def evaluate_model(model: RuntimeModel, block: Dataset) -> Evaluation:
    """A fitted model's predictions, intervals, metrics and coverage on ``block``."""
    p50, bounds = model.predict(block.x, block.job_ids, _flags(block))
    return _evaluation(block.run_ids, block.seconds, p50, bounds, block.novel)


def _flags(block: Dataset) -> list[bool | None] | None:
    """The block's novelty flags for :meth:`RuntimeModel.predict` (None when unknown)."""
    return None if block.novel is None else [bool(v) for v in block.novel]


def _rounded(value: object) -> object:
    return round(value, 4) if isinstance(value, float) else value


def _evaluation(
    ids: Sequence[str],
    actual: NDArray[np.float64],
    predicted: NDArray[np.float64],
    bounds: dict[float, Bounds],
    novel: NDArray[np.bool_] | None = None,
) -> Evaluation:
    covered = {lv: coverage(actual, *bounds[lv]) for lv in LEVELS}
    metrics = score(actual, predicted)
    return Evaluation(tuple(ids), actual, predicted, bounds, metrics, covered, novel)
