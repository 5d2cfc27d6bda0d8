"""What one workspace file contributes: the rows of the records it owns, and its issues."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autofe.errors import IngestError
from autofe.ingest.conform import conform_row
from autofe.ingest.eventlog.fields import shown
from autofe.ingest.workspace.api_values import Json, id_text
from autofe.ingest.workspace.catalog import ID_KEYS, Catalog
from autofe.ingest.workspace.clusters import config_row
from autofe.ingest.workspace.inputs import InputFile
from autofe.ingest.workspace.issues import new_issue, why
from autofe.ingest.workspace.jobs import job_rows
from autofe.ingest.workspace.runs import run_rows
from autofe.ingest.workspace.table_stats import stats_rows
from autofe.schema import IngestIssue
from autofe.warehouse.ledger import hash_bytes


@dataclass
class Output:
    """What one input file contributes: rows per table and issues."""

    rows: dict[str, list[Json]] = field(default_factory=dict)
    issues: list[IngestIssue] = field(default_factory=list)

    def add(self, rows: Mapping[str, Sequence[Json]]) -> None:
        for name, batch in rows.items():
            self.rows.setdefault(name, []).extend(batch)


def file_output(item: InputFile, cat: Catalog) -> Output:
    out = Output(issues=[item.problem] if item.problem else [])
    out.issues += cat.issues.get(item.path, [])
    if item.problem is not None:
        return out
    try:
        _fill(out, item, cat)
    except IngestError as exc:
        out.issues.append(IngestIssue(exc.path, exc.reason, exc.line))
    return out


def _fill(out: Output, item: InputFile, cat: Catalog) -> None:
    """Rows of the objects this file owns (the file whose version of them won the merge)."""
    if item.kind in ID_KEYS:
        for record in cat.owned(item.kind, item.path):
            _add_record(out, item, record.data, cat)
    elif item.kind == "table_stats":
        stats, issues = stats_rows(item)
        out.add({"table_stats": stats})
        out.issues += issues


_RECORD_NAMES = {"jobs": "job", "runs": "run", "clusters": "cluster"}


def _add_record(out: Output, item: InputFile, data: Json, cat: Catalog) -> None:
    """One job, run or cluster's rows, or an issue naming it: the file's other records go on.

    A value its column cannot hold is stored as NULL, with an issue naming the record and
    the column.
    """
    key = id_text(data.get(ID_KEYS[item.kind])) or ""
    name = f"{_RECORD_NAMES[item.kind]} {key if len(key) <= 40 else shown(key)}"
    try:
        rows, issues = _derive(item.kind, data, cat, item.path)
        fixed: dict[str, list[Json]] = {}
        for table_name, batch in rows.items():
            for row in batch:
                good, reasons = conform_row(table_name, row)
                fixed.setdefault(table_name, []).append(good)
                issues += [new_issue(item.path, f"{name}: {r}") for r in reasons]
    except Exception as exc:  # a record the code did not foresee: skipped, and said so
        out.issues.append(new_issue(item.path, f"{name} skipped: {why(exc)}"))
        return
    out.add(fixed)
    out.issues += issues


def _derive(
    kind: str, data: Json, cat: Catalog, path: Path
) -> tuple[dict[str, list[Json]], list[IngestIssue]]:
    if kind == "clusters":
        return {"cluster_configs": [config_row(data, cat)]}, []
    return (job_rows if kind == "jobs" else run_rows)(data, cat, path)


def fingerprint(item: InputFile, out: Output) -> str:
    """Ledger identity: the file's bytes plus everything derived from it (see module doc)."""
    derived = json.dumps([out.rows, [i.as_dict() for i in out.issues]], sort_keys=True, default=str)
    return hash_bytes(item.data, b"\0", derived.encode())
