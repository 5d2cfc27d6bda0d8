"""The last node's work: the kept features become a catalog and a model scored on the holdout.

The holdout (the latest runs by submit time) was never seen by the evaluator, so its score is
the honest one; the saved model is then refit on every labelled run, as ``autofe train`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autofe.agents.state import Candidate, Kept
from autofe.feature_catalog import save_catalog
from autofe.featurespec import FeatureSpec, Provenance
from autofe.modeling.artifact import Artifact, library_versions, save_model
from autofe.modeling.dataset import LABELLED_SQL, as_labelled, build_dataset
from autofe.modeling.evaluate import evaluate_holdout
from autofe.modeling.train import fit
from autofe.sandbox.session import Sandbox
from autofe.warehouse.connect import schema_fingerprint
from autofe.warehouse.feature_store import read_store_values

FEATURES_DIR = "features"


def kept_specs(
    kept: Sequence[Kept], proposals: Sequence[Candidate], backend: str
) -> list[FeatureSpec]:
    """The kept features as specs (value types from their proposals)."""
    value_types = {c["name"]: c["value_type"] for c in proposals}
    return [
        FeatureSpec(
            name=k["name"],
            sql=k["sql"],
            category=k["category"],  # type: ignore[arg-type]
            value_type=value_types.get(k["name"], "DOUBLE"),  # type: ignore[arg-type]
            rationale=k["rationale"],
            kb_refs=tuple(k["kb_refs"]),
            provenance=Provenance(agent="analyzer", backend=backend),
        )
        for k in kept
    ]


def finalize_model(
    db: Path,
    store: Path,
    kept: Sequence[Kept],
    specs: Sequence[FeatureSpec],
    out_dir: Path,
    holdout: float,
    seed: int = 0,
) -> dict[str, Any]:
    """Write the catalog and the model; return the holdout metrics and where things went."""
    if not kept:
        return {"features": 0, "model": None, "holdout": None}
    save_catalog(out_dir / FEATURES_DIR, list(specs))
    by_id = read_store_values(store, [k["feature_id"] for k in kept])
    values = {k["name"]: by_id.get(k["feature_id"], {}) for k in kept}
    with Sandbox.open(db) as sandbox:  # agrees with the tools server's open sandbox
        runs = as_labelled(sandbox.query(LABELLED_SQL).rows)
    data = build_dataset(runs, values)
    cut = round(len(data) * (1.0 - holdout))
    scored = evaluate_holdout(data, cut, seed)
    model = fit(data, seed)
    metrics = {"holdout": scored.metrics}
    artifact = Artifact(model, tuple(specs), schema_fingerprint(), metrics, library_versions())
    path = save_model(artifact, out_dir)
    return {
        "features": len(specs),
        "model": str(path),
        "holdout": scored.as_dict(),
        "holdout_runs": int(np.size(scored.actual)),
    }
