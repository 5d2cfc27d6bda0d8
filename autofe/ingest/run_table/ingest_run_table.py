"""``autofe ingest`` of a run table: each table file the mapping names, one transaction each."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import duckdb

from autofe.errors import IngestError, WarehouseError
from autofe.ingest.refuse import refuse
from autofe.ingest.run_table.mapping import RunTableMapping, load_mapping, plan_attributes
from autofe.ingest.run_table.run_rows import TableContext, build_batch
from autofe.ingest.run_table.store import write_batch
from autofe.ingest.run_table.table_files import first_data_line, read_table, resolve_tables
from autofe.schema import IngestIssue, IngestReport
from autofe.special_file import special_file
from autofe.warehouse.ledger import already_ingested, hash_files, record_issues

log = logging.getLogger(__name__)


def ingest_run_table(
    con: duckdb.DuckDBPyConnection,
    mapping_path: Path,
    report: IngestReport,
    table_path: Path | None = None,
) -> None:
    """Ingest the run table(s) a mapping names into runs, jobs, cluster_configs, run_attributes.

    Each table file is hashed together with the mapping: a file ingested before with the same
    mapping is skipped (``report.files_unchanged``); a changed file or mapping upserts its runs.
    Each file is one transaction, so a failure keeps nothing of that file. Rows whose label is
    missing or not a number, or whose status is in ``status.skip``, are left out and reported in
    ``report.issues`` (and the ``ingest_issues`` table) with their line.

    Args:
        con: An open warehouse (``open_warehouse``), not inside a transaction.
        mapping_path: The TOML mapping file.
        report: Counters and issues are added to it; the caller sets ``seconds``.
        table_path: Ingest this file instead of the mapping's ``files``.

    Raises:
        ConfigError: the mapping is invalid, names a missing file or column, or leaves a column
            unassigned.

    A table file that cannot be read, whose every row is refused, or whose rows the warehouse
    refuses is a fatal issue in ``report.issues`` (its rows rolled back); the next file goes on.
    """
    mapping = load_mapping(mapping_path)
    for path in resolve_tables(mapping, table_path):
        try:
            _ingest_table(con, mapping, path, report)
        except (IngestError, WarehouseError) as exc:  # this table is skipped, not the batch
            refuse(con, report, [_as_issue(exc, path)])


def _as_issue(exc: IngestError | WarehouseError, path: Path) -> IngestIssue:
    if isinstance(exc, IngestError):
        return IngestIssue(exc.path, exc.reason, exc.line, fatal=True)
    return IngestIssue(str(path), str(exc), fatal=True)


def _ingest_table(
    con: duckdb.DuckDBPyConnection, mapping: RunTableMapping, path: Path, report: IngestReport
) -> None:
    refused = special_file(path)
    if refused:
        raise IngestError(str(path), refused)
    digest = hash_files([mapping.path, path])
    if already_ingested(con, digest):
        report.files_unchanged += 1
        return
    columns, rows = read_table(mapping.spec, path)
    plan = plan_attributes(mapping, path, columns)
    ctx = TableContext(mapping, path, plan, first_data_line(mapping.spec, path))
    batch = build_batch(ctx, columns, rows)
    if not batch.runs:
        record_issues(con, batch.issues)
        report.issues.extend(batch.issues)
        raise IngestError(str(path), _nothing_usable(len(rows), batch.issues))
    report.jobs += write_batch(con, batch, digest, path)
    report.runs += len(batch.runs)
    report.files_ingested += 1
    report.issues.extend(batch.issues)
    log.info("%s: %d runs, %d rows skipped", path, len(batch.runs), len(batch.issues))


def _nothing_usable(rows: int, issues: Sequence[IngestIssue]) -> str:
    """Why a table gave no run: it is empty, or every row was refused (the first reason shown).

    >>> _nothing_usable(0, [])
    'no run ingested: the table has no data rows'
    """
    if not rows:
        return "no run ingested: the table has no data rows"
    first = issues[0]
    return (
        f"no run ingested: all {rows} rows were refused (first, line {first.line}: {first.reason})"
    )
