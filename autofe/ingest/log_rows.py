"""One event log to warehouse rows: the unit of work ``spark_ingest`` ships to Spark executors.

It calls the same parser (:func:`~autofe.ingest.eventlog.parse.parse_or_issue`), the same content
hash and the same row builder (:func:`~autofe.ingest.event_logs.application_rows`) as the
DuckDB ingest, so both engines store the same rows; only who runs it and where the rows go
differ. Rows come out as tuples in the warehouse schema's column order, typed the way Spark's
schema check wants them (a whole number in a DOUBLE column is a float).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from autofe.errors import IngestError
from autofe.ingest.event_logs import Ready, application_rows, log_digest
from autofe.ingest.eventlog.files import LogSource
from autofe.ingest.eventlog.parse import parse_or_issue
from autofe.ingest.ingest import app_facts
from autofe.ingest.workspace.linking import AppLinker
from autofe.schema import IngestIssue
from autofe.warehouse.tables import table

TableRow = tuple[str, tuple[Any, ...]]
"""A warehouse table's name and one row of it, values in column order."""

_COERCE = {"DOUBLE": float, "BIGINT": int, "INTEGER": int, "BOOLEAN": bool}


def source_digest(source: LogSource) -> str | IngestIssue:
    """The log's content hash (its ledger identity), or why its bytes cannot be read."""
    try:
        return log_digest(source)
    except IngestError as exc:
        return IngestIssue(exc.path, exc.reason, exc.line, fatal=True)


def log_rows(source: LogSource, digest: str, link: AppLinker | None) -> list[TableRow]:
    """Every warehouse row one event log contributes, its ledger entry and its issues.

    Args:
        source: the log (one file or the parts of a rolled log).
        digest: its content hash, from :func:`source_digest`.
        link: the workspace's run linker, or None for a bare log (its own run).
    """
    result = parse_or_issue(source)
    if isinstance(result, IngestIssue):
        return issue_rows([result])
    try:
        linked = link(app_facts(result)) if link else None
        rows = application_rows(Ready(result, digest, linked))
        ledger = {
            "content_hash": digest,
            "path": result.path,
            "kind": "event_log",
            "ingested_at": now(),
        }
        out = [(name, ordered(name, row)) for name, batch in rows.items() for row in batch]
    except Exception as exc:  # this log's rows, not the executor's whole partition
        reason = f"cannot build warehouse rows: {type(exc).__name__}: {exc}"
        return issue_rows([IngestIssue(result.path, reason, fatal=True)])
    return [*out, ("ingested_files", ordered("ingested_files", ledger)), *issue_rows(result.issues)]


def issue_rows(issues: list[IngestIssue]) -> list[TableRow]:
    stamp = now()
    return [
        ("ingest_issues", ordered("ingest_issues", {**i.as_dict(), "ingested_at": stamp}))
        for i in issues
    ]


def ordered(name: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
    """``row`` as a tuple in the table's column order, numbers coerced to the column's type.

    >>> ordered("ingest_issues", {"path": "p", "line": 3, "reason": "r", "fatal": 1})[:4]
    ('p', 3, 'r', True)
    """
    return tuple(_coerce(c.type, row.get(c.name)) for c in table(name).columns)


def _coerce(sql_type: str, value: Any) -> Any:
    convert = _COERCE.get(sql_type)
    return value if value is None or convert is None else convert(value)


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
