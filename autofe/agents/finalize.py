"""The finalize node: the kept features become a catalog and a model scored on the holdout.

The holdout (the latest runs by submit time) was never seen by the evaluator, so its score is
the honest one; the saved model is then refit on every labelled run, as ``autofe train`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autofe.agents.context import LoopContext, Node
from autofe.agents.prune import prune_kept
from autofe.agents.state import Feature, LoopState
from autofe.agents.whatif import MaskedCache
from autofe.errors import ConfigError
from autofe.feature_catalog import save_catalog
from autofe.featurespec import FeatureSpec, Provenance
from autofe.json_file import write_json
from autofe.modeling.artifact import Artifact, library_versions, save_model
from autofe.modeling.baselines import FACTS_SQL, as_facts, best_baseline, score_baselines
from autofe.modeling.dataset import LABELLED_SQL, Dataset, as_labelled, columns_dataset
from autofe.modeling.evaluate import Evaluation, evaluate_holdout
from autofe.modeling.novelty import labelled_novelty
from autofe.modeling.splits import holdout_cut
from autofe.modeling.train import fit
from autofe.run_dir import RunDir
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import Sandbox
from autofe.warehouse.connect import schema_fingerprint
from autofe.warehouse.feature_store import read_store_columns


def finalize_node(ctx: LoopContext, cache: MaskedCache | None = None) -> Node:
    """The node: the kept features pruned (:mod:`autofe.agents.prune`), the catalog, the model
    and its holdout score; the round's fields cleared. ``cache``: the evaluate node's masked
    values, so the pruning's what-if scores compute nothing the rounds already did."""

    async def finalize(state: LoopState) -> dict[str, Any]:
        settings = ctx.settings.evaluation
        kept = state.get("kept", [])
        iteration = state.get("iteration", 0)
        history = state.get("history", [])
        last = history[-1] if history else None
        pruned, drops, pruning = prune_kept(
            ctx.db, ctx.store, kept, settings, iteration, cache, last
        )
        gone = set(pruned)
        kept = [k for k in kept if k["name"] not in gone]
        specs = [feature_spec(k, ctx.backend.name) for k in kept]
        final = finalize_model(ctx.db, ctx.store, kept, specs, ctx.out_dir, settings.holdout)
        final["pruning"] = pruning.as_dict()
        return {"final": final, "candidates": [], "pruned": pruned, "dropped": drops}

    return finalize


def feature_spec(feature: Feature, backend: str) -> FeatureSpec:
    """The one place a loop's feature becomes a catalog entry.

    >>> f = Feature(name="n", sql="SELECT run_id, 1 AS value FROM runs", category="history",
    ...             value_type="DOUBLE", rationale="", kb_refs=["kb1"], origin="llm")
    >>> spec = feature_spec(f, "offline")
    >>> spec.kb_refs, spec.provenance.agent, spec.provenance.backend
    (('kb1',), 'analyzer', 'offline')
    """
    return FeatureSpec(
        name=feature["name"],
        sql=feature["sql"],
        category=feature["category"],  # type: ignore[arg-type]
        value_type=feature["value_type"],  # type: ignore[arg-type]
        rationale=feature["rationale"],
        kb_refs=tuple(feature["kb_refs"]),
        provenance=Provenance(agent="analyzer", backend=backend),
    )


def finalize_model(
    db: Path,
    store: Path,
    kept: Sequence[Feature],
    specs: Sequence[FeatureSpec],
    out_dir: Path,
    holdout: float,
    seed: int = 0,
    limits: SandboxLimits | None = None,
) -> dict[str, Any]:
    """Write the catalog, the model and the holdout's predictions; return the holdout metrics,
    the simple baselines scored on the same runs, and where things went.

    ``limits``: the sandbox's (default: the interactive ones, whose row cap a warehouse of
    more runs would exceed: :func:`~autofe.pipelines.run_sample.refit_on_all_runs` passes a
    batch's)."""
    if not kept:
        return {"features": 0, "model": None, "holdout": None}
    run_dir = RunDir(out_dir)
    save_catalog(run_dir.features, list(specs))
    with Sandbox.open(db, limits) as sandbox:  # agrees with the tools server's open sandbox
        labelled, known = sandbox.query(LABELLED_SQL), sandbox.query(FACTS_SQL)
        if labelled.truncated or known.truncated:
            raise ConfigError(f"{db} has more runs than the sandbox's max_rows: sample it")
        runs = as_labelled(labelled.rows)
        facts = {f.run_id: f for f in as_facts(known.rows)}
        novel = labelled_novelty(sandbox)
    ids = [k["gate"]["feature_id"] for k in kept]
    by_id = read_store_columns(store, [r[0] for r in runs], ids)
    data = columns_dataset(runs, {k["name"]: by_id[k["gate"]["feature_id"]] for k in kept}, novel)
    cut = holdout_cut(data.submit_times, holdout)
    scored = evaluate_holdout(data, cut, seed)
    baselines = score_baselines([facts[r] for r in data.run_ids], cut, seed)
    write_json(run_dir.holdout_predictions, holdout_predictions(data, cut, scored))
    model = fit(data, seed)
    metrics = {"holdout": scored.metrics}
    artifact = Artifact(model, tuple(specs), schema_fingerprint(), metrics, library_versions())
    path = save_model(artifact, out_dir)
    return {
        "features": len(specs),
        "model": str(path),
        "holdout": scored.as_dict(),
        "holdout_runs": int(np.size(scored.actual)),
        "baselines": [b.as_dict() for b in baselines],
        "best_baseline": best_baseline(baselines),
    }


def holdout_predictions(data: Dataset, cut: int, scored: Evaluation) -> dict[str, Any]:
    """``holdout.json``: every holdout run's actual and predicted seconds with its 80 % and
    90 % bounds, in submit order, so a report or a user can see which runs the score hides."""
    block = data.rows(np.arange(cut, len(data)))
    (low_80, high_80), (low_90, high_90) = scored.bounds[0.8], scored.bounds[0.9]
    columns = zip(scored.predicted, low_80, high_80, low_90, high_90, strict=True)
    rows = [
        {
            "run_id": run_id,
            "job_id": job_id,
            "submit_time": submitted.isoformat(),
            "actual_s": round(float(actual), 3),
            **{k: round(float(v), 3) for k, v in zip(BOUND_KEYS, numbers, strict=True)},
            "novel": bool(new),
        }
        for run_id, job_id, submitted, actual, numbers, new in zip(
            block.run_ids,
            block.job_ids,
            block.submit_times,
            block.seconds,
            columns,
            _novel(block),
            strict=True,
        )
    ]
    return {"runs": rows}


def _novel(block: Dataset) -> list[bool]:
    """Each run's novelty (``holdout.json``'s ``novel``: new to its job's history)."""
    return [False] * len(block) if block.novel is None else [bool(v) for v in block.novel]


BOUND_KEYS = ("p50_s", "low_80", "high_80", "low_90", "high_90")
