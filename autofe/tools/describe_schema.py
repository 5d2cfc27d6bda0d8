"""Describe the warehouse's tables and columns, with when each column becomes known."""

from __future__ import annotations

from pydantic import BaseModel, Field

from autofe.errors import ConfigError
from autofe.warehouse.catalog import ColumnInfo, WarehouseCatalog
from autofe.warehouse.tables import TABLES, Table

AVAILABILITY_RULES = (
    "Every column is tagged known_at_submit (known before the run is submitted; usable to "
    "describe the run itself) or post_execution (known only after a run ended; usable only "
    "from other runs whose ordered_by timestamp is strictly before the target run's "
    "runs.submit_time). ordered_by names the timestamp that says when a row became known; a "
    "table_stats snapshot is usable for a run only if its as_of is at or before the run's "
    "submission. run_attributes carries a per-row tag in its availability column. The label is "
    "runs.duration_s: a feature must never read it, or any post-execution value, of the run it "
    "describes."
)
"""The rules of docs/schema.md in one paragraph, for a model writing features."""


class ColumnDescription(BaseModel):
    """One column: its type, when it becomes known, and what it means."""

    name: str
    type: str
    availability: str
    ordered_by: str
    description: str


class TableDescription(BaseModel):
    """One table of the warehouse."""

    name: str
    description: str
    primary_key: list[str]
    columns: list[ColumnDescription]


class SchemaDescription(BaseModel):
    """The tables asked for, and the availability rules every feature must obey."""

    tables: list[TableDescription]
    availability_rules: str = Field(default=AVAILABILITY_RULES)


def describe_schema(catalog: WarehouseCatalog, table: str | None = None) -> SchemaDescription:
    """The warehouse's queryable tables (or one of them) with every column's availability.

    Args:
        catalog: the warehouse's column catalog (what it actually holds).
        table: one table's name; None for all of them.

    Raises:
        ConfigError: ``table`` is not a queryable table; the message lists those that are.

    >>> from autofe.warehouse.catalog import code_catalog
    >>> runs = describe_schema(code_catalog(), "runs").tables[0]
    >>> [(c.name, c.availability) for c in runs.columns if c.name == "duration_s"]
    [('duration_s', 'post_execution')]
    """
    names = _table_names(catalog)
    if table is not None:
        wanted = table.strip().lower()
        if wanted not in names:
            raise ConfigError(f"no table {table!r} in the warehouse; tables: {', '.join(names)}")
        names = [wanted]
    return SchemaDescription(tables=[_describe(catalog, name) for name in names])


def _table_names(catalog: WarehouseCatalog) -> list[str]:
    """The catalog's tables, in the order the code declares them (unknown ones last)."""
    present = catalog.tables()
    declared = [t.name for t in TABLES if t.name in present]
    return declared + sorted(present - set(declared))


def _describe(catalog: WarehouseCatalog, name: str) -> TableDescription:
    declared = next((t for t in TABLES if t.name == name), None)
    infos = [info for (t, _), info in catalog.columns.items() if t == name]
    order = [c.name for c in declared.columns] if declared else []
    infos.sort(key=lambda i: (order.index(i.column) if i.column in order else len(order), i.column))
    return TableDescription(
        name=name,
        description=declared.doc if declared else "",
        primary_key=list(declared.primary_key) if declared else [],
        columns=[_column(info, declared) for info in infos],
    )


def _column(info: ColumnInfo, declared: Table | None) -> ColumnDescription:
    doc = next((c.doc for c in declared.columns if c.name == info.column), "") if declared else ""
    return ColumnDescription(
        name=info.column,
        type=info.type,
        availability=str(info.availability),
        ordered_by=info.ordered_by,
        description=doc,
    )
