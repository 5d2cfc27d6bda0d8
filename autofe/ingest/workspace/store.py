"""Write a batch of workspace files in one transaction: rows, issues and ledger entries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from autofe.errors import WarehouseError
from autofe.ingest.workspace.api_values import Json
from autofe.ingest.workspace.file_output import Output
from autofe.ingest.workspace.inputs import InputFile
from autofe.ingest.workspace.runs import ATTRIBUTES, TAG_PREFIX
from autofe.schema import IngestIssue
from autofe.warehouse.ledger import record_ingested_many, record_issues
from autofe.warehouse.tables import table
from autofe.warehouse.write import insert_rows, transaction

LEDGER_KIND = "workspace_json"


@dataclass(frozen=True)
class Pending:
    """A changed file's rows, waiting for its batch's transaction."""

    item: InputFile
    out: Output
    key: str


def store_batch(
    con: duckdb.DuckDBPyConnection, batch: Sequence[Pending]
) -> tuple[list[Pending], list[IngestIssue]]:
    """Write a batch of files in one transaction, or file by file when the batch is refused.

    Each run and job is owned by one file, and a later file's row replaces an earlier one's
    with the same key, so one upsert per table gives the rows file-by-file writes give.

    Returns:
        The files stored, and one fatal issue per file the warehouse refused (nothing of it
        is kept, nor its ledger entry: fixed, it is ingested by the next run).
    """
    try:
        _commit(con, batch, f"{len(batch)} workspace files")
        return list(batch), []
    except WarehouseError:
        pass
    stored, refused = [], []
    for p in batch:
        try:
            _commit(con, [p], str(p.item.path))
            stored.append(p)
        except WarehouseError as exc:
            refused.append(IngestIssue(str(p.item.path), str(exc), fatal=True))
    return stored, refused


def _commit(con: duckdb.DuckDBPyConnection, batch: Sequence[Pending], what: str) -> None:
    """The rows, issues and ledger entries of ``batch`` in one transaction (rolled back whole)."""
    with transaction(con, what):
        _write(con, batch)
        record_ingested_many(con, [(p.key, p.item.path) for p in batch], LEDGER_KIND)


_WRITE_ORDER = ("cluster_configs", "jobs", "runs", "run_attributes", "table_stats")


def _write(con: duckdb.DuckDBPyConnection, batch: Sequence[Pending]) -> None:
    """The rows and issues of ``batch``, inside the caller's transaction."""
    run_ids = [row["run_id"] for p in batch for row in p.out.rows.get("runs", [])]
    if run_ids:
        con.execute(
            f"DELETE FROM run_attributes WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
            f"AND (name IN {ATTRIBUTES!r} OR starts_with(name, '{TAG_PREFIX}'))",
            [run_ids],
        )
    for name in _WRITE_ORDER:
        rows = [row for p in batch for row in p.out.rows.get(name, [])]
        insert_rows(con, name, _last_per_key(name, rows), replace=True)
    record_issues(con, [issue for p in batch for issue in p.out.issues])


def _last_per_key(name: str, rows: Sequence[Json]) -> list[Json]:
    """The last row per primary key, as successive upserts would leave it.

    One file may define the same cluster config twice, and a batch holds many files.
    """
    key = table(name).primary_key
    return list({tuple(r.get(k) for k in key): r for r in rows}.values())
