"""How much each feature matters to a fitted model: its share of the model's split gain, and
for an anchored model (:mod:`autofe.modeling.train`) of the runs it anchors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autofe.modeling.train import RuntimeModel


def gain_shares(model: RuntimeModel) -> dict[str, float]:
    """Each feature's share of what decides the model's predictions (all 0 when nothing does).

    Every training run's prediction counts once. A run with no anchor is the plain booster's,
    shared out by split gain: gain rather than split counts, because a feature used in many
    shallow splits that barely reduce the error is not what the model relies on. An anchored
    run's prediction starts from its anchor feature, which gets the run's whole weight, or half
    of it when an anchored booster moves the anchor (the other half shared out by that
    booster's gain).
    """
    anchored = float(sum(model.anchor_shares))
    shares = (1.0 - anchored) * _gain(model.booster.booster_, model.features)
    weight = 1.0
    if model.residual is not None:
        weight = 0.5
        shares += anchored * 0.5 * _gain(model.residual.booster_, model.features)
    for column, share in zip(model.anchors, model.anchor_shares, strict=True):
        shares[column] += weight * share
    total = float(shares.sum())
    return {
        n: float(g) / total if total > 0 else 0.0
        for n, g in zip(model.features, shares, strict=True)
    }


def _gain(booster: Any, features: Sequence[str]) -> np.ndarray:
    """Shares of ``booster``'s split gain per feature (zeros when it never split)."""
    gain = np.asarray(booster.feature_importance("gain"), dtype=np.float64)
    total = float(gain.sum())
    return gain / total if total > 0 else np.zeros(len(features))
