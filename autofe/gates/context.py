"""What every gate receives (the warehouse and limits) and returns (reasons to reject)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autofe.featurespec import FeatureSpec
from autofe.sandbox.limits import SandboxLimits
from autofe.warehouse.catalog import WarehouseCatalog, read_catalog
from autofe.warehouse.connect import open_warehouse


@dataclass(frozen=True)
class Reason:
    """Why a gate rejected a feature: a stable code, a message a model can act on, where."""

    gate: str
    code: str
    message: str
    span: tuple[int, int] | None = None
    column: str | None = None
    stopped_by: str | None = None
    """The sandbox limit that stopped the feature's query ("the 10 s timeout"), if one did:
    later gates then skip what would run the query again (see ``run_gates``)."""
    unreadable: str | None = None
    """Why the feature's SQL cannot be walked at all ("statement nested too deeply to check"),
    if so: later gates, which would walk it, do not run (see ``run_gates``)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "gate": self.gate,
            "code": self.code,
            "message": self.message,
            "span": list(self.span) if self.span else None,
            "column": self.column,
        }


@dataclass(frozen=True)
class GateSettings:
    """Thresholds and budgets of the gates."""

    min_coverage: float = 0.5
    """Share of runs that must get a non-null value, among the runs of the jobs the feature gives
    any value for (a job's own parameter is not missing for the other jobs)."""
    budget_s_per_1000_runs: float = 2.0
    """Extraction budget B: the dry run may take at most this per 1 000 runs."""
    dynamic_targets: int = 6
    """Target runs whose worlds are perturbed by the dynamic leakage check."""
    seed: int = 7
    feature_budget_s: float = 60.0
    """The cost gate's budget B: a feature's projected time at the horizon (``autofe run
    --feature-budget-seconds``). A minute per feature keeps a 200-feature catalog's
    materialisation on a history ``cost_horizon`` times this one within a few hours."""
    cost_horizon: float = 10.0
    """The history the cost gate projects to, in multiples of the warehouse's runs."""
    history_runs: int | None = None
    """Runs of the history the features will be computed on, when the gated warehouse is a
    sample of it (``autofe run`` above ``--sample-runs``): the cost gate projects to it and to
    ``cost_horizon`` times it. None: the gated warehouse is the history."""
    cost_sample_shares: tuple[float, ...] = (0.1, 0.4)
    """The nested job samples the cost gate measures on, as shares of the runs."""
    cost_sample_cap: int = 50_000
    """Runs in the largest sample at most (the smaller keeps its ratio)."""
    limits: SandboxLimits = field(default_factory=SandboxLimits)


@dataclass(frozen=True)
class GateContext:
    """A warehouse (opened read-only by whoever needs it) and the gate settings."""

    db: Path
    catalog: WarehouseCatalog
    settings: GateSettings = field(default_factory=GateSettings)

    @classmethod
    def load(cls, db: Path, settings: GateSettings | None = None) -> GateContext:
        """Read the column catalog of the warehouse at ``db``.

        Raises:
            WarehouseError: the warehouse does not exist or cannot be opened.
        """
        con = open_warehouse(db, read_only=True)
        try:
            catalog = read_catalog(con)
        finally:
            con.close()
        return cls(db, catalog, settings or GateSettings())


Gate = Callable[[FeatureSpec, GateContext], list[Reason]]
"""A gate returns the reasons it rejects a feature; an empty list admits it."""
