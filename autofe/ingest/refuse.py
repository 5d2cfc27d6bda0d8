"""Refuse an input: its issues go in the report and the issues table, never in the ledger."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from autofe.schema import IngestIssue, IngestReport
from autofe.warehouse.ledger import record_issues


def refuse(
    con: duckdb.DuckDBPyConnection, report: IngestReport, issues: Sequence[IngestIssue]
) -> None:
    """Report inputs that are not stored: with no ledger entry, the next ingest tries them again.

    Raises:
        WarehouseError: the warehouse cannot record the issues (it is unusable).
    """
    report.issues.extend(issues)
    record_issues(con, issues)
