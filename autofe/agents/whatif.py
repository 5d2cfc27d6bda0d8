"""The what-if score: how well a feature set predicts runs on a configuration held out.

The product's questions (``autofe schedule plan``, ``POST /v1/recommend``, the cost evaluation)
ask how long a job would take on a configuration; time-ordered CV asks how long its next run
takes, and there a recurring job mostly reruns on the same configuration, so "the job's last
duration there" looks perfect. Here the training runs are grouped by ``cluster_config_id`` into
at most :data:`FOLDS` folds. Each fold gets a copy of the warehouse in which its
configurations' outcomes are hidden (:mod:`autofe.modeling.masked`): the world in which those
configurations were never run on. Every feature is computed on that copy for every training
run; a model fit with the product's :func:`~autofe.modeling.train.fit` on the other folds'
runs predicts the fold's runs, and the folds' predictions are scored together.

**The training rows as the product sees them.** The evaluation protocols
(:mod:`autofe.evals.masked`) compute each training row from the copy that hid *its own* fold,
so the model is taught that history may come from other hardware and learns to distrust it:
they measure what a feature set can do under such a fair learner. The product's model is not
trained that way. It is fit on every run's real values, where a job's last duration on the
configuration it reruns on is nearly perfect, and :func:`~autofe.modeling.train.fit` makes
such a feature a run's *anchor*. Asked about a configuration the job has not run on, that
feature then hands over another hardware's duration, and the model passes it through. The
what-if score must measure exactly that harm, so a fold's training rows keep the values they
have in the fold's world (only the held-out configurations' outcomes are gone, for everyone),
and the test rows have theirs. Had the training rows been masked by their own folds, the
history would look like noise in training as well, the model would leave it alone, and the
score would not show what it costs the product. Measured on ``tests/reruns_warehouse.py``
(seeds 0-4, the job's last duration on any configuration beside the input per core): masked
by their own folds, the set with the history scored within 0.1 of the set without it (0.30 to
0.69 what-if MAPE) and the history was kept on all five; as here, it scored 0.73 to 2.53
against 0.32 to 0.79 without it and was dropped on all five.

A feature's masked values depend only on its SQL and on what the copy hides, so they are
computed once per fold (:class:`MaskedCache`) and a round computes only its new candidates.
Everything is in a fixed order (runs in submit order, features by name, folds by number), the
matrices are rounded by :func:`~autofe.modeling.dataset.stable` and the fits are seeded and
single-threaded, so the same inputs give the same scores, on any machine.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from autofe.agents.state import Feature
from autofe.errors import ConfigError
from autofe.featurespec import FeatureSpec
from autofe.modeling.dataset import FeatureValues, Labelled, Value, build_dataset, stable
from autofe.modeling.masked import masked_values
from autofe.modeling.metrics import score
from autofe.modeling.train import MIN_RUNS, fit
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import Sandbox
from autofe.warehouse.sample import job_codes_sql

FOLDS = 3
MIN_TEST_RUNS = 10
"""Training runs a fold must hold out: fewer make its share of the score a handful of runs."""
CONFIGS_SQL = "SELECT run_id, coalesce(cluster_config_id, '') FROM runs ORDER BY run_id"


@dataclass(frozen=True)
class WhatIfFold:
    """One held-out group of configurations."""

    key: str
    """A hash of ``hidden``: what the fold's masked copy is, for the cache."""
    test: tuple[str, ...]
    """The training runs on the fold's configurations: predicted, never fit on."""
    hidden: tuple[str, ...]
    """Every run whose outcomes the copy hides: all runs on the fold's configurations (failed
    ones too) and the evaluator's holdout, which nothing here may read."""


