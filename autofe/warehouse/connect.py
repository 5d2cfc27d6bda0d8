"""Open (and create) the DuckDB warehouse file with its schema and column catalog."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import duckdb

from autofe.errors import WarehouseError, first_line
from autofe.special_file import special_file
from autofe.warehouse.tables import TABLES, Table

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

BULK_MEMORY_LIMIT = "4GB"
"""DuckDB's buffer limit for a bulk copy between warehouses (a replica, a sample): its default,
80 % of RAM, lets the blocks read from a million-run warehouse stay cached until the process
holds 8 to 9.5 GiB; what does not fit spills to the database's temporary folder instead."""


def create_table_sql(t: Table) -> str:
    """DDL for one table.

    >>> "PRIMARY KEY (run_id)" in create_table_sql(__import__("autofe.warehouse.tables",
    ...     fromlist=["RUNS"]).RUNS)
    True
    """
    cols = [f'"{c.name}" {c.type}' for c in t.columns]
    if t.primary_key:
        cols.append(f"PRIMARY KEY ({', '.join(t.primary_key)})")
    return f"CREATE TABLE IF NOT EXISTS {t.name} ({', '.join(cols)})"


def schema_fingerprint() -> str:
    """A short hash of every table, column, type and availability tag.

    Model artifacts store it so a model trained against one schema refuses another.
    """
    h = hashlib.sha256()
    for t in TABLES:
        for c in t.columns:
            h.update(f"{t.name}.{c.name}:{c.type}:{c.availability}:{c.ordered_by}\n".encode())
    return h.hexdigest()[:16]


def _write_catalog(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE OR REPLACE TABLE column_catalog (table_name VARCHAR, column_name VARCHAR, "
        "data_type VARCHAR, availability VARCHAR, ordered_by VARCHAR, description VARCHAR, "
        "PRIMARY KEY (table_name, column_name))"
    )
    rows = [
        (t.name, c.name, c.type, str(c.availability), c.ordered_by, c.doc)
        for t in TABLES
        for c in t.columns
    ]
    con.executemany("INSERT INTO column_catalog VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.execute(
        "CREATE OR REPLACE TABLE warehouse_meta AS SELECT ? AS schema_version, ? AS fingerprint",
        [SCHEMA_VERSION, schema_fingerprint()],
    )


def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'warehouse_meta'"
    ).fetchall()
    if found and found[0][0]:
        rows = con.execute("SELECT fingerprint FROM warehouse_meta").fetchall()
        if rows and rows[0][0] == schema_fingerprint():
            return
    con.execute("BEGIN")
    for t in TABLES:
        con.execute(create_table_sql(t))
    _write_catalog(con)
    con.execute("COMMIT")


def open_warehouse(path: Path | str, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse at ``path``, creating the file and schema on first use.

    Raises:
        WarehouseError: the file is not a DuckDB database, is locked by another process, or
            (read-only) does not exist.
    """
    p = Path(path)
    refused = special_file(p)
    if refused is not None:
        raise WarehouseError(f"warehouse {p} {refused}")
    if read_only and not p.exists():
        raise WarehouseError(f"warehouse {p} does not exist: run `autofe ingest` first")
    try:
        if not read_only:
            p.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(p), read_only=read_only)
    except OSError as exc:
        raise WarehouseError(f"cannot open warehouse {p}: {exc.strerror or exc}") from exc
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot open warehouse {p}: {first_line(exc)}") from exc
    if not read_only:
        _ensure_schema(con)
    return con
