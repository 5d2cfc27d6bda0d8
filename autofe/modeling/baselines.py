"""Simple baselines on the model's holdout: what a model must beat to be worth its features.

A holdout score alone cannot say whether the generated features help: a job's median may do as
well. Each baseline here predicts exactly the runs the model is scored on (the labelled runs in
submit order, cut at the same index as :func:`autofe.modeling.evaluate.evaluate_holdout`) from
what it could have known, and is scored by the same :func:`autofe.modeling.metrics.score`.
They read only :data:`FACTS_SQL` (through the read-only sandbox, like every reader of the
warehouse in the loop); ``BASELINES`` lists them in the order ``metrics.json`` shows them.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autofe.errors import ConfigError
from autofe.modeling.dataset import Encoder, FeatureValues, Value, build_dataset
from autofe.modeling.metrics import Metrics, score
from autofe.modeling.train import regressor

RAW_COLUMNS = (
    "node_type",
    "driver_node_type",
    "num_workers",
    "autoscale_min",
    "autoscale_max",
    "spot_policy",
    "spark_version",
    "hourly_price",
)
"""``cluster_configs`` columns as a submitter writes them (names, counts, market, price)."""
NODE_COLUMNS = ("vcpu_per_node", "memory_gb_per_node")
"""What the node type means in hardware (the warehouse fills these from the node-type catalog)."""

FACTS_SQL = (
    "SELECT r.run_id, coalesce(r.job_id, ''), r.submit_time, r.end_time, r.duration_s, "
    "coalesce(r.cluster_config_id, ''), "
    + ", ".join(f"c.{c}" for c in RAW_COLUMNS + NODE_COLUMNS)
    + " FROM runs AS r LEFT JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id "
    "WHERE r.status = 'SUCCEEDED' AND r.duration_s > 0 AND r.submit_time IS NOT NULL "
    "ORDER BY r.submit_time, r.run_id"
)
"""The runs of :data:`~autofe.modeling.dataset.LABELLED_SQL`, in its order, with their cluster."""

RAW_TREES = 400
LAST_RUNS = 5


@dataclass(frozen=True)
class RunFacts:
    """One labelled run with what the baselines may use (its cluster's columns by name)."""

    run_id: str
    job_id: str
    submit_time: datetime
    end_time: datetime | None
    seconds: float
    config_id: str
    cluster: Mapping[str, Value]

    @property
    def cores(self) -> float | None:
        """The cluster's total vCPUs: per node x workers (a zero-worker cluster is its driver
        alone, an autoscaling one counts its upper bound); None when the vCPUs are unknown.

        >>> RunFacts("r", "j", datetime(2024, 1, 1), None, 1.0, "c",
        ...          {"vcpu_per_node": 4.0, "num_workers": 0}).cores
        4.0
        """
        vcpu = self.cluster.get("vcpu_per_node")
        if not isinstance(vcpu, int | float) or vcpu <= 0:
            return None
        workers = self.cluster.get("num_workers") or self.cluster.get("autoscale_max") or 1
        return float(vcpu) * (float(workers) if isinstance(workers, int | float) else 1.0)


def as_facts(rows: Sequence[Sequence[Any]]) -> list[RunFacts]:
    """Rows of :data:`FACTS_SQL` (from the sandbox or any connection) as :class:`RunFacts`."""
    names = RAW_COLUMNS + NODE_COLUMNS
    out = []
    for run_id, job_id, submit, end, seconds, config, *cluster in rows:
        columns = dict(zip(names, cluster, strict=True))
        ids = str(run_id), str(job_id)
        out.append(RunFacts(*ids, submit, end, float(seconds), str(config), columns))
    return out


Predictor = Callable[[Sequence[RunFacts], int, int], NDArray[np.float64]]
"""(runs in submit order, cut, seed) → seconds predicted for ``runs[cut:]``."""


def _medians(train: Sequence[RunFacts], key: Callable[[RunFacts], Hashable]) -> dict[Any, float]:
    groups: dict[Any, list[float]] = defaultdict(list)
    for r in train:
        groups[key(r)].append(r.seconds)
    return {k: float(np.median(v)) for k, v in groups.items()}


def job_median(runs: Sequence[RunFacts], cut: int, seed: int = 0) -> NDArray[np.float64]:
    """The job's median over the training runs: what a user who remembers one number per job
    expects (a job never seen gets the median of every training run)."""
    overall = float(np.median([r.seconds for r in runs[:cut]]))
    by_job = _medians(runs[:cut], lambda r: r.job_id)
    return np.array([by_job.get(r.job_id, overall) for r in runs[cut:]], dtype=np.float64)


def job_config_median(runs: Sequence[RunFacts], cut: int, seed: int = 0) -> NDArray[np.float64]:
    """The median of the job's training runs on the same cluster configuration, since hardware
    moves a runtime most; the job's median where the pair was never seen."""
    fallback = job_median(runs, cut)
    by_pair = _medians(runs[:cut], lambda r: (r.job_id, r.config_id))
    pairs = [(r.job_id, r.config_id) for r in runs[cut:]]
    return np.array([by_pair.get(p, f) for p, f in zip(pairs, fallback, strict=True)])


History = tuple[list[datetime], list[float]]
"""One key's finished runs sorted by end time: the end times (for bisect) and the durations."""


def _ended(runs: Sequence[RunFacts], key: Callable[[RunFacts], Hashable]) -> dict[Any, History]:
    """Every labelled run that has an end time, grouped by ``key`` and sorted by end time (the
    run id breaks ties), so that what had ended by a submit is a prefix found by bisect."""
    grouped: dict[Any, list[tuple[datetime, str, float]]] = defaultdict(list)
    for r in runs:
        if r.end_time is not None:
            grouped[key(r)].append((r.end_time, r.run_id, r.seconds))
    out = {}
    for k, finished in grouped.items():
        finished.sort()
        out[k] = ([h[0] for h in finished], [h[2] for h in finished])
    return out


def _before(history: History | None, submit: datetime) -> list[float]:
    """The durations of ``history``'s runs that ended strictly before ``submit``, oldest first."""
    if history is None:
        return []
    return history[1][: bisect.bisect_left(history[0], submit)]


def _online(
    runs: Sequence[RunFacts],
    cut: int,
    key: Callable[[RunFacts], Hashable],
    fallback: NDArray[np.float64],
    last: int | None = None,
) -> NDArray[np.float64]:
    """Per predicted run, the median of the (``last``) runs with its ``key`` that ended before
    it was submitted, among all labelled runs: a deployed lookup sees earlier holdout runs
    too, never one still running. ``fallback`` where none had ended."""
    ended = _ended(runs, key)
    out = np.array(fallback, dtype=np.float64)
    for i, r in enumerate(runs[cut:]):
        earlier = _before(ended.get(key(r)), r.submit_time)
        if last is not None:
            earlier = earlier[-last:]
        if earlier:
            out[i] = float(np.median(earlier))
    return out


def last5_median(runs: Sequence[RunFacts], cut: int, seed: int = 0) -> NDArray[np.float64]:
    """The median of the job's last five runs that *ended* before the run was submitted, among
    all labelled runs: a deployed lookup sees earlier holdout runs too, but never one still
    running at submit time. The job's training median when none had ended."""
    return _online(runs, cut, lambda r: r.job_id, job_median(runs, cut), LAST_RUNS)


def job_median_online(runs: Sequence[RunFacts], cut: int, seed: int = 0) -> NDArray[np.float64]:
    """The median of every run of the job that ended before the run was submitted (holdout
    runs included, as for :func:`last5_median`); the static job median when none had."""
    return _online(runs, cut, lambda r: r.job_id, job_median(runs, cut))


def job_config_median_online(
    runs: Sequence[RunFacts], cut: int, seed: int = 0
) -> NDArray[np.float64]:
    """The median of the job's runs on the same configuration that ended before the run was
    submitted; the job's online median where the pair had none (then its static median)."""
    fallback = job_median_online(runs, cut)
    return _online(runs, cut, lambda r: (r.job_id, r.config_id), fallback)


def _raw_values(runs: Sequence[RunFacts], columns: Sequence[str]) -> FeatureValues:
    """Job, configuration, ``columns`` of the cluster and the submit's hour and weekday."""
    values: dict[str, dict[str, Value]] = {
        "job_id": {r.run_id: r.job_id for r in runs},
        "config_id": {r.run_id: r.config_id for r in runs},
        "hour": {r.run_id: r.submit_time.hour for r in runs},
        "weekday": {r.run_id: r.submit_time.weekday() for r in runs},
    }
    for c in columns:
        values[c] = {r.run_id: r.cluster.get(c) for r in runs}
    return values


def _lightgbm(
    runs: Sequence[RunFacts], cut: int, seed: int, values: FeatureValues
) -> NDArray[np.float64]:
    """The product's LightGBM (fixed size, no early stopping) on ``values``, log target; text
    is coded by the training runs' vocabulary, as the product's encoder does."""
    labelled = [(r.run_id, r.job_id, r.submit_time, r.seconds) for r in runs]
    train_ids = [r.run_id for r in runs[:cut]]
    data = build_dataset(labelled, values, Encoder.fit(sorted(values), values, train_ids))
    model = regressor(seed, RAW_TREES).fit(data.x[:cut], np.log(data.seconds[:cut]))
    return np.exp(np.asarray(model.predict(data.x[cut:]), dtype=np.float64))


def raw_lightgbm(runs: Sequence[RunFacts], cut: int, seed: int = 0) -> NDArray[np.float64]:
    """LightGBM on the raw columns alone: what a model gets with no feature engineering."""
    return _lightgbm(runs, cut, seed, _raw_values(runs, RAW_COLUMNS))


def raw_node_lightgbm(runs: Sequence[RunFacts], cut: int, seed: int = 0) -> NDArray[np.float64]:
    """The raw columns plus the node type's vCPUs, memory and the cluster's total cores: how
    far joining the hardware facts alone gets, before any history or size feature."""
    values = dict(_raw_values(runs, RAW_COLUMNS + NODE_COLUMNS))
    values["total_cores"] = {r.run_id: r.cores for r in runs}
    return _lightgbm(runs, cut, seed, values)


def ernest_terms(cores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ernest's scale-out terms [1, 1/P, log P, P] (serial part, parallel part, tree-shaped
    aggregation, per-machine overhead) for cluster sizes ``P``.

    >>> ernest_terms(np.array([1.0])).tolist()
    [[1.0, 1.0, 0.0, 1.0]]
    """
    return np.column_stack([np.ones_like(cores), 1.0 / cores, np.log(cores), cores])


def ernest_fit(cores: NDArray[np.float64], seconds: NDArray[np.float64]) -> NDArray[np.float64]:
    """Non-negative least squares of ``seconds`` on :func:`ernest_terms`, each row divided by
    its duration so that the fit minimises relative, not absolute, error (a 10 s job counts as
    much as a 10 h one). Non-negative, as in Ernest: no term may make more cores free.

    >>> p = np.array([2.0, 4.0, 8.0])
    >>> np.round(ernest_fit(p, 10.0 + 20.0 / p), 6).tolist()
    [10.0, 20.0, 0.0, 0.0]
    """
    from scipy.optimize import nnls  # type: ignore[import-untyped]  # scipy comes with sklearn

    coef, _ = nnls(ernest_terms(cores) / seconds[:, None], np.ones(len(seconds)))
    return np.asarray(coef, dtype=np.float64)


def _ernest_fits(train: Sequence[RunFacts]) -> dict[str, NDArray[np.float64]]:
    """A fit per job with at least three training runs on at least two cluster sizes."""
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in train:
        if (p := r.cores) is not None:
            points[r.job_id].append((p, r.seconds))
    fits = {}
    for job, pts in points.items():
        if len(pts) >= 3 and len({p for p, _ in pts}) > 1:
            p, y = np.array(pts, dtype=np.float64).T
            fits[job] = ernest_fit(p, y)
    return fits


def ernest(runs: Sequence[RunFacts], cut: int, seed: int = 0) -> NDArray[np.float64]:
    """Ernest-style per-job scale-out model in the cluster's total cores; the job x
    configuration median where a job has too few runs or sizes to fit one."""
    out = job_config_median(runs, cut)
    fits = _ernest_fits(runs[:cut])
    for i, r in enumerate(runs[cut:]):
        coef, p = fits.get(r.job_id), r.cores
        if coef is not None and p is not None:
            predicted = float((ernest_terms(np.array([p])) @ coef)[0])
            if math.isfinite(predicted) and predicted > 0:
                out[i] = predicted
    return out


BASELINES: tuple[tuple[str, str, Predictor], ...] = (
    ("job_median", "job's median", job_median),
    ("job_config_median", "job × configuration median", job_config_median),
    ("last5_median", "median of the job's last 5 finished runs", last5_median),
    (
        "job_config_median_online",
        "job × configuration median, run by run",
        job_config_median_online,
    ),
    ("job_median_online", "job's median, run by run", job_median_online),
    ("raw_lightgbm", "LightGBM on raw columns", raw_lightgbm),
    ("raw_node_lightgbm", "LightGBM on raw columns and node facts", raw_node_lightgbm),
    ("ernest", "Ernest-style fit in total cores", ernest),
)


FOLD_BASELINES = ("job_median", "job_config_median", "raw_lightgbm", "raw_node_lightgbm", "ernest")
"""The baselines that read no outcome past the cut: on data without a meaningful order (a
third-party run table under cross-validation) a fold's training runs stand for the earlier
runs. The run-by-run ones would read the test runs' outcomes, so they are left out there."""

Folds = Sequence[tuple[NDArray[np.intp], NDArray[np.intp]]]


def predict_fold(
    predict: Predictor, train: Sequence[RunFacts], test: Sequence[RunFacts], seed: int = 0
) -> NDArray[np.float64]:
    """``predict`` fit on ``train`` alone, for ``test`` (one of :data:`FOLD_BASELINES`)."""
    return predict([*train, *test], len(train), seed)


def out_of_fold_baselines(
    runs: Sequence[RunFacts], folds: Folds, seed: int = 0, names: Sequence[str] = FOLD_BASELINES
) -> list[tuple[str, str, NDArray[np.float64]]]:
    """(name, label, each run's prediction by the fold that held it out) per baseline of
    ``names`` (:data:`FOLD_BASELINES` or some of them), in :data:`BASELINES` order.

    Raises:
        ConfigError: a name that is not a fold baseline.
    """
    if unknown := sorted(set(names) - set(FOLD_BASELINES)):
        raise ConfigError(f"not baselines a fold can fit: {unknown}; known: {FOLD_BASELINES}")
    found = []
    for name, label, predict in BASELINES:
        if name not in names:
            continue
        predicted = np.full(len(runs), np.nan)
        for train, test in folds:
            fold = predict_fold(predict, [runs[i] for i in train], [runs[i] for i in test], seed)
            predicted[test] = fold
        found.append((name, label, predicted))
    return found


@dataclass(frozen=True)
class Baseline:
    """One baseline's holdout predictions (seconds, in submit order) and their score."""

    name: str
    label: str
    predicted: NDArray[np.float64]
    metrics: Metrics

    def as_dict(self) -> dict[str, object]:
        """The ``metrics.json`` entry: name, label, MAPE, median APE, log-R², ±20 %, runs."""
        m = self.metrics
        numbers = {"mape": m.mape, "median_ape": m.median_ape, "log_r2": m.r2}
        rounded = {k: round(v, 4) for k, v in (numbers | {"within_20": m.within_20}).items()}
        return {"name": self.name, "label": self.label, **rounded, "runs": m.n}


def score_baselines(runs: Sequence[RunFacts], cut: int, seed: int = 0) -> list[Baseline]:
    """Every baseline of ``BASELINES`` fit on ``runs[:cut]`` and scored on ``runs[cut:]``.

    Raises:
        ConfigError: the cut leaves no run to fit on or to predict.
    """
    if not 0 < cut < len(runs):
        raise ConfigError(f"holdout cut {cut} of {len(runs)} runs leaves nothing to fit or predict")
    actual = np.array([r.seconds for r in runs[cut:]], dtype=np.float64)
    scored = []
    for name, label, predict in BASELINES:
        predicted = predict(runs, cut, seed)
        scored.append(Baseline(name, label, predicted, score(actual, predicted)))
    return scored


def best_baseline(baselines: Sequence[Baseline]) -> str:
    """The name of the baseline with the lowest MAPE (the first listed on a tie)."""
    return min(baselines, key=lambda b: b.metrics.mape).name
