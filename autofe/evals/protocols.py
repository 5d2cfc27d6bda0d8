"""Third-party runtime datasets under three protocols: unseen experiments, unseen
configurations, unseen hardware.

- ``point 5-fold``: runs grouped by experiment point (job, parameters and cluster
  configuration), the points dealt into five folds; the repeats of one point stay together, so
  no run is predicted from its own repetitions, but the job's runs with other inputs on the same
  configuration may be in training. C3O's "930 jobs" are its points; the reference figures in
  ``docs/results.md`` are matched best by this grouping.
- ``grouped 5-fold``: runs grouped by cluster configuration (node type × node count), the groups
  shuffled with a seed and dealt into five folds; a configuration is never in both a fold's
  training and test rows (repeated runs of one configuration would otherwise leak).
- ``leave-one-machine-type-out``: each node type in turn is the test set, the model trained on
  every other type: how will my job run on hardware it has never run on?

The raw-column sets get the product's LightGBM (log duration, its parameters, seeds and one
thread) with :data:`FIXED_TREES` trees instead of early stopping; a generated catalog gets the
model ``autofe run`` ships with it (:func:`product_fit_predict`: early-stopped on inner folds
and anchored on its runtime-estimate features), since that is what a user of the catalog
gets. Every set gets the same folds. The reference is LightGBM on the dataset's **raw
columns**: the run table's own known-at-submit columns plus the cluster fields its mapping
names; beside it, the simple baselines of :mod:`autofe.modeling.baselines` fit on each
fold's training runs (:func:`evaluate_baselines`: the job's median, the job x configuration
median, the Ernest-style fit; a run table has no history order, so the run-by-run medians are
left out).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autofe.errors import ConfigError
from autofe.evals.masked import masked_out_of_fold
from autofe.featurespec import FeatureSpec
from autofe.modeling.baselines import FACTS_SQL, as_facts, out_of_fold_baselines
from autofe.modeling.conformal import conformal_quantile
from autofe.modeling.dataset import Dataset, FeatureValues, Value, build_dataset, labelled_runs
from autofe.modeling.metrics import score
from autofe.modeling.train import fit, regressor
from autofe.schema import HARDWARE_COLUMNS
from autofe.warehouse.connect import open_warehouse

Folds = list[tuple[NDArray[np.intp], NDArray[np.intp]]]
K = 5
FIXED_TREES = 400
"""Trees of every protocol model: the product's model (:func:`autofe.modeling.train.regressor`)
grown to a fixed size instead of early-stopped, so every fold's model has the same trees."""
CLUSTER_COLUMNS = HARDWARE_COLUMNS


@dataclass(frozen=True)
class ProtocolResult:
    """Pooled out-of-fold scores of one feature set under one protocol."""

    dataset: str
    protocol: str
    features: str
    n_features: int
    folds: int
    runs: int
    mape: float
    r2: float
    within_10: float
    baseline: bool = False
    """A simple baseline (no feature set: ``n_features`` is 0) or a raw-column reference."""

    def as_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "protocol": self.protocol,
            "features": self.features,
            "n_features": self.n_features,
            "folds": self.folds,
            "runs": self.runs,
            "mape": round(self.mape, 4),
            "r2": round(self.r2, 4),
            "within_10": round(self.within_10, 4),
            "baseline": self.baseline,
        }


@dataclass(frozen=True)
class Groups:
    """Per labelled run (time order): its experiment point, configuration and node type."""

    config: tuple[str, ...]
    node_type: tuple[str, ...]
    point: tuple[str, ...]


def raw_values(db: Path, cluster_fields: Sequence[str]) -> FeatureValues:
    """The run table's known-at-submit columns and the mapped cluster fields, by run."""
    unknown = sorted(set(cluster_fields) - set(CLUSTER_COLUMNS))
    if unknown:
        raise ConfigError(f"not cluster columns: {unknown}; known: {list(CLUSTER_COLUMNS)}")
    values: dict[str, dict[str, Value]] = {}
    with open_warehouse(db, read_only=True) as con:
        rows = con.execute(
            "SELECT name, run_id, coalesce(CAST(value AS VARCHAR), value_text), value IS NOT NULL "
            "FROM run_attributes WHERE availability = 'known_at_submit'"
        ).fetchall()
        for name, run_id, value, numeric in rows:
            values.setdefault(f"attr_{name}", {})[run_id] = float(value) if numeric else value
        for column in cluster_fields:
            values[f"cluster_{column}"] = dict(
                con.execute(
                    f'SELECT r.run_id, c."{column}" FROM runs AS r '
                    "JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id"
                ).fetchall()
            )
    return values


