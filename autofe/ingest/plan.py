"""The driver's half of a distributed ingest: everything but the event logs, and the log list.

Workspace JSON (jobs, runs, clusters, table stats) and run tables are small next to event logs,
and linking a log to its run needs the whole workspace's runs: they are ingested on the driver
with the DuckDB ingest's own functions into a scratch warehouse, exactly as ``autofe ingest``
does. The event logs are only listed, each with the runs of the workspace it belongs to, for the
executors to parse (:mod:`autofe.ingest.log_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from autofe.ingest.event_logs import NO_LOGS
from autofe.ingest.eventlog.files import LogSource, find_event_logs
from autofe.ingest.ingest import refusal
from autofe.ingest.run_table.ingest_run_table import ingest_run_table
from autofe.ingest.workspace.ingest_workspace import WorkspaceLogs, ingest_workspace
from autofe.ingest.workspace.inputs import is_workspace
from autofe.ingest.workspace.linking import AppLinker
from autofe.schema import IngestIssue, IngestReport
from autofe.warehouse.node_types import fill_hardware_facts
from autofe.warehouse.write import transaction


@dataclass(frozen=True)
class PlannedLog:
    """One event log to parse, and which workspace's runs it links to (None: a bare log)."""

    source: LogSource
    workspace: int | None


@dataclass
class IngestPlan:
    """Event logs for the executors; the scratch warehouse holds everything else."""

    logs: list[PlannedLog] = field(default_factory=list)
    linkers: list[AppLinker] = field(default_factory=list)
    """Per workspace, its run linker (picklable: shipped to the executors)."""
    report: IngestReport = field(default_factory=IngestReport)


def plan_ingest(con: duckdb.DuckDBPyConnection, paths: Sequence[Path]) -> IngestPlan:
    """Ingest every input but the event logs into ``con``; list the logs.

    Raises:
        ConfigError: a run-table mapping is invalid.
        WarehouseError: the scratch warehouse refused rows.
    """
    plan = IngestPlan()
    for path in paths:
        _plan_one(con, path, plan)
    with transaction(con, "node-type hardware facts"):
        fill_hardware_facts(con)
    plan.logs = _unique(plan.logs)
    return plan


def _plan_one(con: duckdb.DuckDBPyConnection, path: Path, plan: IngestPlan) -> None:
    """Route one input as ``autofe.ingest.ingest.ingest_one`` does."""
    refused = refusal(path)
    if refused:
        plan.report.issues.append(IngestIssue(str(path), refused, fatal=True))
    elif path.suffix == ".toml":
        ingest_run_table(con, path, plan.report)
    elif path.is_dir() and is_workspace(path):
        logs = ingest_workspace(con, path, plan.report)
        if logs is not None:
            _collect(plan, logs)
    else:
        sources = find_event_logs(path)
        if not sources and path.is_dir():
            plan.report.issues.append(IngestIssue(str(path), NO_LOGS))
        plan.logs.extend(PlannedLog(source, None) for source in sources)


def _collect(plan: IngestPlan, logs: WorkspaceLogs) -> None:
    """Keep a workspace's event logs, each with the index of its workspace's run linker."""
    index = len(plan.linkers)
    plan.linkers.append(logs.link)
    plan.logs.extend(PlannedLog(s, index) for p in logs.paths for s in find_event_logs(p))


def _unique(logs: list[PlannedLog]) -> list[PlannedLog]:
    """One entry per log: an input named twice is parsed once (the first naming wins)."""
    seen: set[tuple[Path, ...]] = set()
    kept = []
    for log in logs:
        if log.source.parts not in seen:
            seen.add(log.source.parts)
            kept.append(log)
    return kept
