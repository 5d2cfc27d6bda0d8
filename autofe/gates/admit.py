"""Admit a feature: every gate first, then its value for every run, computed only if they accept.

The one path from a candidate to values, taken by the MCP tool ``materialize_feature``,
``autofe features materialize`` (its DuckDB engine; the Spark engine runs the same gates and
computes on Spark), ``autofe train`` and the evaluation report: whatever values a model learns
from or the feature store keeps, the gates accepted the feature on the warehouse first.

``ctx`` and ``sandbox`` read the same warehouse. The gates open it themselves while ``sandbox``
holds it open, which DuckDB allows when both agree on its settings (memory limit, threads).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autofe.errors import GateRejected
from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext, Verdict, run_gates
from autofe.modeling.compute import feature_values, labelled_matrix
from autofe.modeling.dataset import Dataset, Value
from autofe.sandbox.session import Sandbox


@dataclass(frozen=True)
class Admission:
    """The gates' verdict on one feature and, if they accepted it, its value for every run."""

    verdict: Verdict
    values: dict[str, Value] | None
    """Run id → value; None when a gate rejected the feature (nothing was computed)."""
    gate_s: float
    compute_s: float = 0.0


def admit(spec: FeatureSpec, ctx: GateContext, sandbox: Sandbox) -> Admission:
    """Run every gate on ``spec``; only if all accept it, compute its values in ``sandbox``.

    Raises:
        ModelError: the accepted feature cannot be computed (the message names it).
    """
    started = time.perf_counter()
    verdict = run_gates(spec, ctx)
    gated = time.perf_counter()
    if not verdict.accepted:
        return Admission(verdict, None, gated - started)
    values = feature_values(sandbox, spec)
    return Admission(verdict, values, gated - started, time.perf_counter() - gated)


def rejection(verdict: Verdict) -> GateRejected:
    """The error a rejected feature raises where a model needs every feature it was given."""
    return GateRejected(
        f"feature {verdict.name}", [f"{r.code}: {r.message}" for r in verdict.reasons]
    )


def admitted_matrix(db: Path, specs: Sequence[FeatureSpec]) -> tuple[Dataset, dict[str, float]]:
    """The labelled runs of ``db`` (time order) with the values of ``specs``, each admitted first.

    Returns:
        The dataset, and the seconds spent in the gates and computing (``gates``, ``features``).

    Raises:
        GateRejected: the first feature a gate rejects, with all its reasons.
        ModelError, WarehouseError: a feature cannot be computed, the warehouse cannot be read.
    """
    ctx = GateContext.load(db)  # read before the sandbox opens: load opens the file its own way
    started = time.perf_counter()
    values: dict[str, dict[str, Value]] = {}
    gate_s = 0.0
    with Sandbox.open(db) as sandbox:
        for spec in specs:
            admission = admit(spec, ctx, sandbox)
            gate_s += admission.gate_s
            if admission.values is None:
                raise rejection(admission.verdict)
            values[spec.name] = admission.values
        data = labelled_matrix(sandbox, values)
    total = time.perf_counter() - started
    return data, {"gates": round(gate_s, 3), "features": round(total - gate_s, 3)}


def run_ids(sandbox: Sandbox) -> set[str]:
    """Every run of the warehouse ``sandbox`` reads (at most its ``max_rows``)."""
    return {str(row[0]) for row in sandbox.query("SELECT run_id FROM runs").rows}


def coverage(values: Mapping[str, Value], runs: Collection[str]) -> float:
    """Share of ``runs`` with a non-null value: the coverage the feature store records.

    >>> coverage({"r1": 1.0, "r2": None, "elsewhere": 2.0}, {"r1", "r2", "r3", "r4"})
    0.25
    """
    covered = sum(1 for run, value in values.items() if value is not None and run in runs)
    return covered / len(runs) if runs else 0.0
