"""``autofe features materialize``: gate a feature set, compute it on DuckDB or Spark, store it.

The gates always run in DuckDB. The DuckDB engine admits each feature on the warehouse
(:func:`autofe.gates.admit.admit`: gated, then computed only if accepted); the Spark engine
gates the whole set first, on the warehouse when there is one (``--db``), else on a sample of
whole jobs drawn from the Parquet tables (:mod:`autofe.warehouse.parquet_sample`), and computes
the accepted features on Spark. The values go to the feature store either way, so a model or
``autofe mcp`` reads them without knowing which engine made them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Literal

from autofe.errors import ConfigError, ModelError
from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext, GateSettings, Verdict, run_gates
from autofe.gates.admit import admit, coverage, run_ids
from autofe.pipelines.spark import (
    Refusal,
    SparkSettings,
    materialize_on_spark,
    write_spark_features,
)
from autofe.sandbox.limits import SandboxLimits, spilling
from autofe.sandbox.session import Sandbox
from autofe.warehouse.feature_store import Materialized, write_feature
from autofe.warehouse.parquet_sample import DEFAULT_SAMPLE_RUNS, gate_sample

Engine = Literal["duckdb", "spark"]

BATCH_LIMITS = SandboxLimits(timeout_s=600.0, max_rows=50_000_000)
"""A batch computes every run's value: the interactive sandbox's row and time caps would cut
it short. Memory and threads stay the sandbox's (DuckDB shares one configuration per file);
queries may spill into a folder beside the store (:func:`~autofe.sandbox.limits.spilling`)."""


@dataclass(frozen=True)
class MaterializeSettings:
    """Which engine computes, what it reads, where values go."""

    engine: Engine
    store: Path
    db: Path | None = None
    """The DuckDB warehouse: computed on (duckdb) and gated on (either engine) when given."""
    tables: Path | None = None
    """Parquet tables from ``autofe ingest --engine spark`` (spark)."""
    spark: SparkSettings = field(default_factory=SparkSettings)
    gate_sample_runs: int = DEFAULT_SAMPLE_RUNS


@dataclass
class MaterializeReport:
    """What was gated, stored and refused, and how long each phase took."""

    engine: Engine
    rejected: dict[str, list[str]]
    """Features a gate rejected, with the reasons (nothing computed for them)."""
    stored: list[Materialized]
    refused: list[Refusal]
    gated_on: str
    seconds: dict[str, float]

    def as_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "gated_on": self.gated_on,
            "stored": [
                {"feature_id": m.feature_id, "rows": m.rows, "coverage": m.coverage}
                for m in self.stored
            ],
            "rejected": self.rejected,
            "refused": [r.as_dict() for r in self.refused],
            "seconds": self.seconds,
        }


def materialize_catalog(
    specs: Sequence[FeatureSpec], settings: MaterializeSettings
) -> MaterializeReport:
    """Gate ``specs``, compute the accepted ones with ``settings.engine``, store their values.

    Raises:
        ConfigError: the inputs do not fit the engine (no ``db`` for duckdb, no ``tables`` for
            spark), or Spark cannot start.
        WarehouseError: a warehouse, table folder or the store cannot be read or written.
    """
    _check_inputs(settings)
    on_engine = _on_duckdb if settings.engine == "duckdb" else _on_spark
    rejected, stored, refused, seconds = on_engine(specs, settings)
    where = (
        "warehouse"
        if settings.db
        else f"sample of whole jobs, at most {settings.gate_sample_runs} runs"
    )
    return MaterializeReport(settings.engine, rejected, stored, refused, where, seconds)


def _check_inputs(settings: MaterializeSettings) -> None:
    if settings.engine == "duckdb" and settings.db is None:
        raise ConfigError("--engine duckdb computes on a warehouse: give --db")
    if settings.engine == "spark" and settings.tables is None:
        raise ConfigError("--engine spark computes on Parquet tables: give --tables")
    if settings.engine not in ("duckdb", "spark"):
        raise ConfigError(f"--engine must be duckdb or spark, not {settings.engine!r}")


_Outcome = tuple[dict[str, list[str]], list[Materialized], list[Refusal], dict[str, float]]
"""Rejected features with their reasons, what was stored, what was refused, seconds by phase."""


def _on_duckdb(specs: Sequence[FeatureSpec], settings: MaterializeSettings) -> _Outcome:
    """Each feature admitted (gated, then computed) on the warehouse, and stored."""
    db = settings.db or Path()
    rejected, stored, refused = {}, [], []
    started, gate_s = time.perf_counter(), 0.0
    spill = settings.store.with_name(settings.store.name + ".spill")
    with spilling(BATCH_LIMITS, spill) as limits:
        # the gates keep their own time and row limits; DuckDB's settings are one per file
        own = replace(SandboxLimits(), spill_dir=limits.spill_dir, max_spill=limits.max_spill)
        ctx = GateContext.load(db, GateSettings(limits=own))  # before the sandbox opens the file
        with Sandbox.open(db, limits) as sandbox:
            runs = run_ids(sandbox)
            for spec in specs:
                try:
                    admission = admit(spec, ctx, sandbox)
                except ModelError as exc:
                    refused.append(Refusal(spec.name, "run", str(exc)))
                    continue
                gate_s += admission.gate_s
                if admission.values is None:
                    rejected[spec.name] = _reasons(admission.verdict)
                    continue
                share = coverage(admission.values, runs)
                stored.append(
                    write_feature(settings.store, spec, list(admission.values.items()), share)
                )
    computed = time.perf_counter() - started - gate_s
    return rejected, stored, refused, {"gates": round(gate_s, 3), "compute": round(computed, 3)}


def _on_spark(specs: Sequence[FeatureSpec], settings: MaterializeSettings) -> _Outcome:
    """The features gated in DuckDB (the warehouse, else a sample), the accepted computed on
    Spark."""
    started = time.perf_counter()
    with TemporaryDirectory(prefix="autofe-gates-") as scratch:
        gate_db = settings.db or gate_sample(
            settings.tables or Path(), Path(scratch) / "sample.duckdb", settings.gate_sample_runs
        )
        accepted, rejected = gate(specs, gate_db)
    gated = time.perf_counter()
    with materialize_on_spark(accepted, settings.tables or Path(), settings.spark) as found:
        stored = write_spark_features(found, accepted, settings.store)
    seconds = {"gates": round(gated - started, 3), "compute": round(time.perf_counter() - gated, 3)}
    return rejected, stored, found.refused, seconds


def gate(specs: Sequence[FeatureSpec], db: Path) -> tuple[list[FeatureSpec], dict[str, list[str]]]:
    """The features every gate accepts on the warehouse at ``db``, and the others' reasons."""
    ctx = GateContext.load(db)
    accepted, rejected = [], {}
    for spec in specs:
        verdict = run_gates(spec, ctx)
        if verdict.accepted:
            accepted.append(spec)
        else:
            rejected[spec.name] = _reasons(verdict)
    return accepted, rejected


def _reasons(verdict: Verdict) -> list[str]:
    return [f"{r.gate}/{r.code}: {r.message}" for r in verdict.reasons]
