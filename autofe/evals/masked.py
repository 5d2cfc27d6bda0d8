"""The protocols' held-out predictions on features computed with the test runs' outcomes hidden.

The masking itself (a copy of the warehouse without the held-out runs' post-execution data, and
each run's values from the copy that hid its own fold) is :mod:`autofe.modeling.masked`, which
the loop's evaluator uses as well; its names are re-exported here for the protocols' callers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from autofe.featurespec import FeatureSpec
from autofe.modeling.dataset import Dataset, FeatureValues, Labelled, build_dataset
from autofe.modeling.masked import (
    Folds,
    hide_outcomes,
    masked_values,
    out_of_fold_values,
    submit_time_only,
)

__all__ = [
    "FitPredict",
    "Folds",
    "hide_outcomes",
    "masked_out_of_fold",
    "masked_values",
    "out_of_fold_values",
    "submit_time_only",
]

FitPredict = Callable[[Dataset, NDArray[np.intp], NDArray[np.intp]], NDArray[np.float64]]


def masked_out_of_fold(
    db: Path,
    runs: Labelled,
    specs: Sequence[FeatureSpec],
    folds: Folds,
    fit_predict: FitPredict,
    extras: Mapping[str, FeatureValues],
) -> dict[str, NDArray[np.float64]]:
    """Per named set, each run's prediction (seconds) by its fold's model, on the out-of-fold
    values of ``specs`` (:func:`out_of_fold_values`) plus the set's extra values, which read
    no outcomes (e.g. raw columns). ``fit_predict(data, train, test)`` returns log
    predictions for ``test``."""
    values = out_of_fold_values(db, runs, specs, folds)
    predicted = {name: np.full(len(runs), np.nan) for name in extras}
    for name, extra in extras.items():
        data = build_dataset(runs, {**extra, **values})
        for train, test in folds:
            predicted[name][test] = np.exp(fit_predict(data, train, test))
    return predicted
