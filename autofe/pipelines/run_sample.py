"""``autofe run`` on a large history: the loop on a sample, the final model on every run.

Scoring ~70 candidates a round on every run of a million-run warehouse would take hours per
round. Above ``LoopSettings.sample_runs`` runs, the loop (gates, rounds, pruning) works on a
sample of whole jobs, stratified by time and by the code they run (:mod:`autofe.warehouse.sample`),
of about that many runs; then the kept catalog is computed on every run of the warehouse and the
final model is scored on the warehouse's own holdout and fitted on all its labelled runs, so
what ships is judged on the whole history, as a run without sampling is.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from autofe.agents.finalize import finalize_model
from autofe.agents.state import Feature
from autofe.errors import ModelError
from autofe.featurespec import FeatureSpec
from autofe.gates.admit import coverage
from autofe.modeling.compute import feature_values
from autofe.run_dir import RunDir
from autofe.sandbox.limits import SandboxLimits, spilling
from autofe.sandbox.session import Sandbox
from autofe.warehouse.feature_store import write_feature
from autofe.warehouse.sample import WarehouseSample, count_runs, sample_warehouse

log = logging.getLogger(__name__)

BATCH_TIMEOUT_S = 3600.0
"""A feature over every run of a large warehouse is a batch, not an interactive query."""


def sample_if_large(run_dir: RunDir, sample_runs: int) -> WarehouseSample | None:
    """Write the loop's sample (and ``sample.json``) when the warehouse has more runs than
    ``sample_runs``; None when the loop reads the warehouse itself."""
    total = count_runs(run_dir.warehouse)
    if total <= sample_runs:
        return None
    started = time.perf_counter()
    sample = sample_warehouse(run_dir.warehouse, run_dir.sample, sample_runs)
    record = {**sample.as_dict(), "seconds": round(time.perf_counter() - started, 1)}
    run_dir.sample_record.write_text(json.dumps(record, indent=2) + "\n")
    log.info("the loop scores on a sample: %s", record)
    return sample


def loop_warehouse(run_dir: RunDir) -> Path:
    """The warehouse the loop reads: the sample when the run made one."""
    return run_dir.sample if run_dir.sample.is_file() else run_dir.warehouse


def sample_record(run_dir: RunDir) -> dict[str, Any] | None:
    """``sample.json`` of a sampled run, else None."""
    path = run_dir.sample_record
    return json.loads(path.read_text()) if path.is_file() else None


def refit_on_all_runs(
    out: Path,
    kept: Sequence[Feature],
    specs: Sequence[FeatureSpec],
    holdout: float,
    limits: SandboxLimits,
) -> dict[str, Any]:
    """Compute ``specs`` on every run of the run's warehouse into its feature store (replacing
    the sample's values), then score and fit the final model there (:func:`finalize_model`).

    Queries may spill to the run's ``spill`` folder (:func:`~autofe.sandbox.limits.spilling`):
    a feature the loop measured on a sample can need more than the memory limit on every run.
    A feature that still cannot be computed on every run (over the spill bound, say) is left
    out of the model rather than failing the run; the result's ``unfit`` lists each with the
    reason.

    Raises:
        WarehouseError: the warehouse or the store cannot be read or written.
    """
    run_dir = RunDir(out)
    started = time.perf_counter()
    unfit: list[dict[str, str]] = []
    whole = replace(limits, timeout_s=BATCH_TIMEOUT_S, max_rows=2**62)
    with spilling(whole, run_dir.spill) as batch, Sandbox.open(run_dir.warehouse, batch) as sandbox:
        every = {str(r[0]) for r in sandbox.query("SELECT run_id FROM runs").rows}
        for spec in specs:
            try:
                values = feature_values(sandbox, spec)
            except ModelError as exc:
                log.warning("left out of the model: %s", exc)
                unfit.append({"name": spec.name, "reason": str(exc)})
                continue
            write_feature(
                run_dir.feature_store, spec, list(values.items()), coverage(values, every)
            )
    computed = time.perf_counter() - started
    left_out = {u["name"] for u in unfit}
    final = finalize_model(
        run_dir.warehouse,
        run_dir.feature_store,
        [k for k in kept if k["name"] not in left_out],
        [s for s in specs if s.name not in left_out],
        out,
        holdout,
        limits=whole,
    )
    log.info("final catalog on all %d runs in %.0f s", len(every), computed)
    return {**final, "all_runs_seconds": round(computed, 1), "unfit": unfit}
