"""Configuration choice on third-party data: per job, which configuration would we have picked?

Each job ran on several configurations; every run is predicted out of fold, grouped by
configuration (the model never saw the configuration it prices), with the upper bound of a
90 % split-conformal interval. :func:`autofe.evals.cost.compare_policies` then picks, per job,
the cheapest configuration whose predicted p50 (or bound) meets the deadline.

Generated features may read other runs' outcomes, so for them every run's values are computed
with its own fold's runs hidden (:func:`autofe.evals.masked.out_of_fold_values`): a priced
configuration cannot read its own history, and neither can a calibration run, whose errors
would otherwise be smaller than the test runs' and the bound too tight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from autofe.evals.cost import Option
from autofe.evals.masked import out_of_fold_values
from autofe.evals.protocols import (
    Groups,
    K,
    grouped_folds,
    interval_highs,
    labelled_groups,
    out_of_fold,
)
from autofe.featurespec import FeatureSpec
from autofe.modeling.dataset import FeatureValues, Labelled, build_dataset
from autofe.warehouse.connect import open_warehouse

LEVEL = 0.9


def config_choice_options(db: Path, values: FeatureValues, seed: int = 0) -> list[Option]:
    """Per job and configuration, true and out-of-fold predicted seconds of ``values``' model."""
    runs, groups = labelled_groups(db)
    data = build_dataset(runs, values)
    folds = grouped_folds(groups.config, K, seed)
    p50 = out_of_fold(data, folds, seed)
    high = interval_highs(data, folds, groups.config, LEVEL, seed)
    return choice_options(db, runs, groups, p50, high)


def generated_choice_options(
    db: Path, specs: Sequence[FeatureSpec], extras: Mapping[str, FeatureValues], seed: int = 0
) -> dict[str, list[Option]]:
    """As :func:`config_choice_options` for generated ``specs``, per named set of ``extras``
    (values that read no outcomes, e.g. node-type facts; ``{}`` for the specs alone), on the
    specs' out-of-fold values: every run's computed with its own fold's outcomes hidden, so
    neither a priced configuration nor a calibration run reads its own configuration."""
    runs, groups = labelled_groups(db)
    values = out_of_fold_values(db, runs, specs, grouped_folds(groups.config, K, seed))
    return {n: config_choice_options(db, {**e, **values}, seed) for n, e in extras.items()}


def choice_options(
    db: Path,
    runs: Labelled,
    groups: Groups,
    p50: NDArray[np.float64],
    high: NDArray[np.float64],
) -> list[Option]:
    """One option per job and priced configuration: the means of its runs' true seconds,
    predicted p50 and interval bound (repeated runs of one configuration become one option)."""
    with open_warehouse(db, read_only=True) as con:
        prices = dict(con.execute("SELECT config_id, hourly_price FROM cluster_configs").fetchall())
    cells: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for run, config, p, h in zip(runs, groups.config, p50, high, strict=True):
        if prices.get(config) is not None:
            cells.setdefault((run[1], config), []).append((run[3], float(p), float(h)))
    return [
        Option(job, config, float(prices[config]), *map(float, np.mean(rows, axis=0)))
        for (job, config), rows in sorted(cells.items())
    ]
