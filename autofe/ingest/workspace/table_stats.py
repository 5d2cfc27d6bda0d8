"""Table stats: input table size snapshots (CSV with a header, or JSON) as ``table_stats`` rows."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autofe.errors import IngestError
from autofe.ingest.conform import conform_row
from autofe.ingest.eventlog.fields import shown
from autofe.ingest.workspace.api_values import SOURCE, Json, dict_of, epoch_ms, records, utc_time
from autofe.ingest.workspace.inputs import InputFile
from autofe.ingest.workspace.issues import new_issue, why
from autofe.schema import IngestIssue


def stats_rows(item: InputFile) -> tuple[list[Json], list[IngestIssue]]:
    """table_stats rows from a CSV (with header) or JSON list of snapshot objects."""
    if item.path.suffix == ".csv":
        numbered = list(item.content)
    else:
        numbered = [(None, r) for r in records(item.content, "table_stats", item.path)]
    rows: list[Json] = []
    issues: list[IngestIssue] = []
    for n, (line, record) in enumerate(numbered):
        where = f"line {line}" if line is not None else f"table_stats[{n}]"
        try:
            row, reasons = conform_row("table_stats", _stats_row(item.path, record, line))
        except IngestError as exc:
            issues.append(IngestIssue(exc.path, exc.reason, exc.line))
            continue
        except Exception as exc:  # one snapshot's surprise, not the file's
            issues.append(new_issue(item.path, f"{where} skipped: {why(exc)}", line=line))
            continue
        rows.append(row)
        issues += [new_issue(item.path, f"{where}: {r}", line=line) for r in reasons]
    return rows, issues


def _stats_row(path: Path, record: Any, line: int | None) -> Json:
    """One snapshot; ``as_of`` is ISO-8601 or epoch ms.

    Raises:
        IngestError: no table name, no or unreadable as_of, or a non-numeric count.
    """
    rec = dict_of(record)
    table = rec.get("table") or rec.get("table_name")
    as_of = _as_of(rec.get("as_of"))
    if not table or as_of is None:
        raise IngestError(str(path), "table stats need a table and an as_of time", line)
    row: Json = {"table_name": str(table), "as_of": as_of, "source": SOURCE}
    for column, keys in (("bytes", ("bytes",)), ("row_count", ("rows", "row_count"))):
        row[column] = _count(path, next((rec[k] for k in keys if k in rec), None), line)
    for column in ("files", "partitions"):
        row[column] = _count(path, rec.get(column), line)
    return row


def _as_of(value: Any) -> datetime | None:
    """
    >>> _as_of("2024-02-13T06:00:00Z"), _as_of(1707804000000)
    (datetime.datetime(2024, 2, 13, 6, 0), datetime.datetime(2024, 2, 13, 6, 0))
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return utc_time(epoch_ms(value))
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def _count(path: Path, value: Any, line: int | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError) as exc:
        raise IngestError(str(path), f"not a number: {shown(value)}", line) from exc
