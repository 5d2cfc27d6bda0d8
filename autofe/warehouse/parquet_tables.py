"""The warehouse as Parquet datasets: their Spark schema, their manifest, reading them back.

``spark_ingest`` writes one Parquet dataset per warehouse table under one folder, with a
manifest naming the schema fingerprint, so a later materialisation (or a DuckDB gate sample)
can tell a table folder from some other folder, and one written for another schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from autofe.errors import ConfigError
from autofe.warehouse.connect import schema_fingerprint
from autofe.warehouse.tables import Table

MANIFEST = "_autofe_tables.json"

SPARK_TYPES = {
    "VARCHAR": "STRING",
    "JSON": "STRING",
    "BIGINT": "BIGINT",
    "INTEGER": "INT",
    "DOUBLE": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    # the warehouse's timestamps are naive UTC: Spark's TIMESTAMP_NTZ, not its local-time one
    "TIMESTAMP": "TIMESTAMP_NTZ",
    "INTEGER[]": "ARRAY<INT>",
}


def spark_schema(t: Table) -> str:
    """A table's columns as a Spark DDL schema string.

    >>> from autofe.warehouse.tables import table
    >>> spark_schema(table("ingest_issues"))
    '`path` STRING, `line` BIGINT, `reason` STRING, `fatal` BOOLEAN, `ingested_at` TIMESTAMP_NTZ'
    """
    return ", ".join(f"`{c.name}` {SPARK_TYPES[c.type]}" for c in t.columns)


def duckdb_select(t: Table) -> str:
    """A DuckDB query reading a table with Arrow types that match :func:`spark_schema`."""
    cols = [
        f'CAST("{c.name}" AS VARCHAR)' if c.type == "JSON" else f'"{c.name}"' for c in t.columns
    ]
    names = [f'"{c.name}"' for c in t.columns]
    return (
        f"SELECT {', '.join(f'{e} AS {n}' for e, n in zip(cols, names, strict=True))} FROM {t.name}"
    )


@dataclass(frozen=True)
class TableManifest:
    """What a table folder holds: rows per table, for which schema, written when."""

    rows: dict[str, int]
    fingerprint: str
    written_at: str


def write_manifest(folder: Path, rows: dict[str, int]) -> TableManifest:
    manifest = TableManifest(rows, schema_fingerprint(), datetime.now(UTC).isoformat())
    doc = {
        "rows": rows,
        "schema_fingerprint": manifest.fingerprint,
        "written_at": manifest.written_at,
    }
    (folder / MANIFEST).write_text(json.dumps(doc, indent=2) + "\n")
    return manifest


def read_manifest(folder: Path) -> TableManifest:
    """The manifest of a table folder written by ``spark_ingest``.

    Raises:
        ConfigError: no manifest (not such a folder) or one for another warehouse schema.
    """
    path = folder / MANIFEST
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{folder}: no {MANIFEST}: not a table folder written by `autofe ingest --engine spark`"
        ) from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable table manifest: {exc}") from exc
    if doc.get("schema_fingerprint") != schema_fingerprint():
        raise ConfigError(
            f"{folder}: written for warehouse schema {doc.get('schema_fingerprint')}, this autofe "
            f"has {schema_fingerprint()}: ingest again"
        )
    return TableManifest(
        dict(doc.get("rows", {})), doc["schema_fingerprint"], str(doc.get("written_at"))
    )