def assign_configs(counts: Mapping[str, int], k: int) -> dict[str, int]:
    """Configurations to ``k`` folds, largest first, each to the fold with fewest runs so far
    (ties: the lower fold, then the configuration's name). Deterministic and balanced in runs,
    not in configurations, so that no fold is one big configuration against many small ones.

    >>> assign_configs({"a": 5, "b": 3, "c": 2, "d": 1}, 2)
    {'a': 0, 'b': 1, 'c': 1, 'd': 0}
    """
    loads = [0] * k
    fold_of: dict[str, int] = {}
    for config in sorted(counts, key=lambda c: (-counts[c], c)):
        fold = min(range(k), key=lambda f: (loads[f], f))
        fold_of[config] = fold
        loads[fold] += counts[config]
    return fold_of


def fold_plan(counts: Mapping[str, int], k: int = FOLDS) -> dict[str, int]:
    """The configurations' folds: the most folds, up to ``k``, in which every fold holds out
    at least :data:`MIN_TEST_RUNS` runs and leaves at least ``MIN_RUNS`` to fit on; empty
    when even two cannot (one configuration, or too few runs).

    >>> fold_plan({"a": 40, "b": 30, "c": 5})
    {'a': 0, 'b': 1, 'c': 1}
    >>> fold_plan({"a": 100}), fold_plan({"a": 20, "b": 15})
    ({}, {})
    """
    total = sum(counts.values())
    for folds in range(min(k, len(counts)), 1, -1):
        fold_of = assign_configs(counts, folds)
        sizes = [sum(n for c, n in counts.items() if fold_of[c] == f) for f in range(folds)]
        if all(n >= MIN_TEST_RUNS and total - n >= MIN_RUNS for n in sizes):
            return fold_of
    return {}


def whatif_folds(
    db: Path,
    train: Labelled,
    holdout: Sequence[str],
    limits: SandboxLimits,
    k: int = FOLDS,
) -> tuple[WhatIfFold, ...]:
    """The folds of ``train`` by configuration (:func:`fold_plan`); none when the runs cannot
    support two.

    Raises:
        ConfigError: the warehouse has more runs than the sandbox's ``max_rows``.
    """
    with Sandbox.open(Path(db), limits) as sandbox:
        result = sandbox.query(CONFIGS_SQL)
    if result.truncated:
        raise ConfigError(f"{db} has more runs than the sandbox's max_rows ({limits.max_rows})")
    config_of = {str(r): str(c) for r, c in result.rows}
    train_ids = [r[0] for r in train]
    counts: dict[str, int] = {}
    for run_id in train_ids:
        counts[config_of[run_id]] = counts.get(config_of[run_id], 0) + 1
    fold_of = fold_plan(counts, k)
    folds = []
    for fold in sorted(set(fold_of.values())):
        test = tuple(r for r in train_ids if fold_of[config_of[r]] == fold)
        held = {r for r, c in config_of.items() if fold_of.get(c) == fold} | set(holdout)
        hidden = tuple(sorted(held))
        key = hashlib.sha256("\n".join(hidden).encode()).hexdigest()[:16]
        folds.append(WhatIfFold(key, test, hidden))
    return tuple(folds)


def code_families(db: Path, limits: SandboxLimits) -> dict[str, str]:
    """Each job's code family, as the loop's sample groups jobs (:func:`job_codes_sql`).

    Raises:
        ConfigError: the warehouse has more jobs than the sandbox's ``max_rows``.
    """
    with Sandbox.open(Path(db), limits) as sandbox:
        result = sandbox.query(job_codes_sql())
    if result.truncated:
        raise ConfigError(f"{db} has more jobs than the sandbox's max_rows ({limits.max_rows})")
    return {str(job): str(code) for job, code in result.rows}


def feature_spec(feature: Feature) -> FeatureSpec:
    """What :func:`~autofe.modeling.masked.masked_values` computes: the feature's SQL."""
    return FeatureSpec(
        name=feature["name"],
        sql=feature["sql"],
        category=feature["category"],  # type: ignore[arg-type]
        value_type=feature["value_type"],  # type: ignore[arg-type]
    )


