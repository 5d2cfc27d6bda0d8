"""Summarise one Spark event log: what ran, how long, how much data, and what was skipped.

The log is parsed here, not read from the warehouse, so a model can look at a log before (or
without) ingesting it. Only logs under the allowed roots are read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from autofe.errors import ConfigError, IngestError
from autofe.ingest.eventlog.files import LogSource, find_event_logs
from autofe.ingest.eventlog.parse import (
    ParsedApplication,
    SqlExecution,
    StageAttempt,
    parse_event_log,
)
from autofe.tools.paths import confine

MAX_ITEMS = 100
MAX_DESCRIPTION = 200
DATABRICKS_VERSION = "spark.databricks.clusterUsageTags.sparkVersion"


class EventLogCounts(BaseModel):
    jobs: int
    stages: int
    """Stage attempts that ran (submitted, completed or with tasks)."""
    tasks: int
    sql_executions: int
    executors: int
    """Executors added over the application (the driver not counted)."""
    events: int
    unknown_events: int
    bad_lines: int


class EventLogTotals(BaseModel):
    """Task metrics summed over every stage attempt."""

    input_bytes: int
    output_bytes: int
    shuffle_read_bytes: int
    shuffle_write_bytes: int
    memory_spilled_bytes: int
    disk_spilled_bytes: int
    gc_time_ms: int
    executor_run_time_ms: int
    executor_cpu_time_ns: int


class StageSummary(BaseModel):
    stage_id: int
    attempt_id: int
    name: str | None
    status: str
    duration_ms: int | None
    num_tasks: int | None
    task_count: int
    failed_tasks: int
    task_duration_p50_ms: float | None
    task_duration_max_ms: int | None
    input_bytes: int
    output_bytes: int
    shuffle_read_bytes: int
    shuffle_write_bytes: int
    spilled_bytes: int
    gc_time_ms: int
    executor_run_time_ms: int


class SqlSummary(BaseModel):
    execution_id: int
    description: str | None
    """Cut to 200 characters; plans are left out."""
    duration_ms: int | None
    error: str | None


class IssueSummary(BaseModel):
    path: str
    line: int | None
    reason: str


class EventLogSummary(BaseModel):
    """One application's log, summarised; lists hold at most ``max_items`` entries."""

    path: str
    app_id: str | None
    attempt_id: str | None
    app_name: str | None
    spark_version: str | None
    start_time: datetime | None
    end_time: datetime | None
    duration_s: float | None
    complete: bool
    counts: EventLogCounts
    totals: EventLogTotals
    top_stages: list[StageSummary]
    """The longest stage attempts, longest first."""
    top_sql: list[SqlSummary]
    """The longest SQL executions, longest first."""
    unknown_event_types: dict[str, int]
    issues: list[IssueSummary]
    issues_total: int


def summarize_event_log(
    path: str | Path, roots: Sequence[Path], max_items: int = 20
) -> EventLogSummary:
    """Parse the event log at ``path`` (a file or a rolled-log directory) and summarise it.

    Args:
        path: the log, absolute or relative to a root.
        roots: directories logs may be read from.
        max_items: longest stages, longest SQL executions and issues to list (1..100).

    Raises:
        PathNotAllowed: the path (or a part of a rolled log) is missing or outside ``roots``.
        ConfigError: ``max_items`` is out of range, or the path holds several logs.
        IngestError: no event log there, or nothing in it can be read.
    """
    if not 1 <= max_items <= MAX_ITEMS:
        raise ConfigError(f"max_items must be between 1 and {MAX_ITEMS}, not {max_items}")
    app = parse_event_log(_one_log(confine(path, roots), roots))
    return _summary(app, max_items)


def _one_log(path: Path, roots: Sequence[Path]) -> LogSource:
    """The single application's log at ``path``, every part of it confined too."""
    sources = find_event_logs(path)
    if not sources:
        raise IngestError(str(path), "no event log here")
    if len(sources) > 1:
        shown = ", ".join(str(s.path) for s in sources[:10])
        more = f" and {len(sources) - 10} more" if len(sources) > 10 else ""
        raise ConfigError(
            f"{path} holds {len(sources)} event logs ({shown}{more}): summarise one at a time"
        )
    # a symlink inside a log directory could still point outside the roots
    return LogSource(tuple(confine(part, roots) for part in sources[0].parts))


