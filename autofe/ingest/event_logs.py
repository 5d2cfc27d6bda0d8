"""Ingest Spark event logs into the warehouse: one transaction per application."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from autofe.errors import IngestError, WarehouseError
from autofe.ingest.eventlog.files import NOT_LOGS, LogSource, find_event_logs
from autofe.ingest.eventlog.parse import ParsedApplication, parse_or_issue
from autofe.ingest.parser_pool import parser_pool
from autofe.ingest.refuse import refuse
from autofe.schema import IngestIssue, IngestReport
from autofe.special_file import special_file
from autofe.warehouse.ledger import (
    already_ingested,
    hash_bytes,
    hash_files,
    record_ingested_many,
    record_issues,
)
from autofe.warehouse.write import delete_applications, insert_rows, transaction

log = logging.getLogger(__name__)

Linker = Callable[[ParsedApplication], str | None]
"""Returns the workspace run an application belongs to, or None to make a run of its own."""

DATABRICKS_TAG = "spark.databricks.clusterUsageTags."
BATCH_APPS = 64
"""Applications per transaction: enough to amortise DuckDB's per-statement cost, few enough
that storing overlaps with the worker processes still parsing."""
NO_LOGS = (
    "no event logs in this folder (hidden files and "
    + ", ".join(sorted(NOT_LOGS)[:4])
    + ", … files are never read as logs)"
)


def ts(ms: int | None) -> datetime | None:
    """Epoch milliseconds to a naive UTC timestamp (the warehouse stores UTC).

    >>> ts(0)
    datetime.datetime(1970, 1, 1, 0, 0)
    """
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def _delta(start: int | None, end: int | None) -> int | None:
    return end - start if start is not None and end is not None else None


def app_key(app: ParsedApplication) -> str:
    """Identity of an application's log: a grown ``.inprogress`` log replaces its older self.

    Spark app ids repeat across clusters (``local-…``, ``app-<time>-0000``), so the log's
    location is part of the identity.

    >>> from autofe.ingest.eventlog.parse import ParsedApplication
    >>> app_key(ParsedApplication(path="/l/app-1.inprogress", app_id="app-1", attempt_id="2"))
    'app-1:2@3e03d2bf'
    """
    digest = hash_bytes(app.path.removesuffix(".inprogress").encode())[:8]
    attempt = f":{app.attempt_id}" if app.attempt_id else ""
    return f"{app.app_id}{attempt}@{digest}"


def _application_row(app: ParsedApplication, run_id: str, content_hash: str) -> dict[str, Any]:
    props = app.spark_properties
    tags = {k[len(DATABRICKS_TAG) :]: v for k, v in props.items() if k.startswith(DATABRICKS_TAG)}
    return {
        "app_key": app_key(app),
        "app_id": app.app_id,
        "attempt_id": app.attempt_id,
        "run_id": run_id,
        "app_name": app.app_name,
        "spark_version": app.spark_version or tags.get("sparkVersion"),
        "master": props.get("spark.master"),
        "spark_user": app.spark_user,
        "start_time": ts(app.start_ms),
        "end_time": ts(app.end_ms),
        "duration_ms": _delta(app.start_ms, app.end_ms),
        "complete": app.complete,
        "num_jobs": len(app.jobs),
        "num_stages": len(app.stages),
        "num_tasks": app.task_count,
        "num_executors": sum(1 for e in app.executors if e != "driver"),
        "spark_properties": json.dumps(props, sort_keys=True),
        "databricks_tags": json.dumps(tags, sort_keys=True) if tags else None,
        "events": app.events,
        "unknown_events": sum(app.unknown_events.values()),
        "bad_lines": app.bad_lines,
        "source_path": app.path,
        "content_hash": content_hash,
    }


def _child_rows(app: ParsedApplication, key: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    base = {"app_key": key, "run_id": run_id}
    return {
        "spark_jobs": [
            {
                **base,
                "job_id": j.job_id,
                "submit_time": ts(j.submit_ms),
                "completion_time": ts(j.completion_ms),
                "duration_ms": _delta(j.submit_ms, j.completion_ms),
                "result": j.result,
                "num_stages": len(j.stage_ids),
                "stage_ids": j.stage_ids,
                "sql_execution_id": j.sql_execution_id,
            }
            for j in app.jobs.values()
        ],
        "stages": [_stage_row(s, base) for s in app.stages.values()],
        "sql_executions": [
            {
                **base,
                **{k: getattr(x, k) for k in ("execution_id", "root_execution_id", "error")},
                **{k: getattr(x, k) for k in ("description", "physical_plan", "final_plan")},
                "start_time": ts(x.start_ms),
                "end_time": ts(x.end_ms),
                "duration_ms": _delta(x.start_ms, x.end_ms),
            }
            for x in app.sql.values()
        ],
        "executors": [
            {
                **base,
                "executor_id": e.executor_id,
                "host": e.host,
                "total_cores": e.total_cores,
                "add_time": ts(e.add_ms),
                "remove_time": ts(e.remove_ms),
                "remove_reason": e.remove_reason,
            }
            for e in app.executors.values()
        ],
    }


def _stage_row(s: Any, base: dict[str, Any]) -> dict[str, Any]:
    if s.completion_ms is None:
        status = "incomplete"
    else:
        status = "failed" if s.failure_reason else "succeeded"
    return {
        **base,
        "stage_id": s.stage_id,
        "attempt_id": s.attempt_id,
        "name": s.name,
        "num_tasks": s.num_tasks,
        "submission_time": ts(s.submission_ms),
        "completion_time": ts(s.completion_ms),
        "duration_ms": _delta(s.submission_ms, s.completion_ms),
        "status": status,
        "failure_reason": s.failure_reason,
        **s.metrics,
    }


def _own_run(app: ParsedApplication, run_id: str) -> dict[str, Any]:
    """A run for a bare event log: the application is the run, its name the job."""
    duration = _delta(app.start_ms, app.end_ms)
    return {
        "run_id": run_id,
        "job_id": app.app_name or app.app_id,
        "submit_time": ts(app.start_ms),
        "start_time": ts(app.start_ms),
        "end_time": ts(app.end_ms),
        "duration_s": duration / 1000 if duration is not None else None,
        "status": _app_status(app),
        "source": "event_log",
    }


def _app_status(app: ParsedApplication) -> str:
    if not app.complete:
        return "INCOMPLETE"
    failed = any(j.result not in (None, "JobSucceeded") for j in app.jobs.values())
    return "FAILED" if failed else "SUCCEEDED"


def _own_job(app: ParsedApplication) -> dict[str, Any]:
    return {
        "job_id": app.app_name or app.app_id,
        "name": app.app_name,
        "task_type": "spark_submit",
        "source": "event_log",
    }


@dataclass(frozen=True)
class Ready:
    """A parsed application with its content hash and the run it belongs to."""

    app: ParsedApplication
    content_hash: str
    linked_run: str | None


def application_rows(item: Ready) -> dict[str, list[dict[str, Any]]]:
    """Rows per warehouse table for one parsed application (also built on Spark executors)."""
    app, key = item.app, app_key(item.app)
    run_id = item.linked_run or f"app:{key}"
    rows = _child_rows(app, key, run_id)
    rows["applications"] = [_application_row(app, run_id, item.content_hash)]
    rows["jobs"] = [] if item.linked_run else [_own_job(app)]
    rows["runs"] = [] if item.linked_run else [_own_run(app, run_id)]
    return rows


Rows = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class Built:
    """An application with its warehouse rows, ready for a transaction."""

    item: Ready
    rows: Rows


def build_rows(app: ParsedApplication, digest: str, link: Linker | None) -> Built | IngestIssue:
    """The application's rows, or why they cannot be built (the log is skipped, not the batch).

    The parser checks every field it reads, so this is the last guard: whatever slips through
    names the log instead of stopping the ingest.
    """
    try:
        item = Ready(app, digest, link(app) if link else None)
        return Built(item, application_rows(item))
    except Exception as exc:
        reason = f"cannot build warehouse rows: {type(exc).__name__}: {exc}"
        return IngestIssue(app.path, reason, fatal=True)


def store_applications(con: duckdb.DuckDBPyConnection, built: Sequence[Built]) -> None:
    """Write whole applications in one transaction, replacing older logs of the same ones.

    A transaction only ever holds whole applications, so an interrupted ingest leaves none
    half-written; batching several amortises DuckDB's per-statement cost.
    """
    tables: Rows = {}
    for one in built:
        for name, rows in one.rows.items():
            tables.setdefault(name, []).extend(rows)
    items = [one.item for one in built]
    what = items[0].app.path if len(items) == 1 else f"{len(items)} applications"
    with transaction(con, what):
        delete_applications(con, [app_key(item.app) for item in items])
        for name, rows in tables.items():
            insert_rows(con, name, rows, replace=name in ("jobs", "runs"))
        record_ingested_many(con, [(i.content_hash, i.app.path) for i in items], "event_log")
        record_issues(con, [issue for item in items for issue in item.app.issues])


def _store_batch(con: duckdb.DuckDBPyConnection, batch: list[Built], report: IngestReport) -> None:
    """Store a batch; if it fails, store one application at a time to isolate the bad one."""
    try:
        store_applications(con, batch)
        stored = batch
    except WarehouseError:
        stored = []
        for one in batch:
            try:
                store_applications(con, [one])
                stored.append(one)
            except WarehouseError as exc:
                refuse(con, report, [IngestIssue(one.item.app.path, str(exc), fatal=True)])
    for one in stored:
        _tally(report, one.item.app, runs=int(one.item.linked_run is None))


def _pending(
    con: duckdb.DuckDBPyConnection, sources: Sequence[LogSource], report: IngestReport
) -> list[tuple[LogSource, str]]:
    todo: list[tuple[LogSource, str]] = []
    for src in sources:
        try:
            digest = log_digest(src)
        except IngestError as exc:
            # like a log that fails to parse: kept in the issues table, not in the ledger
            refuse(con, report, [IngestIssue(exc.path, exc.reason, exc.line, fatal=True)])
            continue
        if already_ingested(con, digest):
            report.files_unchanged += 1
        else:
            todo.append((src, digest))
    return todo


def log_digest(src: LogSource) -> str:
    """The log's content hash; a FIFO, device or socket is refused before it is opened.

    Raises:
        IngestError: a part is a special file or cannot be read.
    """
    for part in src.parts:
        refused = special_file(part)
        if refused:
            raise IngestError(str(part), refused)
    return hash_files(src.parts)


def _parsed(
    todo: list[tuple[LogSource, str]], pool: Executor | None
) -> Iterator[tuple[str, ParsedApplication | IngestIssue]]:
    """Parse logs lazily, in the pool's worker processes when there is one.

    Yields (content hash, result) as logs finish, so progress shows while work goes on.
    """
    if pool is None or len(todo) < 2:
        yield from ((digest, parse_or_issue(src)) for src, digest in todo)
        return
    # Largest logs first so the last worker does not finish long after the others.
    ordered = sorted(todo, key=lambda item: -_size(item[0]))
    futures = {pool.submit(parse_or_issue, src): digest for src, digest in ordered}
    for future in as_completed(futures):
        yield futures[future], future.result()


def _size(source: LogSource) -> int:
    try:
        return sum(p.stat().st_size for p in source.parts)
    except OSError:
        return 0


def _tally(report: IngestReport, app: ParsedApplication, runs: int) -> None:
    report.applications += 1
    report.files_ingested += 1
    report.runs += runs
    report.spark_jobs += len(app.jobs)
    report.stages += len(app.stages)
    report.sql_executions += len(app.sql)
    report.tasks += app.task_count
    report.events += app.events
    report.unknown_events += sum(app.unknown_events.values())
    report.decompressed_bytes += app.decompressed_bytes
    report.issues.extend(app.issues)


def ingest_event_logs(
    con: duckdb.DuckDBPyConnection,
    paths: Sequence[Path],
    report: IngestReport,
    link: Linker | None = None,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
    pool: Executor | None = None,
) -> None:
    """Ingest every event log found under ``paths``; damaged inputs become report issues.

    Parsing runs in ``pool`` if given (see :func:`parser_pool`), else in ``workers`` processes.
    """
    sources = _sources(paths, report)
    todo = _pending(con, sources, report)
    if pool is None and workers > 1 and len(todo) > 1:
        with parser_pool(workers) as own:
            _ingest_parsed(con, report, _parsed(todo, own), len(todo), link, progress)
    else:
        _ingest_parsed(con, report, _parsed(todo, pool), len(todo), link, progress)


def _sources(paths: Sequence[Path], report: IngestReport) -> list[LogSource]:
    """Every log under ``paths``; a folder holding none is a warning (a wrong path, often)."""
    found: list[LogSource] = []
    for path in paths:
        logs = find_event_logs(path)
        if not logs and path.is_dir():
            report.issues.append(IngestIssue(str(path), NO_LOGS))
        found += logs
    return found


def _ingest_parsed(
    con: duckdb.DuckDBPyConnection,
    report: IngestReport,
    parsed: Iterator[tuple[str, ParsedApplication | IngestIssue]],
    total: int,
    link: Linker | None,
    progress: Callable[[str], None] | None,
) -> None:
    batch: list[Built] = []
    for done, (digest, result) in enumerate(parsed, start=1):
        if progress:
            progress(f"{done}/{total} {result.path}")
        built = (
            build_rows(result, digest, link) if isinstance(result, ParsedApplication) else result
        )
        if isinstance(built, IngestIssue):
            refuse(con, report, [built])
            continue
        batch.append(built)
        if len(batch) >= BATCH_APPS:
            _store_batch(con, batch, report)
            batch = []
    if batch:
        _store_batch(con, batch, report)
