"""Page through jobs, runs, cluster configurations and table snapshots, with typed filters.

The SQL is built with sqlglot's expression builders, so a filter value is always a quoted
literal and never SQL, and it runs through the sandbox like every other query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel
from sqlglot import exp

from autofe.errors import ConfigError
from autofe.sandbox.session import Sandbox
from autofe.tools.run_readonly_sql import json_rows
from autofe.warehouse.tables import table

Entity = Literal["jobs", "runs", "cluster_configs", "table_stats"]
MAX_LIMIT = 500
DIALECT = "duckdb"


class MetadataPage(BaseModel):
    """One page of an entity's rows, and where the next page starts (None: this is the last)."""

    entity: str
    rows: list[dict[str, Any]]
    total: int
    offset: int
    next_offset: int | None


Filter = Callable[[Any], exp.Condition]


def _eq(column: str) -> Filter:
    return lambda value: exp.column(column, "t").eq(exp.Literal.string(value))


def _configs_of_runs(column: str) -> Filter:
    """Configurations some matching run was submitted with."""

    def build(value: Any) -> exp.Condition:
        runs = (
            exp.select("r.cluster_config_id")
            .from_("runs AS r")
            .where(exp.column(column, "r").eq(exp.Literal.string(value)))
        )
        return exp.column("config_id", "t").isin(query=runs)

    return build


def _timestamp(value: datetime) -> exp.Expr:
    """A TIMESTAMP literal; an aware datetime is converted to UTC (the warehouse's zone)."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), exp.DataType.build("TIMESTAMP"))


def _at_or_after(column: str) -> Filter:
    return lambda value: exp.column(column, "t") >= _timestamp(value)


def _before(column: str) -> Filter:
    return lambda value: exp.column(column, "t") < _timestamp(value)


def _status(value: Any) -> exp.Condition:
    return exp.Upper(this=exp.column("status", "t")).eq(exp.Literal.string(str(value).upper()))


@dataclass(frozen=True)
class EntitySpec:
    """How one entity is read: its table, its stable order, the filters it takes."""

    table: str
    order_by: tuple[str, ...]
    filters: dict[str, Filter]


ENTITIES: dict[str, EntitySpec] = {
    "jobs": EntitySpec("jobs", ("job_id",), {"job_id": _eq("job_id")}),
    "runs": EntitySpec(
        "runs",
        ("submit_time", "run_id"),
        {
            "job_id": _eq("job_id"),
            "run_id": _eq("run_id"),
            "status": _status,
            "submitted_after": _at_or_after("submit_time"),
            "submitted_before": _before("submit_time"),
        },
    ),
    "cluster_configs": EntitySpec(
        "cluster_configs",
        ("config_id",),
        {"job_id": _configs_of_runs("job_id"), "run_id": _configs_of_runs("run_id")},
    ),
    "table_stats": EntitySpec(
        "table_stats",
        ("table_name", "as_of"),
        # as_of is not a plain filter: it picks each table's latest snapshot (see _select)
        {
            "table_name": _eq("table_name"),
            "as_of": lambda value: exp.column("as_of", "t") <= _timestamp(value),
        },
    ),
}

CONFIG_FIELDS = tuple(
    c.name for c in table("cluster_configs").columns if c.name not in ("config_id", "source")
)
"""Cluster configuration columns a run's row carries (joined on its cluster_config_id)."""


