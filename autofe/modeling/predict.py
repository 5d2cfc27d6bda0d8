"""Predict one run's duration with a saved model: the median and how wrong it can be.

A run already in the warehouse is predicted from its features as of its submit time (the
features are gated: they read nothing later). A run not yet submitted is first placed into a
scratch copy of the warehouse (:mod:`autofe.modeling.pending`), then predicted the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autofe.errors import ConfigError
from autofe.modeling.artifact import Artifact
from autofe.modeling.compute import compute_values, parse_query
from autofe.modeling.dataset import Value, stable
from autofe.modeling.novelty import run_novelty
from autofe.modeling.pending import PendingRun, pending_sandbox
from autofe.sandbox.rewrite import referenced_tables
from autofe.sandbox.session import Sandbox


@dataclass(frozen=True)
class Prediction:
    """A p50 duration with its conformal intervals (seconds), and the inputs it came from."""

    run_id: str
    job_id: str
    p50_s: float
    intervals: dict[float, tuple[float, float]]
    features: dict[str, Value] = field(default_factory=dict)
    novel: bool | None = None
    """Whether the run is new to its job's history (None: not known)."""

    @property
    def missing(self) -> list[str]:
        """Features without a value for this run (the model treats them as unknown)."""
        return sorted(name for name, value in self.features.items() if value is None)

    def as_dict(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "job_id": self.job_id,
            "p50_s": round(self.p50_s, 3),
            "intervals": {
                f"{round(level * 100)}%": [round(low, 3), round(high, 3)]
                for level, (low, high) in sorted(self.intervals.items())
            },
            "features": self.features,
            "missing_features": self.missing,
            "novel": self.novel,
        }


def predict_values(
    artifact: Artifact,
    values: Mapping[str, Value],
    run_id: str,
    job_id: str,
    novel: bool | None = None,
) -> Prediction:
    """Predict from feature values given by name (absent names count as missing); ``novel``:
    whether the run is new to its job's history (None, unknown: the interval is calibrated on
    every run alike)."""
    model = artifact.model
    row = [model.encoder.encode(name, values.get(name)) for name in model.features]
    x = stable(np.array([row], dtype=np.float64))
    p50s, bounds = model.predict(x, [job_id], [novel])
    p50 = float(p50s[0])
    intervals = {level: (float(low[0]), float(high[0])) for level, (low, high) in bounds.items()}
    features = {name: values.get(name) for name in model.features}
    return Prediction(run_id, job_id, p50, intervals, features, novel)


def predict_run(artifact: Artifact, db: Path, run_id: str) -> Prediction:
    """Predict a run the warehouse at ``db`` holds, from what was known at its submit time.

    Raises:
        ConfigError: the run is not in the warehouse.
        ModelError: a feature cannot be computed.
        WarehouseError: the warehouse cannot be opened.
    """
    with Sandbox.open(db) as sandbox:
        return _predict_in(artifact, sandbox, run_id, f"the warehouse {db}")


def predict_pending(artifact: Artifact, db: Path, pending: PendingRun) -> Prediction:
    """Predict a run not yet submitted, placed into a scratch copy of the warehouse.

    Raises:
        ConfigError: the pending run contradicts the warehouse (see ``pending_sandbox``).
        ModelError: a feature cannot be computed.
        WarehouseError: the warehouse cannot be read.
    """
    tables = set().union(*(referenced_tables(parse_query(s)) for s in artifact.specs))
    with pending_sandbox(db, pending, tables) as sandbox:
        return _predict_in(artifact, sandbox, pending.run_id, "the pending run")


def _predict_in(artifact: Artifact, sandbox: Sandbox, run_id: str, where: str) -> Prediction:
    found = sandbox.query(f"SELECT job_id FROM runs WHERE run_id = '{_escaped(run_id)}'").rows
    if not found:
        raise ConfigError(f"run {run_id!r} is not in {where}")
    values = compute_values(sandbox, artifact.specs, [run_id])
    one = {name: by_run.get(run_id) for name, by_run in values.items()}
    novel = run_novelty(sandbox, run_id)
    return predict_values(artifact, one, run_id, str(found[0][0] or ""), novel)


def _escaped(text: str) -> str:
    return text.replace("'", "''")
