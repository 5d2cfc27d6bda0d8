"""The final pruning: the smallest head of the kept features, by importance on the CV folds,
that predicts no worse than all of them.

The rounds keep every feature that does not make the set worse, so the set grows with the
proposal budget, not with what the training runs can support: on the example, 87 features on
385 training runs after two rounds. Before the model is fit, the kept features are ranked by
their split-gain share (:func:`autofe.modeling.importance.gain_shares`) averaged over the models
of the evaluator's time-ordered CV folds, each fit on its fold's training runs only: the
holdout is never read, and neither are a fold's own test runs. The heads that carry
:data:`LEVELS` of that importance are tried smallest first, and the first that scores no worse
than the whole set is kept: its CV R² at most the evaluator's ``tolerance`` below, its CV MAPE
and its what-if MAPE (:mod:`autofe.agents.whatif`) at most ``whatif_tolerance`` above. A head
that loses on any of the three is not taken, so pruning never trades the next-run score for the
what-if one or back. Every pruned feature is reported with the stage ``prune`` and its share.

The whole set's scores are the loop's last round's (it scored exactly the kept set), so only
the smaller heads are scored here.

Measured with ``autofe run [mapping] --out DIR --json`` at commit f2885ca (default settings;
``docs/results.md``, "Accuracy where the predictions are used"): on the example, 87 kept by
the rounds, 45 shipped (the 90, 95 and 98 % heads lost CV R²), holdout MAPE 21.2 % against
21.3 % unpruned; Scout 26 → 15, 9.9 % against 10.7 %; CherryPick 63 → 23, 15.2 % against
14.5 % (58 runs); C3O 40 → 40 (every smaller head lost CV R²).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from autofe.agents.evaluate import labelled_and_training, whatif_round
from autofe.agents.settings import EvalSettings
from autofe.agents.state import Dropped, Feature, Iteration
from autofe.agents.whatif import MaskedCache, WhatIfRound
from autofe.errors import ConfigError, ModelError
from autofe.modeling.dataset import Labelled, Value, build_dataset
from autofe.modeling.evaluate import cross_validate
from autofe.modeling.importance import gain_shares
from autofe.modeling.splits import time_folds
from autofe.modeling.train import fit
from autofe.warehouse.feature_store import read_store_values

LEVELS = (0.9, 0.95, 0.98, 0.99)
"""Shares of the fold-averaged importance a pruned head carries, tried smallest first."""


@dataclass(frozen=True)
class Scored:
    """One feature set's scores on the training runs."""

    features: int
    cv_r2: float
    cv_mape: float
    whatif_mape: float | None
    """None when the what-if score is off or the runs cannot support it."""
    level: float | None = None
    """The importance share the head carries (None for the whole set)."""
    verdict: str = ""


@dataclass(frozen=True)
class Pruning:
    """What the pruning did, for ``metrics.json`` and the report."""

    before: int
    after: int
    whole: Scored | None
    tried: list[Scored] = field(default_factory=list)
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "reason": self.reason,
            "whole": asdict(self.whole) if self.whole else None,
            "tried": [asdict(t) for t in self.tried],
        }


def prune_kept(
    db: Path,
    store: Path,
    kept: Sequence[Feature],
    settings: EvalSettings,
    iteration: int,
    cache: MaskedCache | None = None,
    last: Iteration | None = None,
) -> tuple[list[str], list[Dropped], Pruning]:
    """The names pruned from ``kept``, their drop records and the pruning's account.

    ``last``: the loop's last round, which scored exactly ``kept`` (a round's CV and what-if
    scores are those of the set it ends with); its scores stand for the whole set's rather
    than being computed again. Without it (or without its CV score) they are computed.

    Raises:
        WarehouseError: the warehouse or the store cannot be read.
        ConfigError: more labelled runs than the sandbox may return.
    """
    if len(kept) < 2:
        return [], [], Pruning(len(kept), len(kept), None, reason="fewer than two features")
    runs, train = labelled_and_training(db, settings)
    stored = read_store_values(store, [k["gate"]["feature_id"] for k in kept])
    values = {k["name"]: stored[k["gate"]["feature_id"]] for k in kept}
    try:
        shares = fold_importance(train, values, settings)
    except ConfigError as error:
        return [], [], Pruning(len(kept), len(kept), None, reason=f"not pruned: {error}")
    judge = whatif_round(db, runs, train, kept, settings, cache or MaskedCache())
    whole = _scored_round(last, len(kept)) or _score(
        train, values, tuple(sorted(values)), settings, judge
    )
    tried: list[Scored] = []
    for level in LEVELS:
        head = importance_head(shares, level)
        if len(head) >= len(values) or any(len(head) == t.features for t in tried):
            continue
        scored = _score(train, values, head, settings, judge, level)
        verdict = _verdict(scored, whole, settings)
        tried.append(replace(scored, verdict=verdict or "kept"))
        if not verdict:
            pruned = sorted(set(values) - set(head))
            reason = f"the head carrying {level:.0%} of the CV folds' importance scores no worse"
            drops = [_dropped(n, shares[n], level, iteration) for n in pruned]
            return pruned, drops, Pruning(len(kept), len(head), whole, tried, reason)
    reason = "every smaller head scored worse" if tried else "no smaller head to try"
    return [], [], Pruning(len(kept), len(kept), whole, tried, reason)


