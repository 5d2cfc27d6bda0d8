"""``autofe ingest``: route each input to its reader and fill one warehouse."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from autofe.config import IngestSettings
from autofe.ingest.eventlog.parse import ParsedApplication
from autofe.ingest.parser_pool import parser_pool
from autofe.schema import IngestIssue, IngestReport
from autofe.special_file import special_file
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.node_types import fill_hardware_facts
from autofe.warehouse.write import transaction

if TYPE_CHECKING:
    from autofe.ingest.workspace.linking import AppFacts

Progress = Callable[[str], None]


def app_facts(app: ParsedApplication) -> AppFacts:
    """What the workspace linker needs to know about a parsed application."""
    from autofe.ingest.workspace.linking import AppFacts

    return AppFacts(
        app_id=str(app.app_id),
        start_ms=app.start_ms,
        end_ms=app.end_ms,
        properties={**app.spark_properties, **app.job_properties},
        path=Path(app.path),
    )


def _ingest_workspace(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    report: IngestReport,
    pool: Executor | None,
    progress: Progress | None,
) -> None:
    """The workspace's files, then its event logs, each application linked to its run."""
    from autofe.ingest.event_logs import ingest_event_logs
    from autofe.ingest.workspace.ingest_workspace import ingest_workspace

    logs = ingest_workspace(con, root, report)
    if logs is not None:
        link = logs.link
        ingest_event_logs(
            con, logs.paths, report, lambda app: link(app_facts(app)), progress=progress, pool=pool
        )


def refusal(path: Path) -> str | None:
    """Why an input is refused before any reader opens it: missing, or a FIFO, device, socket."""
    if not path.exists() and not path.is_symlink():
        return "no such file or directory"
    return special_file(path)


def ingest_one(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    report: IngestReport,
    settings: IngestSettings,
    mapping: Path | None = None,
    progress: Progress | None = None,
    pool: Executor | None = None,
) -> None:
    """Ingest one input: a mapping file, a run table, a workspace folder or event logs."""
    from autofe.ingest.event_logs import ingest_event_logs
    from autofe.ingest.run_table.ingest_run_table import ingest_run_table
    from autofe.ingest.workspace.inputs import is_workspace

    refused = refusal(path)
    if refused:
        report.issues.append(IngestIssue(str(path), refused, fatal=True))
    elif mapping is not None:
        ingest_run_table(con, mapping, report, table_path=path)
    elif path.suffix == ".toml":
        ingest_run_table(con, path, report)
    elif path.is_dir() and is_workspace(path):
        _ingest_workspace(con, path, report, pool, progress)
    else:
        ingest_event_logs(con, [path], report, progress=progress, pool=pool)


def ingest(
    paths: Sequence[Path],
    settings: IngestSettings,
    mapping: Path | None = None,
    progress: Progress | None = None,
) -> IngestReport:
    """Ingest every input into the warehouse at ``settings.db``; returns what was added.

    Afterwards, configs naming a known AWS node type get the vCPU, memory and price they lack
    (``autofe.warehouse.node_types.fill_hardware_facts``; values already stored are kept).

    Raises:
        WarehouseError: the warehouse cannot be opened.
        ConfigError: a mapping file is invalid.
    """
    started = time.perf_counter()
    report = IngestReport()
    with parser_pool(settings.workers) as pool:  # before DuckDB starts its threads
        con = open_warehouse(settings.db)
        try:
            for path in paths:
                if progress:
                    progress(str(path))
                ingest_one(con, path, report, settings, mapping, progress, pool)
            # Its own transaction after the inputs': a failure here loses no stored input, and
            # the next ingest fills whatever is still NULL.
            with transaction(con, "node-type hardware facts"):
                fill_hardware_facts(con)
        finally:
            con.close()
    report.seconds = round(time.perf_counter() - started, 3)
    return report
