"""The evaluation report's numbers: feature sets compared on one warehouse, one protocol.

Protocol: the labelled runs in submit order; the last ``holdout`` share is predicted by a model
fit on everything before it (early stopping and calibration blocks inside that past). The
simple baselines of :mod:`autofe.modeling.baselines` (medians, raw-column LightGBM, the
Ernest-style fit) predict exactly those runs, and every set is judged against the best of them
and the manual set (:func:`best_reference`). The scikit-learn models learn from the same rows.
Cost impact uses out-of-time predictions of every sweep run (expanding-window cross-validation:
each block predicted by a model of the runs submitted before it), because the sweep points are
spread over the whole calendar.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from autofe.evals.cost import PolicyResult, compare_policies
from autofe.evals.sweeps import sweep_options
from autofe.featurespec import FeatureSpec
from autofe.gates.admit import admitted_matrix
from autofe.modeling.baselines import FACTS_SQL, Baseline, as_facts, score_baselines
from autofe.modeling.dataset import Dataset
from autofe.modeling.evaluate import Evaluation, cross_validate, evaluate_model
from autofe.modeling.importance import gain_shares
from autofe.modeling.metrics import Metrics, score
from autofe.modeling.splits import holdout_cut
from autofe.modeling.train import fit
from autofe.warehouse.connect import open_warehouse

HOLDOUT = 0.2
COST_FOLDS = 8
COST_MIN_TRAIN = 0.3
BUCKETS = (10.0, 100.0, 1000.0, 10000.0)
"""Runtime bucket edges in seconds (decades)."""


@dataclass
class SetResult:
    """One feature set under the protocol."""

    name: str
    specs: tuple[FeatureSpec, ...]
    holdout: Evaluation
    importance: dict[str, float]
    """Share of total gain per feature of the holdout model."""
    seconds: dict[str, float]
    cost: list[PolicyResult] = field(default_factory=list)

    def importance_by_category(self) -> dict[str, float]:
        category = {s.name: s.category for s in self.specs}
        totals: dict[str, float] = {}
        for name, share in self.importance.items():
            totals[category[name]] = totals.get(category[name], 0.0) + share
        return dict(sorted(totals.items(), key=lambda kv: -kv[1]))

    def counts_by_category(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for s in self.specs:
            counts[s.category] = counts.get(s.category, 0) + 1
        return dict(sorted(counts.items()))


@dataclass
class Report:
    """Everything ``render`` needs: the sets, the baselines, the breakdown keys."""

    db: Path
    labelled_runs: int
    holdout_runs: int
    sets: list[SetResult]
    baselines: dict[str, Metrics]
    """Ridge and random forest on the first set's features (how much is LightGBM)."""
    task_types: dict[str, str]
    """run id → the job's task type, for the error breakdown."""
    actual: dict[str, float]
    simple: list[Baseline] = field(default_factory=list)
    """The simple baselines on the holdout runs, in :data:`~autofe.modeling.baselines.BASELINES`
    order: what no feature engineering at all scores on the same runs."""

    def best_simple(self) -> Baseline:
        """The simple baseline with the lowest holdout MAPE (the first listed on a tie)."""
        return min(self.simple, key=lambda b: b.metrics.mape)


MANUAL = "manual"
"""The hand-written set's name: a reference for every other set (``autofe eval report``)."""


def best_reference(report: Report, judged: SetResult) -> tuple[str, Metrics]:
    """The strongest row ``judged`` must beat, by MAPE: the best simple baseline, or the
    manual set when the report holds it and ``judged`` is another set."""
    best = report.best_simple()
    candidates = [(best.label, best.metrics)]
    candidates += [
        (f"LightGBM / {s.name}", s.holdout.metrics)
        for s in report.sets
        if s.name == MANUAL and s is not judged
    ]
    return min(candidates, key=lambda c: c[1].mape)


