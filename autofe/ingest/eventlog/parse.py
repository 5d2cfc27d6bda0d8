"""Parse one Spark event log into application, job, stage, SQL and executor facts.

Pure: knows nothing of the warehouse or of MCP. Handles Spark 1.5 to 4.x (event and field
names changed across versions), every codec Spark writes, rolled logs, ``.inprogress`` logs
and logs cut mid-line. Bad lines are reported and skipped; the caller decides what to commit.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from autofe.errors import IngestError
from autofe.ingest.eventlog.codecs import iter_decompressed
from autofe.ingest.eventlog.fields import INT32_MAX, check_fields
from autofe.ingest.eventlog.files import LogSource
from autofe.ingest.eventlog.task_metrics import (
    StageTasks,
    add_good_task_end,
    add_task_end,
    stage_metric_row,
)
from autofe.schema import IngestIssue

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 << 20
"""Longer lines are reported and skipped, so one runaway line cannot exhaust memory."""

_BIG_LINE = 1 << 20
"""Lines longer than this are checked for a closing brace before they are parsed."""

MAX_ISSUES_PER_LOG = 50
"""Beyond this many bad lines only a count is kept, so a garbage file cannot flood the report."""

KNOWN_UNUSED = frozenset(
    {
        "SparkListenerTaskStart",
        "SparkListenerTaskGettingResult",
        "SparkListenerBlockUpdated",
        "SparkListenerBlockManagerRemoved",
        "SparkListenerUnpersistRDD",
        "SparkListenerExecutorMetricsUpdate",
        "SparkListenerStageExecutorMetrics",
        "SparkListenerResourceProfileAdded",
        "SparkListenerExecutorBlacklisted",
        "SparkListenerExecutorUnblacklisted",
        "SparkListenerExecutorExcluded",
        "SparkListenerExecutorUnexcluded",
        "SparkListenerNodeBlacklisted",
        "SparkListenerNodeUnblacklisted",
        "SparkListenerNodeExcluded",
        "SparkListenerNodeUnexcluded",
        "SparkListenerExecutorBlacklistedForStage",
        "SparkListenerExecutorExcludedForStage",
        "SparkListenerNodeBlacklistedForStage",
        "SparkListenerNodeExcludedForStage",
        "SparkListenerSpeculativeTaskSubmitted",
        "SparkListenerUnschedulableTaskSetAdded",
        "SparkListenerUnschedulableTaskSetRemoved",
        "SparkListenerMiscellaneousProcessAdded",
        "SparkListenerDriverAccumUpdates",
        "SparkListenerSQLAdaptiveSQLMetricUpdates",
        "SparkListenerSQLExecutionUpdate",
        "StreamingQueryListener.QueryStartedEvent",
        "StreamingQueryListener.QueryProgressEvent",
        "StreamingQueryListener.QueryTerminatedEvent",
        "StreamingQueryListener.QueryIdleEvent",
        "QueryStartedEvent",
        "QueryProgressEvent",
        "QueryTerminatedEvent",
        "QueryIdleEvent",
    }
)


@dataclass
class StageAttempt:
    stage_id: int
    attempt_id: int
    name: str | None = None
    num_tasks: int | None = None
    submission_ms: int | None = None
    completion_ms: int | None = None
    failure_reason: str | None = None
    tasks: StageTasks = field(default_factory=StageTasks)
    metrics: dict[str, Any] = field(default_factory=dict)
    """Task aggregates, filled by :func:`parse_event_log` once the log is read."""


@dataclass
class SparkJob:
    job_id: int
    submit_ms: int | None = None
    completion_ms: int | None = None
    result: str | None = None
    stage_ids: list[int] = field(default_factory=list)
    sql_execution_id: int | None = None


@dataclass
class SqlExecution:
    execution_id: int
    root_execution_id: int | None = None
    description: str | None = None
    physical_plan: str | None = None
    final_plan: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    error: str | None = None


@dataclass
class Executor:
    executor_id: str
    host: str | None = None
    total_cores: int | None = None
    add_ms: int | None = None
    remove_ms: int | None = None
    remove_reason: str | None = None


@dataclass
class ParsedApplication:
    """Everything one event log says about its application."""

    path: str
    app_id: str | None = None
    attempt_id: str | None = None
    app_name: str | None = None
    spark_version: str | None = None
    spark_user: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    spark_properties: dict[str, str] = field(default_factory=dict)
    job_properties: dict[str, str] = field(default_factory=dict)
    jobs: dict[int, SparkJob] = field(default_factory=dict)
    stages: dict[tuple[int, int], StageAttempt] = field(default_factory=dict)
    sql: dict[int, SqlExecution] = field(default_factory=dict)
    executors: dict[str, Executor] = field(default_factory=dict)
    events: int = 0
    lines: int = 0
    decompressed_bytes: int = 0
    unknown_events: Counter[str] = field(default_factory=Counter)
    issues: list[IngestIssue] = field(default_factory=list)
    bad_lines: int = 0

    @property
    def complete(self) -> bool:
        return self.end_ms is not None

    @property
    def task_count(self) -> int:
        return sum(s.tasks.count for s in self.stages.values())

    def finalize(self) -> None:
        """Aggregate every stage's tasks and drop the per-task data (it can be large).

        Stages a JobStart declared but that never ran (skipped: their shuffle output was
        reused) are dropped; ``SparkJob.stage_ids`` still lists them.
        """
        self.stages = {k: s for k, s in self.stages.items() if not _never_ran(s)}
        for stage in self.stages.values():
            stage.metrics = stage_metric_row(stage.tasks)
            stage.tasks = StageTasks(stage.tasks.count, stage.tasks.failed, stage.tasks.killed)

    def stage(self, stage_id: int, attempt_id: int) -> StageAttempt:
        key = (stage_id, attempt_id)
        found = self.stages.get(key)
        if found is None:
            found = self.stages[key] = StageAttempt(stage_id, attempt_id)
        return found


def _never_ran(stage: StageAttempt) -> bool:
    return stage.submission_ms is None and stage.completion_ms is None and not stage.tasks.count


Handler = Callable[[ParsedApplication, dict[str, Any]], None]


def _on_log_start(app: ParsedApplication, e: dict[str, Any]) -> None:
    app.spark_version = e.get("Spark Version")


def _on_app_start(app: ParsedApplication, e: dict[str, Any]) -> None:
    app.app_name = e.get("App Name")
    app.app_id = e.get("App ID") or app.app_id
    app.attempt_id = e.get("App Attempt ID")
    app.start_ms = e.get("Timestamp")
    app.spark_user = e.get("User")


def _on_app_end(app: ParsedApplication, e: dict[str, Any]) -> None:
    app.end_ms = e.get("Timestamp")


def _on_environment(app: ParsedApplication, e: dict[str, Any]) -> None:
    props = e.get("Spark Properties") or {}
    items = props.items() if isinstance(props, dict) else props
    app.spark_properties.update({str(k): str(v) for k, v in items})


def _on_job_start(app: ParsedApplication, e: dict[str, Any]) -> None:
    job = app.jobs.setdefault(e["Job ID"], SparkJob(e["Job ID"]))
    job.submit_ms = e.get("Submission Time")
    job.stage_ids = list(e.get("Stage IDs") or [])
    props = e.get("Properties") or {}
    sql_id = props.get("spark.sql.execution.id")
    job.sql_execution_id = int(sql_id) if sql_id not in (None, "") else None
    for key, value in props.items():
        if key.startswith(("spark.databricks.job.", "spark.jobGroup.id")):
            app.job_properties.setdefault(key, str(value))
    for info in e.get("Stage Infos") or ():
        _stage_info(app, info, submitted=False)


def _on_job_end(app: ParsedApplication, e: dict[str, Any]) -> None:
    job = app.jobs.setdefault(e["Job ID"], SparkJob(e["Job ID"]))
    job.completion_ms = e.get("Completion Time")
    job.result = (e.get("Job Result") or {}).get("Result")


def _stage_info(app: ParsedApplication, info: dict[str, Any], *, submitted: bool) -> StageAttempt:
    stage = app.stage(info["Stage ID"], info.get("Stage Attempt ID", 0))
    stage.name = info.get("Stage Name") or stage.name
    if info.get("Number of Tasks") is not None:
        stage.num_tasks = info["Number of Tasks"]
    stage.submission_ms = info.get("Submission Time") or stage.submission_ms
    if submitted:
        stage.completion_ms = info.get("Completion Time") or stage.completion_ms
        stage.failure_reason = info.get("Failure Reason") or stage.failure_reason
    return stage


def _on_stage_submitted(app: ParsedApplication, e: dict[str, Any]) -> None:
    _stage_info(app, e["Stage Info"], submitted=False)


def _on_stage_completed(app: ParsedApplication, e: dict[str, Any]) -> None:
    _stage_info(app, e["Stage Info"], submitted=True)


def _on_task_end(app: ParsedApplication, e: dict[str, Any]) -> None:
    stage = app.stage(e["Stage ID"], e.get("Stage Attempt ID", 0))
    add_task_end(stage.tasks, e)


def _add_good_task_end(app: ParsedApplication, e: dict[str, Any]) -> bool:
    """A TaskEnd folded on the fast path, its fields checked as read; False, nothing folded,
    when any value is in doubt (the caller then checks the event and runs the handler)."""
    stage_id, attempt = e.get("Stage ID"), e.get("Stage Attempt ID", 0)
    if type(stage_id) is not int or type(attempt) is not int:
        return False
    if not (0 <= stage_id <= INT32_MAX and 0 <= attempt <= INT32_MAX):
        return False
    return add_good_task_end(app.stage(stage_id, attempt).tasks, e)


def _on_sql_start(app: ParsedApplication, e: dict[str, Any]) -> None:
    ex = app.sql.setdefault(e["executionId"], SqlExecution(e["executionId"]))
    ex.root_execution_id = e.get("rootExecutionId")
    ex.description = e.get("description")
    ex.physical_plan = e.get("physicalPlanDescription")
    ex.start_ms = e.get("time")


def _on_sql_end(app: ParsedApplication, e: dict[str, Any]) -> None:
    ex = app.sql.setdefault(e["executionId"], SqlExecution(e["executionId"]))
    ex.end_ms = e.get("time")
    ex.error = e.get("errorMessage") or None


def _on_sql_adaptive(app: ParsedApplication, e: dict[str, Any]) -> None:
    ex = app.sql.setdefault(e["executionId"], SqlExecution(e["executionId"]))
    ex.final_plan = e.get("physicalPlanDescription")


def _on_executor_added(app: ParsedApplication, e: dict[str, Any]) -> None:
    info = e.get("Executor Info") or {}
    ex = app.executors.setdefault(e["Executor ID"], Executor(e["Executor ID"]))
    ex.host = info.get("Host")
    ex.total_cores = info.get("Total Cores")
    ex.add_ms = e.get("Timestamp")


def _on_executor_removed(app: ParsedApplication, e: dict[str, Any]) -> None:
    ex = app.executors.setdefault(e["Executor ID"], Executor(e["Executor ID"]))
    ex.remove_ms = e.get("Timestamp")
    ex.remove_reason = e.get("Removed Reason")


def _on_block_manager_added(app: ParsedApplication, e: dict[str, Any]) -> None:
    bm = e.get("Block Manager ID") or {}
    executor_id = bm.get("Executor ID")
    if executor_id == "driver" and "driver" not in app.executors:
        app.executors["driver"] = Executor("driver", bm.get("Host"), None, e.get("Timestamp"))


HANDLERS: dict[str, Handler] = {
    "SparkListenerLogStart": _on_log_start,
    "SparkListenerApplicationStart": _on_app_start,
    "SparkListenerApplicationEnd": _on_app_end,
    "SparkListenerEnvironmentUpdate": _on_environment,
    "SparkListenerJobStart": _on_job_start,
    "SparkListenerJobEnd": _on_job_end,
    "SparkListenerStageSubmitted": _on_stage_submitted,
    "SparkListenerStageCompleted": _on_stage_completed,
    "SparkListenerTaskEnd": _on_task_end,
    "SparkListenerSQLExecutionStart": _on_sql_start,
    "SparkListenerSQLExecutionEnd": _on_sql_end,
    "SparkListenerSQLAdaptiveExecutionUpdate": _on_sql_adaptive,
    "SparkListenerExecutorAdded": _on_executor_added,
    "SparkListenerExecutorRemoved": _on_executor_removed,
    "SparkListenerBlockManagerAdded": _on_block_manager_added,
}


def short_event_name(name: str) -> str:
    """Drop the package prefix SQL and streaming events carry since Spark 2.

    >>> short_event_name("org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart")
    'SparkListenerSQLExecutionStart'
    >>> short_event_name("org.apache.spark.sql.streaming.StreamingQueryListener$QueryIdleEvent")
    'QueryIdleEvent'
    """
    return name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def iter_lines(path: Path, app: ParsedApplication) -> Iterator[tuple[int, bytes]]:
    """Yield (1-based line number, line) of one log part, guarding against runaway lines.

    A line split across chunks is held once while it grows (plus one copy when yielded); a
    line longer than MAX_LINE_BYTES is reported once and its rest is dropped as it streams by.
    A decompression failure is recorded as an issue after every decodable line was yielded,
    so a log cut mid-stream is ingested up to the damage.
    """
    pending = bytearray()
    number = 0
    skipping = False
    try:
        for chunk in iter_decompressed(path):
            app.decompressed_bytes += len(chunk)
            pieces = chunk.split(b"\n")
            tail = pieces.pop()
            for piece in pieces:
                number += 1
                if skipping:  # the end of an over-long line: already reported
                    skipping = False
                elif pending:
                    pending += piece
                    yield number, bytes(pending)
                    pending.clear()
                else:
                    yield number, piece
            if not skipping:
                pending += tail
            if len(pending) > MAX_LINE_BYTES:
                _issue(app, str(path), number + 1, f"line longer than {MAX_LINE_BYTES >> 20} MiB")
                pending.clear()
                skipping = True
    except IngestError as exc:
        _issue(app, str(path), None, exc.reason)
    if pending.strip() and not skipping:
        yield number + 1, bytes(pending)


def _issue(app: ParsedApplication, path: str, line: int | None, reason: str) -> None:
    app.bad_lines += line is not None
    if len(app.issues) < MAX_ISSUES_PER_LOG:
        app.issues.append(IngestIssue(path, reason, line))


def _decode(line: bytes) -> dict[str, Any]:
    event = orjson.loads(line)
    if not isinstance(event, dict) or not isinstance(event.get("Event"), str):
        raise ValueError('not a Spark event (no "Event" field)')
    return event


_NAME_CACHE: dict[bytes, str] = {}


def _event_name(line: bytes) -> str | None:
    """Read the short event name without parsing the line (Spark writes "Event" first).

    >>> _event_name(b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"}')
    'SparkListenerSQLExecutionEnd'
    """
    if not line.startswith(b'{"Event":"'):
        return None
    end = line.find(b'"', 10)
    if end < 0:
        return None
    raw = line[10:end]
    name = _NAME_CACHE.get(raw)
    if name is None:  # a handful of distinct names per log: decode each once
        name = _NAME_CACHE[raw] = short_event_name(raw.decode(errors="replace"))
    return name


def _ends_object(line: bytes) -> bool:
    return line.endswith(b"}") or line.rstrip().endswith(b"}")


def _handle_line(app: ParsedApplication, path: Path, number: int, line: bytes) -> None:
    if len(line) > _BIG_LINE and not line[-4096:].rstrip().endswith(b"}"):
        # orjson's error path copies a failing document about 12 times (600 MB for a 50 MB
        # line); a cut or garbage giant line is recognisable from its end alone.
        reason = f"invalid JSON: {len(line)}-byte line does not end with '}}' (cut or not JSON)"
        _issue(app, str(path), number, reason)
        return
    name = _event_name(line)
    if name in KNOWN_UNUSED and _ends_object(line):
        app.events += 1  # unread, but a line cut short is still parsed below to report it
        return
    try:
        event = _fast_task_end(line) if name == "SparkListenerTaskEnd" else None
        event = event or _decode(line)
        name = short_event_name(event["Event"])
        handler = HANDLERS.get(name)
        if handler is None:
            if name not in KNOWN_UNUSED:
                app.unknown_events[name] += 1
        elif name != "SparkListenerTaskEnd" or not _add_good_task_end(app, event):
            _refuse_bad_fields(path, number, name, event)
            handler(app, event)
        app.events += 1
    except IngestError:
        raise
    except orjson.JSONDecodeError as exc:
        _issue(app, str(path), number, f"invalid JSON: {exc}")
    except KeyError as exc:
        _issue(app, str(path), number, f"{name or 'event'} is missing field {exc}")
    except Exception as exc:  # one line's surprise must not stop the log, let alone the batch
        detail = f"{type(exc).__name__}: {exc}"
        _issue(app, str(path), number, f"{name or 'event'} has an unexpected shape: {detail}")


def _refuse_bad_fields(path: Path, number: int, name: str, event: dict[str, Any]) -> None:
    """Refuse the log when a field its handler reads holds what Spark never writes there.

    Raises:
        IngestError: naming the part, the line and the field (see :mod:`event_fields`).
    """
    problem = check_fields(name, event)
    if problem is not None:
        raise IngestError(str(path), f"{name} {problem.reason}; log not ingested", number)


def _fast_task_end(line: bytes) -> dict[str, Any] | None:
    """Parse a TaskEnd without its large ``Accumulables`` list (85 % of a log's bytes).

    Spark writes Task Info's scalar fields before ``Accumulables`` and ``Task Metrics`` last;
    when the line does not have that shape, None makes the caller parse the whole line.
    """
    if not line.endswith(b"}"):
        line = line.rstrip()
    info_at = line.find(b',"Task Info":{')
    acc_at = line.find(b',"Accumulables":', info_at)
    metrics_at = line.rfind(b',"Task Metrics":')
    if min(info_at, acc_at, metrics_at) < 0 or not acc_at < metrics_at or line[-1:] != b"}":
        return None
    try:
        head = orjson.loads(line[:info_at] + b"}")
        info = orjson.loads(line[info_at + 13 : acc_at] + b"}")
        metrics = orjson.loads(line[metrics_at + 16 : -1])
    except orjson.JSONDecodeError:
        return None
    if "Finish Time" not in info or not isinstance(head, dict):
        return None
    head["Task Info"] = info
    head["Task Metrics"] = metrics
    return head


def parse_event_log(source: LogSource | Path) -> ParsedApplication:
    """Parse one application's event log (all parts of a rolled log, in order).

    Raises:
        IngestError: nothing usable: unreadable, empty, wrong codec, or no Spark events; or an
            event holds a value Spark never writes in a field the parser reads (the error
            names the line and the field: such a log is refused whole).
    """
    src = source if isinstance(source, LogSource) else LogSource((source,))
    app = ParsedApplication(path=str(src.path))
    for part in src.parts:
        for number, line in iter_lines(part, app):
            app.lines += 1
            if line and not line.isspace():
                _handle_line(app, part, number, line)
    _require_events(app, src)
    app.finalize()
    return app


def _require_events(app: ParsedApplication, src: LogSource) -> None:
    if app.events:
        if app.app_id is None:
            _identify_from_properties(app, src)
        return
    reasons = "; ".join(dict.fromkeys(i.reason for i in app.issues))
    if app.decompressed_bytes == 0:
        raise IngestError(app.path, reasons or "empty file")
    raise IngestError(app.path, "no Spark events found" + (f" ({reasons})" if reasons else ""))


def _identify_from_properties(app: ParsedApplication, src: LogSource) -> None:
    """Name an application whose log lacks its ApplicationStart (cut head, copied logs)."""
    props = app.spark_properties
    app.app_id = props.get("spark.app.id") or src.path.name.removesuffix(".inprogress")
    app.app_name = app.app_name or props.get("spark.app.name")
    origin = "spark.app.id" if "spark.app.id" in props else "the file name"
    _issue(app, app.path, None, f"no SparkListenerApplicationStart: id from {origin}")


def parse_or_issue(source: LogSource) -> ParsedApplication | IngestIssue:
    """Parse a log, or describe why it cannot be (picklable either way, for worker processes).

    Any failure is this log's: a bug the lines reveal is reported with the log's path rather
    than raised out of a worker process, where it would stop the whole batch.
    """
    try:
        return parse_event_log(source)
    except IngestError as exc:
        return IngestIssue(exc.path, exc.reason, exc.line, fatal=True)
    except Exception as exc:
        reason = f"cannot parse: {type(exc).__name__}: {exc}"
        return IngestIssue(str(source.path), reason, fatal=True)