@dataclass
class MaskedCache:
    """Per fold (its key) and feature id, every run's value on the fold's masked copy.

    Lives as long as one loop (the evaluate node holds it): kept features are never computed
    again, and a resumed run recomputes the same values from the same warehouse.
    """

    values: dict[tuple[str, str], Mapping[str, Value]] = field(default_factory=dict)
    computed: int = 0
    """Feature x fold computations done (the rest were served from the cache)."""

    def fold_values(
        self,
        db: Path,
        folds: Sequence[WhatIfFold],
        features: Sequence[Feature],
        limits: SandboxLimits,
    ) -> tuple[FeatureValues, ...]:
        """Per fold, feature name → run id → value on the fold's masked copy.

        Raises:
            ModelError: a feature's SQL fails on a masked copy.
        """
        for fold in folds:
            missing = [f for f in features if (fold.key, _id(f)) not in self.values]
            if not missing:
                continue
            found = masked_values(db, [feature_spec(f) for f in missing], fold.hidden, limits)
            for f in missing:
                self.values[(fold.key, _id(f))] = found[f["name"]]
            self.computed += len(missing)
        return tuple(
            {f["name"]: self.values[(fold.key, _id(f))] for f in features} for fold in folds
        )


def _id(feature: Feature) -> str:
    return feature["gate"]["feature_id"]


def whatif_predictions(
    train: Labelled,
    folds: Sequence[WhatIfFold],
    values: Sequence[FeatureValues],
    names: Sequence[str],
    seed: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[str, ...]] | None:
    """Each fold's runs predicted by a model fit on the other folds' runs, all on the fold's
    values (``values[i]`` for fold ``i``): every held-out run's actual and predicted seconds and
    its job, fold by fold; None with no folds or no features."""
    if not folds or not names:
        return None
    actual: list[NDArray[np.float64]] = []
    predicted: list[NDArray[np.float64]] = []
    jobs: list[str] = []
    for fold, fold_values in zip(folds, values, strict=True):
        picked = {n: fold_values[n] for n in sorted(names)}
        held = set(fold.test)
        model = fit(build_dataset([r for r in train if r[0] not in held], picked), seed)
        block = build_dataset([r for r in train if r[0] in held], picked, model.encoder)
        actual.append(block.seconds)
        predicted.append(model.predict_seconds(block.x))
        jobs.extend(block.job_ids)
    return np.concatenate(actual), np.concatenate(predicted), tuple(jobs)


def clustered_se(diff: NDArray[np.float64], clusters: Sequence[str]) -> float:
    """The standard error of ``diff``'s mean with ``clusters`` (one label per value) as the
    independent units (the cluster-robust sandwich, with the G / (G - 1) correction); 0 with
    fewer than two clusters.

    >>> clustered_se(np.array([1.0, 1.0, -1.0, -1.0]), ["a", "a", "b", "b"])
    1.0
    >>> clustered_se(np.array([1.0, 3.0]), ["a", "a"])
    0.0
    """
    groups = sorted(set(clusters))
    if len(groups) < 2 or len(diff) == 0:
        return 0.0
    centred = diff - float(np.mean(diff))
    index = {g: i for i, g in enumerate(groups)}
    sums = np.zeros(len(groups))
    np.add.at(sums, [index[c] for c in clusters], centred)
    variance = len(groups) / (len(groups) - 1) * float(np.sum(sums**2)) / len(diff) ** 2
    return math.sqrt(variance)


def changed_share(
    stored: Mapping[str, Value], masked: Mapping[str, Value], run_ids: Sequence[str]
) -> float:
    """The share of ``run_ids`` whose value differs when their configuration is held out:
    0 for a feature that reads only what is known at submit, more the more it leans on the
    outcomes of the same configuration.

    >>> changed_share({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": None}, ["a", "b"])
    0.5
    """
    if not run_ids:
        return 0.0
    return sum(not _same(stored.get(r), masked.get(r)) for r in run_ids) / len(run_ids)


