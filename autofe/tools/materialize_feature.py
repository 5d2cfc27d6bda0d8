"""Gate a feature, then compute its value for every run and store it in the feature store.

Nothing is written for a feature the gates reject. The gates open the warehouse themselves
(the completeness gate through ``Sandbox.open`` on ``ctx.db``, the dynamic leakage check by
attaching it read-only to a scratch database); both work while ``sandbox`` holds the same file
open, provided the two agree on the DuckDB settings (memory limit, threads): DuckDB shares one
instance per file per process and refuses a second configuration. :func:`gate_context` builds
a context that agrees with an open sandbox; ``GateContext.load`` cannot be used while the
sandbox is open (it opens the file with another configuration).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from pydantic import BaseModel

from autofe.errors import ConfigError
from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext, GateSettings, Reason
from autofe.gates.admit import admit, coverage, run_ids
from autofe.sandbox.session import Sandbox
from autofe.warehouse.feature_store import write_feature


class GateReason(BaseModel):
    """Why a gate rejected the feature: a stable code, a message to act on, where in the SQL."""

    gate: str
    code: str
    message: str
    span: tuple[int, int] | None = None
    column: str | None = None


class MaterializeResult(BaseModel):
    """What happened: rejected with reasons (nothing written), or stored with its coverage."""

    feature_id: str
    name: str
    accepted: bool
    reasons: list[GateReason]
    rows: int
    """Rows stored (0 when rejected)."""
    coverage: float | None
    """Share of the warehouse's runs with a non-null value (None when rejected)."""
    seconds: float


def gate_context(db: Path, sandbox: Sandbox, settings: GateSettings | None = None) -> GateContext:
    """A gate context for the warehouse ``sandbox`` has open at ``db``, sharing its limits.

    Use it instead of ``GateContext.load`` while the sandbox is open.
    """
    settings = dataclasses.replace(settings or GateSettings(), limits=sandbox.limits)
    return GateContext(db, sandbox.catalog, settings)


def materialize_feature(
    spec: FeatureSpec, ctx: GateContext, sandbox: Sandbox, store: Path
) -> MaterializeResult:
    """Admit ``spec`` (:func:`~autofe.gates.admit.admit`) and store its value for every run.

    Re-materialising a feature replaces its stored values in one transaction.

    Args:
        spec: the feature.
        ctx: the gates' view of the warehouse ``sandbox`` reads (see :func:`gate_context`).
        sandbox: the read-only warehouse the values are computed in.
        store: the feature store file (never the warehouse itself).

    Raises:
        ConfigError: ``store`` is the warehouse.
        WarehouseError: the store cannot be written (nothing was changed), or the gates
            cannot open the warehouse (another configuration holds it in this process).
        ModelError: computing the values failed after the gates passed.
    """
    started = time.perf_counter()
    if Path(store).resolve() == Path(ctx.db).resolve():
        raise ConfigError(f"the feature store {store} is the warehouse: give another file")
    admission = admit(spec, ctx, sandbox)
    if admission.values is None:
        return _result(spec, started, reasons=[_reason(r) for r in admission.verdict.reasons])
    share = coverage(admission.values, run_ids(sandbox))
    stored = write_feature(Path(store), spec, list(admission.values.items()), share)
    return _result(spec, started, rows=stored.rows, coverage=round(stored.coverage, 6))


def _reason(reason: Reason) -> GateReason:
    return GateReason(
        gate=reason.gate,
        code=reason.code,
        message=reason.message,
        span=reason.span,
        column=reason.column,
    )


def _result(
    spec: FeatureSpec,
    started: float,
    *,
    reasons: list[GateReason] | None = None,
    rows: int = 0,
    coverage: float | None = None,
) -> MaterializeResult:
    return MaterializeResult(
        feature_id=spec.feature_id,
        name=spec.name,
        accepted=not reasons,
        reasons=reasons or [],
        rows=rows,
        coverage=coverage,
        seconds=round(time.perf_counter() - started, 4),
    )