def _summary(app: ParsedApplication, max_items: int) -> EventLogSummary:
    duration = _delta(app.start_ms, app.end_ms)
    return EventLogSummary(
        path=app.path,
        app_id=app.app_id,
        attempt_id=app.attempt_id,
        app_name=app.app_name,
        spark_version=app.spark_version or app.spark_properties.get(DATABRICKS_VERSION),
        start_time=_time(app.start_ms),
        end_time=_time(app.end_ms),
        duration_s=duration / 1000 if duration is not None else None,
        complete=app.complete,
        counts=_counts(app),
        totals=_totals(app.stages.values()),
        top_stages=[_stage(s) for s in _longest(list(app.stages.values()), max_items)],
        top_sql=[_sql(x) for x in _longest(list(app.sql.values()), max_items)],
        unknown_event_types=dict(app.unknown_events.most_common(max_items)),
        issues=[
            IssueSummary(path=i.path, line=i.line, reason=_cut(i.reason) or "")
            for i in app.issues[:max_items]
        ],
        # bad lines past the parser's cap on kept issues are only counted
        issues_total=app.bad_lines + sum(1 for i in app.issues if i.line is None),
    )


def _counts(app: ParsedApplication) -> EventLogCounts:
    return EventLogCounts(
        jobs=len(app.jobs),
        stages=len(app.stages),
        tasks=app.task_count,
        sql_executions=len(app.sql),
        executors=sum(1 for e in app.executors if e != "driver"),
        events=app.events,
        unknown_events=sum(app.unknown_events.values()),
        bad_lines=app.bad_lines,
    )


def _totals(stages: Iterable[StageAttempt]) -> EventLogTotals:
    fields = EventLogTotals.model_fields
    sums = dict.fromkeys(fields, 0)
    for stage in stages:
        for name in fields:
            sums[name] += int(stage.metrics.get(name) or 0)
    return EventLogTotals(**sums)


def _longest(items: list[Any], n: int) -> list[Any]:
    """The ``n`` items with the longest duration (unknown durations last), stable by id."""

    def key(item: Any) -> tuple[bool, int]:
        d = _duration(item)
        return (d is None, -(d or 0))

    return sorted(items, key=key)[:n]


def _duration(item: StageAttempt | SqlExecution) -> int | None:
    if isinstance(item, StageAttempt):
        return _delta(item.submission_ms, item.completion_ms)
    return _delta(item.start_ms, item.end_ms)


def _stage(s: StageAttempt) -> StageSummary:
    m = s.metrics

    def total(name: str) -> int:
        return int(m.get(name) or 0)

    return StageSummary(
        stage_id=s.stage_id,
        attempt_id=s.attempt_id,
        name=_cut(s.name),
        status=_status(s),
        duration_ms=_duration(s),
        num_tasks=s.num_tasks,
        task_count=total("task_count"),
        failed_tasks=total("failed_tasks"),
        task_duration_p50_ms=m.get("task_duration_p50_ms"),
        task_duration_max_ms=m.get("task_duration_max_ms"),
        input_bytes=total("input_bytes"),
        output_bytes=total("output_bytes"),
        shuffle_read_bytes=total("shuffle_read_bytes"),
        shuffle_write_bytes=total("shuffle_write_bytes"),
        spilled_bytes=total("memory_spilled_bytes") + total("disk_spilled_bytes"),
        gc_time_ms=total("gc_time_ms"),
        executor_run_time_ms=total("executor_run_time_ms"),
    )


def _status(s: StageAttempt) -> str:
    if s.completion_ms is None:
        return "incomplete"
    return "failed" if s.failure_reason else "succeeded"


def _sql(x: SqlExecution) -> SqlSummary:
    return SqlSummary(
        execution_id=x.execution_id,
        description=_cut(x.description),
        duration_ms=_duration(x),
        error=_cut(x.error),
    )


def _cut(text: str | None) -> str | None:
    """At most 200 characters.

    >>> _cut("x" * 201)[-4:], _cut(None)
    ('xxx…', None)
    """
    if text is None or len(text) <= MAX_DESCRIPTION:
        return text
    return text[: MAX_DESCRIPTION - 1] + "…"


def _delta(start: int | None, end: int | None) -> int | None:
    return end - start if start is not None and end is not None else None


def _time(ms: int | None) -> datetime | None:
    """Epoch milliseconds as a naive UTC datetime, as the warehouse stores times."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)