def fold_importance(
    train: Labelled, values: Mapping[str, Mapping[str, Value]], settings: EvalSettings
) -> dict[str, float]:
    """Each feature's gain share averaged over models fit on the CV folds' training runs.

    Raises:
        ConfigError: too few runs to fit a fold.
    """
    data = build_dataset(train, dict(values))
    total = dict.fromkeys(data.features, 0.0)
    folds = time_folds(len(data), settings.folds, settings.min_train, data.submit_times)
    for fold_train, _ in folds:
        for name, share in gain_shares(fit(data.rows(fold_train), settings.seed)).items():
            total[name] += share
    return {name: share / len(folds) for name, share in total.items()}


def importance_head(shares: Mapping[str, float], level: float) -> tuple[str, ...]:
    """The fewest most important features (ties by name) whose shares reach ``level`` of the
    total, in name order.

    >>> importance_head({"a": 0.5, "b": 0.3, "c": 0.15, "d": 0.05}, 0.9)
    ('a', 'b', 'c')
    """
    ranked = sorted(shares, key=lambda n: (-shares[n], n))
    total = sum(shares.values())
    if total <= 0:
        return tuple(sorted(shares))
    cumulative = np.cumsum([shares[n] for n in ranked]) / total
    count = int(np.searchsorted(cumulative, level - 1e-12)) + 1
    return tuple(sorted(ranked[: min(count, len(ranked))]))


def _score(
    train: Labelled,
    values: Mapping[str, Mapping[str, Value]],
    names: tuple[str, ...],
    settings: EvalSettings,
    judge: WhatIfRound | None,
    level: float | None = None,
) -> Scored:
    data = build_dataset(train, {n: values[n] for n in names})
    cv = cross_validate(data, settings.folds, settings.min_train, settings.seed).metrics
    whatif = None
    if judge is not None:
        try:
            mape = judge.mape(names)
            whatif = mape if math.isfinite(mape) else None
        except ModelError:
            whatif = None
    return Scored(len(names), round(cv.r2, 6), round(cv.mape, 6), _rounded(whatif), level)


def _scored_round(last: Iteration | None, features: int) -> Scored | None:
    """The last round's scores of the set it ended with (None when it has no CV score)."""
    if last is None or not math.isfinite(last["cv_r2"]):
        return None
    whatif = last.get("whatif_mape")
    cv_r2, cv_mape = round(last["cv_r2"], 6), round(last["cv_mape"], 6)
    return Scored(features, cv_r2, cv_mape, None if whatif is None else round(whatif, 6))


def _verdict(head: Scored, whole: Scored, settings: EvalSettings) -> str:
    """Why ``head`` is worse than ``whole`` (empty when it is not)."""
    if head.cv_r2 < whole.cv_r2 - settings.tolerance:
        return f"CV R² {head.cv_r2:.4f} < {whole.cv_r2:.4f} − {settings.tolerance}"
    if head.cv_mape > whole.cv_mape + settings.whatif_tolerance:
        return f"CV MAPE {head.cv_mape:.4f} > {whole.cv_mape:.4f} + {settings.whatif_tolerance}"
    new, old = head.whatif_mape, whole.whatif_mape
    if new is not None and old is not None and new > old + settings.whatif_tolerance:
        return f"what-if MAPE {new:.4f} > {old:.4f} + {settings.whatif_tolerance}"
    return ""


def _dropped(name: str, share: float, level: float, iteration: int) -> Dropped:
    reason = (
        f"CV-fold importance {share:.4f}: outside the head that carries {level:.0%} of it, "
        "which scores no worse without it"
    )
    return Dropped(name=name, stage="prune", reason=reason, iteration=iteration)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
