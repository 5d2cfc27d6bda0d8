"""The what-if score: how well a feature set predicts runs on a configuration held out.

The product's questions (``autofe schedule plan``, ``POST /v1/recommend``, the cost evaluation)
ask how long a job would take on a configuration; time-ordered CV asks how long its next run
takes, and there a recurring job mostly reruns on the same configuration, so "the job's last
duration there" looks perfect. Here the training runs are grouped by ``cluster_config_id`` into
:data:`FOLDS` folds; each fold's features are computed on a copy of the warehouse with that
fold's configurations' outcomes hidden (:mod:`autofe.modeling.masked`), a model is fit with the
product's :func:`~autofe.modeling.train.fit` on the other folds' runs and predicts the fold.

A feature's masked values depend only on its SQL and on what the copy hides, so they are
computed once per fold (:class:`MaskedCache`) and a round computes only its new candidates.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autofe.agents.state import Feature
from autofe.errors import ConfigError
from autofe.featurespec import FeatureSpec
from autofe.modeling.dataset import FeatureValues, Labelled, Value, build_dataset
from autofe.modeling.masked import masked_values
from autofe.modeling.metrics import Metrics, score
from autofe.modeling.train import MIN_RUNS, fit
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import Sandbox

FOLDS = 3
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


def whatif_folds(
    db: Path,
    train: Labelled,
    holdout: Sequence[str],
    limits: SandboxLimits,
    k: int = FOLDS,
) -> tuple[WhatIfFold, ...]:
    """The folds of ``train`` by configuration; none when the runs cannot support them (fewer
    than two configurations, or a fold whose complement is too small to fit).

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
    k = min(k, len(counts))
    if k < 2:
        return ()
    fold_of = assign_configs(counts, k)
    folds = []
    for fold in range(k):
        test = tuple(r for r in train_ids if fold_of[config_of[r]] == fold)
        if len(train_ids) - len(test) < MIN_RUNS:
            return ()
        held = {r for r, c in config_of.items() if fold_of.get(c) == fold} | set(holdout)
        hidden = tuple(sorted(held))
        key = hashlib.sha256("\n".join(hidden).encode()).hexdigest()[:16]
        folds.append(WhatIfFold(key, test, hidden))
    return tuple(folds)


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
    """Per fold (its key) and feature id, the fold's test runs' masked values.

    Lives as long as one loop (the evaluate node holds it): kept features are never computed
    again, and a resumed run recomputes the same values from the same warehouse.
    """

    values: dict[tuple[str, str], dict[str, Value]] = field(default_factory=dict)
    computed: int = 0
    """Feature × fold computations done (the rest were served from the cache)."""

    def out_of_fold(
        self,
        db: Path,
        folds: Sequence[WhatIfFold],
        features: Sequence[Feature],
        limits: SandboxLimits,
    ) -> dict[str, dict[str, Value]]:
        """Feature name → run id → value, each run's from the copy that hid its own fold."""
        for fold in folds:
            missing = [f for f in features if (fold.key, _id(f)) not in self.values]
            if not missing:
                continue
            found = masked_values(db, [feature_spec(f) for f in missing], fold.hidden, limits)
            for f in missing:
                self.values[(fold.key, _id(f))] = {r: found[f["name"]].get(r) for r in fold.test}
            self.computed += len(missing)
        merged: dict[str, dict[str, Value]] = {f["name"]: {} for f in features}
        for fold in folds:
            for f in features:
                merged[f["name"]].update(self.values[(fold.key, _id(f))])
        return merged


def _id(feature: Feature) -> str:
    return feature["gate"]["feature_id"]


def whatif_metrics(
    train: Labelled,
    folds: Sequence[WhatIfFold],
    values: FeatureValues,
    names: Sequence[str],
    seed: int,
) -> Metrics | None:
    """Each fold's runs predicted by a model fit on the other folds' runs, all scored together;
    None with no folds or no features."""
    if not folds or not names:
        return None
    picked = {n: values[n] for n in names}
    fold_of = {r: i for i, fold in enumerate(folds) for r in fold.test}
    actual, predicted = [], []
    for i in range(len(folds)):
        model = fit(build_dataset([r for r in train if fold_of[r[0]] != i], picked), seed)
        block = build_dataset([r for r in train if fold_of[r[0]] == i], picked, model.encoder)
        actual.append(block.seconds)
        predicted.append(model.predict_seconds(block.x))
    return score(np.concatenate(actual), np.concatenate(predicted))


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
    """Equal as the store keeps them (numbers and booleans as floats, text as text)."""
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return a == b
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


@dataclass
class WhatIfRound:
    """One round's what-if scorer: the folds, the out-of-fold values of every feature in play,
    and the scores already computed (a set is fit once however often it is asked about)."""

    train: Labelled
    folds: tuple[WhatIfFold, ...]
    values: dict[str, dict[str, Value]]
    seed: int
    scores: dict[frozenset[str], float] = field(default_factory=dict)

    def mape(self, names: Sequence[str]) -> float:
        """The what-if MAPE of ``names`` (NaN when there is no what-if score)."""
        key = frozenset(names)
        if key not in self.scores:
            metrics = whatif_metrics(self.train, self.folds, self.values, sorted(key), self.seed)
            self.scores[key] = metrics.mape if metrics else math.nan
        return self.scores[key]

    def changed(self, name: str, stored: Mapping[str, Value]) -> float:
        """:func:`changed_share` of ``name`` over the training runs."""
        return changed_share(stored, self.values[name], [r[0] for r in self.train])