def labelled_groups(db: Path) -> tuple[list[tuple[str, str, Any, float]], Groups]:
    """The labelled runs (time order) and each one's point, configuration and node type."""
    with open_warehouse(db, read_only=True) as con:
        runs = labelled_runs(con)
        rows = {
            r: (c or "", n or "", p)
            for r, c, n, p in con.execute(
                "SELECT r.run_id, r.cluster_config_id, c.node_type, concat_ws('|', r.job_id, "
                "coalesce(r.parameters::VARCHAR, ''), coalesce(r.cluster_config_id, '')) "
                "FROM runs AS r "
                "LEFT JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id"
            ).fetchall()
        }
    keys = [rows[r[0]] for r in runs]
    return runs, Groups(*(tuple(k[i] for k in keys) for i in range(3)))


def grouped_folds(groups: Sequence[str], k: int = K, seed: int = 0) -> Folds:
    """``k`` folds of whole groups, dealt round-robin after a seeded shuffle.

    >>> [t.tolist() for _, t in grouped_folds(["a", "a", "b", "c"], 2, seed=1)]
    [[0, 1, 2], [3]]
    """
    names = sorted(set(groups))
    if len(names) < k:
        raise ConfigError(f"{len(names)} groups are too few for {k} grouped folds")
    random.Random(seed).shuffle(names)
    fold_of = {name: i % k for i, name in enumerate(names)}
    labels = np.array([fold_of[g] for g in groups])
    return [(np.flatnonzero(labels != f), np.flatnonzero(labels == f)) for f in range(k)]


def leave_one_group_out(groups: Sequence[str]) -> Folds:
    """One fold per group: it is the test set, every other group the training set.

    >>> [t.tolist() for _, t in leave_one_group_out(["x", "y", "x"])]
    [[0, 2], [1]]
    """
    names = sorted(set(groups))
    if len(names) < 2:
        raise ConfigError("leave-one-out needs at least two node types")
    labels = np.array(list(groups))
    return [(np.flatnonzero(labels != n), np.flatnonzero(labels == n)) for n in names]


def out_of_fold(data: Dataset, folds: Folds, seed: int = 0) -> NDArray[np.float64]:
    """Each run's prediction (seconds) by the model of the fold that held it out."""
    predicted = np.full(len(data), np.nan)
    for train, test in folds:
        predicted[test] = np.exp(fit_predict(data, train, test, seed))
    return predicted


def fit_predict(
    data: Dataset, train: NDArray[np.intp], test: NDArray[np.intp], seed: int = 0
) -> NDArray[np.float64]:
    """Log-duration predictions for ``test`` by the protocol model fitted on ``train``."""
    model = regressor(seed, FIXED_TREES).fit(data.x[train], np.log(data.seconds[train]))
    return np.asarray(model.predict(data.x[test]), dtype=np.float64)


def product_fit_predict(
    data: Dataset, train: NDArray[np.intp], test: NDArray[np.intp], seed: int = 0
) -> NDArray[np.float64]:
    """Log-duration predictions for ``test`` by the model ``autofe run`` ships
    (:func:`autofe.modeling.train.fit`: trees sized by its inner folds, anchored on the
    features that are runtime estimates) fitted on ``train``: how a generated catalog is
    scored, since its history features are meant for that model."""
    return fit(data.rows(np.sort(train)), seed).predict_log(data.x[test])


def interval_highs(
    data: Dataset, folds: Folds, groups: Sequence[str], level: float = 0.9, seed: int = 0
) -> NDArray[np.float64]:
    """Upper bounds of split-conformal intervals around :func:`out_of_fold`'s predictions.

    Per fold, a fifth of the training groups is held back; a model of the rest predicts them,
    and the ``level`` quantile of its absolute log errors is the interval's half-width around
    the full fold model's prediction.
    """
    p50 = out_of_fold(data, folds, seed)
    high = np.full(len(data), np.nan)
    log_y = np.log(data.seconds)
    for train, test in folds:
        fit_rows, cal_rows = _hold_back(train, groups, seed)
        model = regressor(seed, FIXED_TREES).fit(data.x[fit_rows], log_y[fit_rows])
        residuals = np.abs(model.predict(data.x[cal_rows]) - log_y[cal_rows])
        high[test] = p50[test] * np.exp(conformal_quantile(residuals, level))
    return high


