"""How much each feature matters to a fitted model: its share of the model's split gain."""

from __future__ import annotations

import numpy as np

from autofe.modeling.train import RuntimeModel


def gain_shares(model: RuntimeModel) -> dict[str, float]:
    """Each feature's share of the model's total split gain (all 0 when it never split).

    Gain rather than split counts: a feature used in many shallow splits that barely reduce
    the error is not what the model relies on.
    """
    gain = np.asarray(model.booster.booster_.feature_importance("gain"), dtype=np.float64)
    total = float(gain.sum())
    return {
        n: float(g) / total if total > 0 else 0.0 for n, g in zip(model.features, gain, strict=True)
    }