def query_metadata(
    sandbox: Sandbox,
    entity: Entity,
    *,
    job_id: str | None = None,
    run_id: str | None = None,
    status: str | None = None,
    submitted_after: datetime | None = None,
    submitted_before: datetime | None = None,
    table_name: str | None = None,
    as_of: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> MetadataPage:
    """One page of ``entity``'s rows matching every filter given, in a stable order.

    Filters by entity: ``jobs`` job_id; ``runs`` job_id, run_id, status (any case),
    submitted_after (at or after), submitted_before (strictly before), each run with its
    cluster configuration's fields; ``cluster_configs`` job_id, run_id (configurations those
    runs used); ``table_stats`` table_name, as_of (each table's latest snapshot taken at or
    before it: what was known then). Strings longer than 2 000 characters are cut.

    Raises:
        ConfigError: an unknown entity, a filter the entity does not take, ``limit`` outside
            1..500 or a negative ``offset``.
        SandboxViolation: the sandbox stopped the query (timeout, memory).
        QueryError: the warehouse lacks a table or column the query reads.

    >>> import duckdb
    >>> from autofe.warehouse.catalog import code_catalog
    >>> from autofe.warehouse.connect import create_table_sql
    >>> con = duckdb.connect()
    >>> _ = con.execute(create_table_sql(table("jobs")))
    >>> _ = con.execute("INSERT INTO jobs (job_id, name) VALUES ('7', 'nightly')")
    >>> with Sandbox.wrap(con, code_catalog()) as box:
    ...     page = query_metadata(box, "jobs", job_id="7")
    >>> page.rows[0]["name"], page.total, page.next_offset
    ('nightly', 1, None)
    """
    spec = _entity(entity)
    given = {
        "job_id": job_id,
        "run_id": run_id,
        "status": status,
        "submitted_after": submitted_after,
        "submitted_before": submitted_before,
        "table_name": table_name,
        "as_of": as_of,
    }
    filters = _conditions(entity, spec, {k: v for k, v in given.items() if v is not None})
    _check_page(limit, offset)
    select = _select(spec, filters, latest=as_of is not None)
    return _fetch_page(sandbox, entity, spec, select, limit, offset)


def _fetch_page(
    sandbox: Sandbox, entity: Entity, spec: EntitySpec, select: exp.Select, limit: int, offset: int
) -> MetadataPage:
    """Count every match, then fetch one page of them in the entity's stable order."""
    total = _count(sandbox, select)
    page = select.order_by(*(exp.column(c, "t") for c in spec.order_by))
    page = page.limit(limit).offset(offset)
    result = sandbox.query(page.sql(dialect=DIALECT), limit)
    rows, _ = json_rows(result.types, result.rows)
    end = offset + len(rows)
    return MetadataPage(
        entity=entity,
        rows=[dict(zip(result.columns, row, strict=True)) for row in rows],
        total=total,
        offset=offset,
        next_offset=end if end < total else None,
    )


def _entity(entity: str) -> EntitySpec:
    found = ENTITIES.get(entity)
    if found is None:
        raise ConfigError(f"unknown entity {entity!r}; choose one of {', '.join(ENTITIES)}")
    return found


def _conditions(entity: str, spec: EntitySpec, given: dict[str, Any]) -> list[exp.Condition]:
    wrong = sorted(set(given) - set(spec.filters))
    if wrong:
        raise ConfigError(
            f"{entity} cannot be filtered by {', '.join(wrong)}; "
            f"its filters are {', '.join(spec.filters)}"
        )
    return [spec.filters[name](value) for name, value in given.items()]


def _check_page(limit: int, offset: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    if offset < 0:
        raise ConfigError(f"offset must be 0 or more, not {offset}")


def _select(spec: EntitySpec, filters: list[exp.Condition], *, latest: bool) -> exp.Select:
    columns = [exp.column(c.name, "t") for c in table(spec.table).columns]
    select = exp.select(*columns).from_(exp.to_table(spec.table).as_("t"))
    if spec.table == "runs":
        select = select.select(*(exp.column(c, "c") for c in CONFIG_FIELDS)).join(
            exp.to_table("cluster_configs").as_("c"),
            on=exp.column("config_id", "c").eq(exp.column("cluster_config_id", "t")),
            join_type="left",
        )
    if filters:
        select = select.where(exp.and_(*filters))
    if latest:
        newest_first = exp.Window(
            this=exp.RowNumber(),
            partition_by=[exp.column("table_name", "t")],
            order=exp.Order(expressions=[exp.column("as_of", "t").desc()]),
        )
        select = select.qualify(newest_first.eq(1))
    return select


def _count(sandbox: Sandbox, select: exp.Select) -> int:
    counted = exp.select(exp.Count(this=exp.Star())).from_(select.subquery("page"))
    result = sandbox.query(counted.sql(dialect=DIALECT), 1)
    return int(result.rows[0][0]) if result.rows else 0
