"""Ingest a workspace export's files; return its event logs, for the event-log ingest.

Every JSON (or CSV) file is one ledger entry, stored whole or not at all. Its ledger hash covers the
file's bytes *and* the rows derived from it, because a run's row also depends on other files
(a ``runs/get`` merged over a ``runs/list`` entry, the job's settings, a ``clusters/get``
file): when any of them changes, the affected rows are upserted again, and when nothing
changed re-ingesting adds nothing. Files are written a few hundred per transaction (one
transaction per file spent 14-19 ms a file, most of a 100x replica's ingest); when a batch is
refused it is written again file by file, so the error names the file and the files before it
are kept, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from autofe.ingest.refuse import refuse
from autofe.ingest.workspace.catalog import Catalog, build_catalog
from autofe.ingest.workspace.file_output import file_output, fingerprint
from autofe.ingest.workspace.inputs import InputFile, event_log_paths, read_inputs
from autofe.ingest.workspace.linking import RunLinker, make_linker
from autofe.ingest.workspace.store import Pending, store_batch
from autofe.schema import IngestReport
from autofe.warehouse.ledger import ingested_among

log = logging.getLogger(__name__)

BATCH_FILES = 500


@dataclass(frozen=True)
class WorkspaceLogs:
    """A workspace's event logs (files or rolled-log folders) and the linker for its runs."""

    paths: list[Path]
    link: RunLinker


def _pending(item: InputFile, cat: Catalog) -> Pending:
    out = file_output(item, cat)
    return Pending(item, out, fingerprint(item, out))


def _ingest_batch(
    con: duckdb.DuckDBPyConnection, items: Sequence[InputFile], cat: Catalog, report: IngestReport
) -> None:
    """Store the changed files among ``items`` (unchanged ones count as such) and report them."""
    pending = [_pending(item, cat) for item in items]
    known = ingested_among(con, [p.key for p in pending])
    changed: dict[str, Pending] = {}
    for p in pending:
        if p.key in known or p.key in changed:  # a second identical file, as a re-ingest
            report.files_unchanged += 1
        else:
            changed[p.key] = p
    stored, refused = store_batch(con, list(changed.values())) if changed else ([], [])
    for p in stored:
        report.files_ingested += 1
        report.runs += len(p.out.rows.get("runs", []))
        report.issues.extend(p.out.issues)
    if refused:
        refuse(con, report, refused)


def ingest_workspace(
    con: duckdb.DuckDBPyConnection, root: Path, report: IngestReport
) -> WorkspaceLogs | None:
    """Ingest a workspace export's files; return its event logs for the caller to ingest.

    The caller ingests the logs with the returned linker, after the files (the linker needs the
    whole workspace's runs): ``autofe.ingest.ingest`` in this process, ``autofe.ingest.plan``
    on Spark executors.

    Bad input (unparseable JSON, a run without run_id, a run naming an unknown cluster, a
    value of the wrong type, a file the warehouse refuses, a FIFO named like a file) becomes an
    issue in ``report.issues`` and in ``ingest_issues``; the rest is ingested.

    Returns:
        The event logs and their run linker; None when the workspace has no event logs.

    Raises:
        WarehouseError: the warehouse cannot record the issues (it is unusable).
    """
    inputs = read_inputs(root)
    cat = build_catalog(root, inputs)
    for start in range(0, len(inputs), BATCH_FILES):
        _ingest_batch(con, inputs[start : start + BATCH_FILES], cat, report)
    log.info("workspace %s: %d jobs, %d runs", root, len(cat.jobs), len(cat.runs))
    paths = event_log_paths(root)
    if not paths:
        return None
    return WorkspaceLogs(paths, make_linker({k: r.data for k, r in cat.runs.items()}))