def _hold_back(
    rows: NDArray[np.intp], groups: Sequence[str], seed: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``rows`` split into fitting and calibration rows: a seeded fifth of their groups (at
    least one) is held back whole, so calibration sees configurations the fit did not."""
    names = sorted({groups[i] for i in rows})
    random.Random(seed).shuffle(names)
    held = set(names[: max(1, len(names) // 5)])
    mask = np.array([groups[i] in held for i in rows])
    return rows[~mask], rows[mask]


PROTOCOLS: tuple[tuple[str, Callable[[Groups, int], Folds]], ...] = (
    ("point 5-fold", lambda g, seed: grouped_folds(g.point, K, seed)),
    ("grouped 5-fold", lambda g, seed: grouped_folds(g.config, K, seed)),
    ("leave-one-machine-type-out", lambda g, seed: leave_one_group_out(g.node_type)),
)
FOLD_BASELINES = ("job_median", "job_config_median", "ernest")
"""The simple baselines scored per fold; the protocols' own raw-column sets stand for the
baselines' raw-column LightGBM (they also see the run table's known-at-submit columns)."""


def protocol_folds(groups: Groups, seed: int = 0) -> list[tuple[str, Folds]]:
    """Each protocol's folds; leave-one-machine-type-out only with two node types or more."""
    return [
        (protocol, make_folds(groups, seed))
        for protocol, make_folds in PROTOCOLS
        if not (protocol.startswith("leave") and len(set(groups.node_type)) < 2)
    ]


def evaluate_baselines(db: Path, dataset: str, seed: int = 0) -> list[ProtocolResult]:
    """The simple baselines under every protocol, each fold's fit on its training runs alone:
    the job and job x configuration are whatever the mapping ingested as ``runs.job_id`` and
    ``runs.cluster_config_id``."""
    runs, groups = labelled_groups(db)
    with open_warehouse(db, read_only=True) as con:
        facts = {f.run_id: f for f in as_facts(con.execute(FACTS_SQL).fetchall())}
    ordered = [facts[r[0]] for r in runs]
    seconds = np.array([r[3] for r in runs])
    results = []
    for protocol, folds in protocol_folds(groups, seed):
        for _, label, p in out_of_fold_baselines(ordered, folds, seed, FOLD_BASELINES):
            m = score(seconds, p)
            results.append(
                ProtocolResult(
                    dataset, protocol, label, 0, len(folds), m.n, m.mape, m.r2, m.within_10, True
                )
            )
    return results


def evaluate_protocols(
    db: Path, dataset: str, feature_sets: Mapping[str, FeatureValues], seed: int = 0
) -> list[ProtocolResult]:
    """Every feature set under every protocol on the labelled runs of ``db``."""
    runs, groups = labelled_groups(db)
    results = []
    for protocol, folds in protocol_folds(groups, seed):
        for name, values in feature_sets.items():
            data = build_dataset(runs, values)
            m = score(data.seconds, out_of_fold(data, folds, seed))
            results.append(
                ProtocolResult(
                    dataset,
                    protocol,
                    name,
                    len(data.features),
                    len(folds),
                    m.n,
                    m.mape,
                    m.r2,
                    m.within_10,
                )
            )
    return results


def evaluate_generated(
    db: Path,
    dataset: str,
    specs: Sequence[FeatureSpec],
    extras: Mapping[str, FeatureValues],
    seed: int = 0,
) -> list[ProtocolResult]:
    """Generated features, which may read other runs' outcomes, under every protocol: each fold
    computes them with its test runs' outcomes hidden (:mod:`autofe.evals.masked`). Each named
    set is ``specs`` plus its extra values that read no outcomes (e.g. raw columns)."""
    runs, groups = labelled_groups(db)
    seconds = np.array([r[3] for r in runs])
    results = []
    for protocol, folds in protocol_folds(groups, seed):
        predicted = masked_out_of_fold(
            db, runs, specs, folds, lambda d, tr, te: product_fit_predict(d, tr, te, seed), extras
        )
        for name, p in predicted.items():
            m = score(seconds, p)
            width = len(specs) + len(extras[name])
            results.append(
                ProtocolResult(
                    dataset, protocol, name, width, len(folds), m.n, m.mape, m.r2, m.within_10
                )
            )
    return results