def verdict(m: Metrics, reference: Metrics) -> str:
    """Which of MAPE, median APE and log-R² ``m`` beats ``reference`` on.

    >>> a = Metrics(10, 0.5, 1.0, 0.20, 0.10, 0.4, 0.6)
    >>> verdict(a, Metrics(10, 0.4, 1.0, 0.25, 0.10, 0.4, 0.6))
    'beats it on MAPE, log-R²; not on median APE'
    >>> verdict(a, a)
    'beats it on no metric'
    """
    checks = (
        ("MAPE", m.mape < reference.mape),
        ("median APE", m.median_ape < reference.median_ape),
        ("log-R²", m.r2 > reference.r2),
    )
    wins = [name for name, won in checks if won]
    losses = [name for name, won in checks if not won]
    if not wins:
        return "beats it on no metric"
    return f"beats it on {', '.join(wins)}" + (f"; not on {', '.join(losses)}" if losses else "")


def build_report(
    db: Path,
    feature_sets: Mapping[str, Sequence[FeatureSpec]],
    holdout: float = HOLDOUT,
    seed: int = 0,
) -> Report:
    """Gate, compute and score every feature set (in the order given) on the warehouse.

    Raises:
        GateRejected: a feature of any set fails a gate.
        ConfigError: too few runs, or an empty feature set.
    """
    evaluated = [
        _evaluate_set(db, name, tuple(specs), holdout, seed) for name, specs in feature_sets.items()
    ]
    sets = [result for result, _ in evaluated]
    first = evaluated[0][1]  # the baselines learn from the first set's matrix, computed once
    cut = holdout_cut(first.submit_times, holdout)
    baselines = sklearn_baselines(first, cut, seed)
    with open_warehouse(db, read_only=True) as con:
        types = dict(
            con.execute(
                "SELECT r.run_id, coalesce(j.task_type, 'unknown') FROM runs AS r "
                "LEFT JOIN jobs AS j ON j.job_id = r.job_id"
            ).fetchall()
        )
        facts = {f.run_id: f for f in as_facts(con.execute(FACTS_SQL).fetchall())}
    simple = score_baselines([facts[r] for r in first.run_ids], cut, seed)
    actual = dict(zip(first.run_ids, map(float, first.seconds), strict=True))
    return Report(db, len(first), len(first) - cut, sets, baselines, types, actual, simple)


def _evaluate_set(
    db: Path, name: str, specs: tuple[FeatureSpec, ...], holdout: float, seed: int
) -> tuple[SetResult, Dataset]:
    data, seconds = admitted_matrix(db, specs)
    computed = time.perf_counter()
    cut = holdout_cut(data.submit_times, holdout)
    model = fit(data.rows(np.arange(cut)), seed)
    evaluation = evaluate_model(model, data.rows(np.arange(cut, len(data))))
    trained = time.perf_counter()
    seconds["train + holdout"] = round(trained - computed, 3)
    result = SetResult(name, specs, evaluation, gain_shares(model), seconds)
    options = sweep_options(db, cross_validate(data, COST_FOLDS, COST_MIN_TRAIN, seed))
    if options:
        result.cost = compare_policies(options)
    return result, data


def sklearn_baselines(data: Dataset, cut: int, seed: int) -> dict[str, Metrics]:
    """Ridge and random forest on log duration, same rows and features, for calibration of
    expectations: they show how much of the score is the features rather than LightGBM."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    models = {
        "ridge": make_pipeline(
            SimpleImputer(strategy="median", keep_empty_features=True),
            StandardScaler(),
            Ridge(alpha=1.0),
        ),
        "random forest": make_pipeline(
            SimpleImputer(strategy="median", keep_empty_features=True),
            RandomForestRegressor(
                n_estimators=200, min_samples_leaf=2, random_state=seed, n_jobs=1
            ),
        ),
    }
    train, test = slice(0, cut), slice(cut, len(data))
    out = {}
    for name, model in models.items():
        model.fit(data.x[train], np.log(data.seconds[train]))
        predicted: NDArray[np.float64] = np.exp(model.predict(data.x[test]))
        out[name] = score(data.seconds[test], predicted)
    return out


def bucket_of(seconds: float) -> str:
    """The runtime bucket label of a duration.

    >>> bucket_of(4.0), bucket_of(42.0), bucket_of(20000.0)
    ('< 10 s', '10–100 s', '≥ 10000 s')
    """
    low = 0.0
    for edge in BUCKETS:
        if seconds < edge:
            return f"< {edge:g} s" if low == 0.0 else f"{low:g}–{edge:g} s"
        low = edge
    return f"≥ {BUCKETS[-1]:g} s"
