"""Train a runtime model on a feature set and save it: gates, values, holdout score, artifact.

The holdout is the last share of labelled runs by submit time: the model that is scored has seen
none of them, nor anything submitted after them. The saved model is then refit the same way on
every labelled run (more history predicts the next run better), and carries the holdout score
of the procedure that made it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autofe.errors import ConfigError
from autofe.featurespec import FeatureSpec
from autofe.gates.admit import admitted_matrix
from autofe.modeling.artifact import Artifact, library_versions, save_model
from autofe.modeling.evaluate import Evaluation, evaluate_holdout
from autofe.modeling.splits import holdout_cut
from autofe.modeling.train import fit
from autofe.warehouse.connect import schema_fingerprint

HOLDOUT = 0.2


@dataclass
class TrainResult:
    """The saved model, its holdout evaluation, and seconds per phase."""

    model_path: Path
    artifact: Artifact
    holdout: Evaluation
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "model": str(self.model_path),
            "features": len(self.artifact.specs),
            "runs": self.artifact.model.window,
            "holdout": self.holdout.as_dict(),
            "seconds": self.seconds,
        }


def train_model(
    db: Path,
    specs: Sequence[FeatureSpec],
    out: Path,
    holdout: float = HOLDOUT,
    seed: int = 0,
) -> TrainResult:
    """Gate ``specs`` on the warehouse at ``db``, fit, score the time holdout, save to ``out``.

    Raises:
        GateRejected: a feature fails a gate (nothing is trained or written).
        ConfigError: too few labelled runs, or a bad holdout share.
        ModelError, WarehouseError: a feature cannot be computed, the warehouse cannot be read.
    """
    if not 0.0 < holdout < 1.0:
        raise ConfigError(f"holdout share must be between 0 and 1, not {holdout}")
    data, seconds = admitted_matrix(db, specs)
    clock = _Clock(seconds)
    cut = holdout_cut(data.submit_times, holdout)
    scored = evaluate_holdout(data, cut, seed)
    model = fit(data, seed)
    clock.lap("train")
    metrics = {"holdout": scored.metrics}
    artifact = Artifact(model, tuple(specs), schema_fingerprint(), metrics, library_versions())
    path = save_model(artifact, out)
    clock.lap("save")
    return TrainResult(path, artifact, scored, clock.seconds)


class _Clock:
    def __init__(self, seconds: dict[str, float]) -> None:
        self._last = time.perf_counter()
        self.seconds = dict(seconds)

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = round(now - self._last, 3)
        self._last = now
