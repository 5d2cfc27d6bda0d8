"""A run that has not been submitted yet, placed into a scratch copy of the warehouse.

Features are SQL over the warehouse's tables, computed per run from what was known before that
run's submit time. To compute them for a job that has not run, the job's spec (its submit time,
cluster, parameters and known-at-submit attributes) is inserted as a run with no outcome into an
in-memory copy of the tables the features read; the warehouse file itself is only read. The
copy is then locked down like any sandbox, so the features run exactly as they did in training.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from autofe.errors import ConfigError, WarehouseError, first_line
from autofe.sandbox.session import Sandbox
from autofe.warehouse.catalog import read_catalog

ALWAYS_COPIED = ("column_catalog", "jobs", "runs", "cluster_configs", "run_attributes")
"""The catalog, and the tables the pending run's own rows go into."""

CONFIG_COLUMNS = frozenset(
    {
        "node_type",
        "driver_node_type",
        "vcpu_per_node",
        "memory_gb_per_node",
        "num_workers",
        "autoscale_min",
        "autoscale_max",
        "spot_policy",
        "spark_version",
        "spark_conf",
        "hourly_price",
    }
)
JOB_COLUMNS = frozenset({"name", "task_type", "script_path", "script_text", "definition"})


class PendingRun(BaseModel):
    """What a user knows about a run before submitting it (the ``--job`` JSON of ``predict``).

    ``cluster`` describes a new configuration (``cluster_configs`` columns) when
    ``cluster_config_id`` names none already in the warehouse; ``job`` describes a job the
    warehouse has never seen (``jobs`` columns).
    """

    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(min_length=1)
    submit_time: datetime
    run_id: str = "pending"
    cluster_config_id: str | None = None
    cluster: dict[str, Any] | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    attributes: dict[str, float | str] = Field(default_factory=dict)
    """Known-at-submit run attributes (``run_attributes``), e.g. ``tag.lab_scale_factor``."""
    script_text: str | None = None
    job: dict[str, Any] | None = None

    @field_validator("submit_time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        """The warehouse keeps naive UTC timestamps."""
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value

    @field_validator("cluster")
    @classmethod
    def _cluster_columns(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        unknown = sorted(set(value or {}) - CONFIG_COLUMNS)
        if unknown:
            raise ValueError(f"unknown cluster fields {unknown}; known: {sorted(CONFIG_COLUMNS)}")
        return value

    @field_validator("job")
    @classmethod
    def _job_columns(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        unknown = sorted(set(value or {}) - JOB_COLUMNS)
        if unknown:
            raise ValueError(f"unknown job fields {unknown}; known: {sorted(JOB_COLUMNS)}")
        return value

    @property
    def config_id(self) -> str | None:
        if self.cluster is not None:
            return self.cluster_config_id or f"{self.run_id}-config"
        return self.cluster_config_id


def read_pending(path: Path) -> PendingRun:
    """The pending run described by the JSON file at ``path``.

    Raises:
        ConfigError: the file is unreadable, not JSON, or not a valid pending run.
    """
    try:
        return PendingRun.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--job {path}: cannot read it ({exc.strerror})") from exc
    except ValidationError as exc:
        problems = "; ".join(_problem(e["loc"], e["msg"]) for e in exc.errors())
        raise ConfigError(f"--job {path}: {problems}") from exc


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    return f"{'.'.join(map(str, loc)) or 'the document'}: {message}"


def pending_sandbox(db: Path, pending: PendingRun, tables: Iterable[str]) -> Sandbox:
    """A locked-down in-memory copy of ``tables`` (plus the run tables) holding ``pending``.

    Raises:
        WarehouseError: the warehouse cannot be read.
        ConfigError: the pending run contradicts the warehouse (its run id exists, its job or
            configuration is unknown and not described).
    """
    con = duckdb.connect(":memory:")
    try:
        _copy(con, Path(db), {*ALWAYS_COPIED, *tables})
        _insert(con, pending)
        return Sandbox.wrap(con, read_catalog(con))
    except BaseException:
        con.close()
        raise


def _copy(con: duckdb.DuckDBPyConnection, db: Path, tables: set[str]) -> None:
    if not db.is_file():
        raise WarehouseError(f"warehouse {db} does not exist: run `autofe ingest` first")
    try:
        con.execute("ATTACH ? AS warehouse (READ_ONLY)", [str(db)])
        present = {r[0] for r in con.execute("SHOW TABLES FROM warehouse").fetchall()}
        for name in sorted(tables & present):
            con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM warehouse."{name}"')
        con.execute("DETACH warehouse")
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot read warehouse {db}: {first_line(exc)}") from exc
    missing = set(ALWAYS_COPIED) - present
    if missing:
        raise WarehouseError(f"{db} is not an autofe warehouse (no {', '.join(sorted(missing))})")


def _insert(con: duckdb.DuckDBPyConnection, pending: PendingRun) -> None:
    if _exists(con, "runs", "run_id", pending.run_id):
        raise ConfigError(f"run id {pending.run_id!r} is already in the warehouse: pick another")
    _insert_job(con, pending)
    _insert_config(con, pending)
    row = {
        "run_id": pending.run_id,
        "job_id": pending.job_id,
        "submit_time": pending.submit_time,
        "cluster_config_id": pending.config_id,
        "parameters": json.dumps(pending.parameters),
        "script_text": pending.script_text,
        "source": "pending",
    }
    _insert_row(con, "runs", row)
    for name, value in pending.attributes.items():
        number = isinstance(value, int | float)
        attribute = {
            "run_id": pending.run_id,
            "name": name,
            "value": float(value) if number else None,
            "value_text": None if number else str(value),
            "availability": "known_at_submit",
        }
        _insert_row(con, "run_attributes", attribute)


def _insert_job(con: duckdb.DuckDBPyConnection, pending: PendingRun) -> None:
    if _exists(con, "jobs", "job_id", pending.job_id):
        if pending.job is not None:
            raise ConfigError(f"job {pending.job_id!r} exists; drop the 'job' description")
        return
    if pending.job is None:
        raise ConfigError(
            f"job {pending.job_id!r} is not in the warehouse: describe it under 'job' "
            f"({', '.join(sorted(JOB_COLUMNS))})"
        )
    definition = pending.job.get("definition")
    job = {**pending.job, "definition": None if definition is None else json.dumps(definition)}
    _insert_row(con, "jobs", {"job_id": pending.job_id, "source": "pending", **job})


def _insert_config(con: duckdb.DuckDBPyConnection, pending: PendingRun) -> None:
    config_id = pending.config_id
    if pending.cluster is None:
        if config_id is not None and not _exists(con, "cluster_configs", "config_id", config_id):
            raise ConfigError(
                f"cluster_config_id {config_id!r} is not in the warehouse: describe the "
                "configuration under 'cluster'"
            )
        return
    if _exists(con, "cluster_configs", "config_id", config_id):
        raise ConfigError(f"cluster_config_id {config_id!r} exists; drop 'cluster' or rename it")
    conf = pending.cluster.get("spark_conf")
    cluster = {**pending.cluster, "spark_conf": None if conf is None else json.dumps(conf)}
    _insert_row(con, "cluster_configs", {"config_id": config_id, "source": "pending", **cluster})


def _exists(con: duckdb.DuckDBPyConnection, table: str, column: str, value: str | None) -> bool:
    if value is None:
        return False
    found = con.execute(f'SELECT 1 FROM "{table}" WHERE "{column}" = ? LIMIT 1', [value])
    return found.fetchone() is not None


def _insert_row(con: duckdb.DuckDBPyConnection, table: str, row: Mapping[str, Any]) -> None:
    """Insert by column name; a value DuckDB cannot cast is the user's error, named."""
    names = ", ".join(f'"{n}"' for n in row)
    marks = ", ".join("?" for _ in row)
    try:
        con.execute(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', list(row.values()))
    except duckdb.Error as exc:
        raise ConfigError(f"pending run: a {table} value does not fit: {first_line(exc)}") from exc