def _same(a: Value, b: Value) -> bool:
    """Equal as a model reads them: numbers and booleans as floats rounded by
    :func:`~autofe.modeling.dataset.stable` (DuckDB's parallel sums differ in the last bits),
    text as text."""
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return a == b
    first, second = stable(np.array([float(a), float(b)]))
    return bool(first == second)


@dataclass
class WhatIfRound:
    """One round's what-if scorer: the folds, the features it may be asked about, their masked
    values (computed on first use, through the loop's cache: a feature the rule never needs
    is never computed) and the scores already computed (a set is fit once however often it is
    asked about)."""

    db: Path
    train: Labelled
    folds: tuple[WhatIfFold, ...]
    features: Mapping[str, Feature]
    """Every feature in play, by name."""
    cache: MaskedCache
    limits: SandboxLimits
    seed: int
    scores: dict[frozenset[str], float] = field(default_factory=dict)
    errors: dict[frozenset[str], NDArray[np.float64]] = field(default_factory=dict)
    """Per set, each held-out run's absolute percentage error, in the folds' order."""
    jobs: tuple[str, ...] = ()
    """Each held-out run's job, in the same order."""
    families: Mapping[str, str] = field(default_factory=dict)
    """Each job's code family (:func:`code_families`); a job not listed is its own."""

    def values(self, names: Iterable[str]) -> tuple[FeatureValues, ...]:
        """Per fold, the values of ``names`` on its copy (missing ones computed together).

        Raises:
            ModelError: a feature's SQL fails on a masked copy.
        """
        picked = [self.features[n] for n in sorted(set(names))]
        return self.cache.fold_values(self.db, self.folds, picked, self.limits)

    def mape(self, names: Sequence[str]) -> float:
        """The what-if MAPE of ``names`` (NaN for no names).

        Raises:
            ModelError: a feature's SQL fails on a masked copy.
        """
        key = frozenset(names)
        if key not in self.scores:
            values = self.values(key)
            found = whatif_predictions(self.train, self.folds, values, sorted(key), self.seed)
            if found is None:
                self.scores[key] = math.nan
            else:
                actual, predicted, self.jobs = found
                self.scores[key] = score(actual, predicted).mape
                self.errors[key] = np.abs(predicted - actual) / actual
        return self.scores[key]

    def noise(self, names: Sequence[str], reference: Sequence[str]) -> float:
        """The standard error of the what-if MAPE of ``names`` minus that of ``reference``,
        paired run by run (the same held-out runs), with the runs of each code family (the
        jobs running one script) as one cluster: a job's runs share its history, and jobs
        running one script share their behaviour, so their errors move together. 0 when
        either set is empty or fewer than two families are held out.

        The what-if score is a mean over a few configurations' runs, and a percentage error
        has a long tail: on a sample of ten jobs, a handful of short runs can move it by far
        more than the tolerance. The rule compares the difference with this noise before it
        calls a feature harmful.

        Raises:
            ModelError: a feature's SQL fails on a masked copy.
        """
        if not names or not reference:
            return 0.0
        if math.isnan(self.mape(names)) or math.isnan(self.mape(reference)):
            return 0.0
        diff = self.errors[frozenset(names)] - self.errors[frozenset(reference)]
        return clustered_se(diff, [self.families.get(j, j) for j in self.jobs])

    def changed(self, name: str, stored: Mapping[str, Value]) -> float:
        """:func:`changed_share` of ``name`` over the folds' held-out runs, each against its
        fold's copy.

        Raises:
            ModelError: the feature's SQL fails on a masked copy.
        """
        pairs = zip(self.folds, self.values([name]), strict=True)
        own = {r: values[name].get(r) for fold, values in pairs for r in fold.test}
        return changed_share(stored, own, list(own))
