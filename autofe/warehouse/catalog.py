"""Read the warehouse's column catalog: types for SQL qualification, tags for the gates."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import duckdb

from autofe.schema import Availability
from autofe.warehouse.tables import TABLES


@dataclass(frozen=True)
class ColumnInfo:
    """Type and availability of one warehouse column."""

    table: str
    column: str
    type: str
    availability: Availability
    ordered_by: str


@dataclass(frozen=True)
class WarehouseCatalog:
    """Every queryable table's columns, with their availability tags."""

    columns: dict[tuple[str, str], ColumnInfo]

    @property
    def schema(self) -> dict[str, dict[str, str]]:
        """``{table: {column: type}}`` in the form sqlglot's optimizer takes."""
        out: dict[str, dict[str, str]] = {}
        for (t, c), info in self.columns.items():
            out.setdefault(t, {})[c] = info.type
        return out

    def tables(self) -> frozenset[str]:
        return self._tables

    @cached_property
    def _tables(self) -> frozenset[str]:
        """Computed once: the guards ask for every table a query names, and a dynamic leakage
        check's world catalog holds thirteen copies of the warehouse's columns."""
        return frozenset(t for t, _ in self.columns)

    def info(self, table: str, column: str) -> ColumnInfo | None:
        return self.columns.get((table.lower(), column.lower()))

    def is_post_execution(self, table: str, column: str) -> bool:
        found = self.info(table, column)
        return found is not None and found.availability is Availability.POST_EXECUTION


# Bookkeeping tables are not telemetry: features and agents never read them.
NOT_QUERYABLE = frozenset({"ingested_files", "ingest_issues"})


def read_catalog(con: duckdb.DuckDBPyConnection) -> WarehouseCatalog:
    """The catalog as stored in the warehouse (``column_catalog``), bookkeeping excluded."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type, availability, ordered_by FROM column_catalog"
    ).fetchall()
    return WarehouseCatalog(
        {
            (t, c): ColumnInfo(t, c, ty, Availability(a), o)
            for t, c, ty, a, o in rows
            if t not in NOT_QUERYABLE
        }
    )


def code_catalog() -> WarehouseCatalog:
    """The catalog as declared in code (for tools that have no warehouse at hand)."""
    return WarehouseCatalog(
        {
            (t.name, c.name): ColumnInfo(t.name, c.name, c.type, c.availability, c.ordered_by)
            for t in TABLES
            if t.name not in NOT_QUERYABLE
            for c in t.columns
        }
    )
