"""Aggregate SparkListenerTaskEnd metrics per stage attempt, across Spark versions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autofe.ingest.eventlog.fields import MAX_EPOCH_MS, METRIC_LIMIT

_EMPTY: dict[str, Any] = {}

# Column order of the tuple kept per task; the same metric names are used from Spark 1.5 to
# 4.x, and a section a version or task lacks (no shuffle read) counts as zero.
SUMMED: tuple[str, ...] = (
    "executor_run_time_ms",
    "executor_cpu_time_ns",
    "executor_deserialize_time_ms",
    "gc_time_ms",
    "input_bytes",
    "input_records",
    "output_bytes",
    "output_records",
    "shuffle_remote_bytes",
    "shuffle_local_bytes",
    "shuffle_read_records",
    "shuffle_fetch_wait_ms",
    "shuffle_write_bytes",
    "shuffle_write_records",
    "shuffle_write_time_ns",
    "memory_spilled_bytes",
    "disk_spilled_bytes",
)
MAXED: tuple[str, ...] = ("result_size_max", "peak_execution_memory_max")


@dataclass
class StageTasks:
    """The tasks of one stage attempt: counts, durations and one metric tuple per task."""

    count: int = 0
    failed: int = 0
    killed: int = 0
    durations: list[int] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)


_SECTIONS = ("Input Metrics", "Output Metrics", "Shuffle Read Metrics", "Shuffle Write Metrics")
_OBJECTS = {dict}
_WHOLE = {int}


def _metric_values(
    m: dict[str, Any],
    inp: dict[str, Any],
    out: dict[str, Any],
    sr: dict[str, Any],
    sw: dict[str, Any],
) -> tuple[Any, ...]:
    """The metrics in SUMMED + MAXED order as written (an absent one as 0), from the metrics
    object and its four sections; written flat because it runs once per task."""
    g = m.get
    return (
        g("Executor Run Time", 0),
        g("Executor CPU Time", 0),
        g("Executor Deserialize Time", 0),
        g("JVM GC Time", 0),
        inp.get("Bytes Read", 0),
        inp.get("Records Read", 0),
        out.get("Bytes Written", 0),
        out.get("Records Written", 0),
        sr.get("Remote Bytes Read", 0),
        sr.get("Local Bytes Read", 0),
        sr.get("Total Records Read", 0),
        sr.get("Fetch Wait Time", 0),
        sw.get("Shuffle Bytes Written", 0),
        sw.get("Shuffle Records Written", 0),
        sw.get("Shuffle Write Time", 0),
        g("Memory Bytes Spilled", 0),
        g("Disk Bytes Spilled", 0),
        g("Result Size", 0),
        g("Peak Execution Memory", 0),
    )


def _metric_tuple(m: dict[str, Any]) -> tuple[Any, ...]:
    """The metrics in SUMMED + MAXED order, a null one (or a null section) as 0."""
    g = m.get
    sections = (g(name) or _EMPTY for name in _SECTIONS)
    return tuple([v or 0 for v in _metric_values(m, *sections)])


def add_task_end(tasks: StageTasks, event: dict[str, Any]) -> None:
    """Fold one TaskEnd event into its stage's aggregates."""
    info = event["Task Info"]
    reason = (event.get("Task End Reason") or _EMPTY).get("Reason")
    finish, launch = info.get("Finish Time") or 0, info.get("Launch Time") or 0
    duration = max(finish - launch, 0) if finish else 0
    metrics = _metric_tuple(event.get("Task Metrics") or _EMPTY)
    # Nothing is counted until every field was read, so a malformed event leaves no trace.
    killed = bool(info.get("Killed")) or reason == "TaskKilled"
    _fold(tasks, duration, bool(info.get("Failed")), killed, metrics)


def add_good_task_end(tasks: StageTasks, event: dict[str, Any]) -> bool:
    """Fold a TaskEnd if every field it reads below Task Info, Task End Reason and Task
    Metrics holds what Spark writes there; False, with nothing changed, otherwise.

    The fast path of the field check (:mod:`autofe.ingest.eventlog.fields`) for the event that
    is most of a log: the values are checked as they are read for the fold, a few C-level
    calls for all 19 metrics, instead of a second reading. Any doubt (a null, a wrong type, a
    number out of range, a missing Task Info) answers False, and the caller has
    ``check_fields`` name the problem, or, when there is none (a null reads as absent), folds
    the event with :func:`add_task_end`: verdicts and aggregates are those of the slow path.
    """
    g = event.get
    info: Any = g("Task Info")  # absent: False, and the handler reports it missing
    reason, m = g("Task End Reason", _EMPTY), g("Task Metrics", _EMPTY)
    if type(m) is not dict:
        return False
    sections = tuple(map(m.get, _SECTIONS, (_EMPTY, _EMPTY, _EMPTY, _EMPTY)))
    if set(map(type, (info, reason, *sections))) != _OBJECTS:
        return False
    i = info.get
    launch, finish = i("Launch Time", 0), i("Finish Time", 0)
    failed, killed = i("Failed", False), i("Killed", False)
    text = reason.get("Reason", "")
    metrics = _metric_values(m, *sections)
    if (
        set(map(type, metrics)) != _WHOLE
        or min(metrics) < -METRIC_LIMIT
        or max(metrics) > METRIC_LIMIT
        or type(launch) is not int
        or type(finish) is not int
        or not 0 <= launch <= MAX_EPOCH_MS
        or not 0 <= finish <= MAX_EPOCH_MS
        or type(failed) is not bool
        or type(killed) is not bool
        or type(text) is not str
    ):
        return False
    duration = max(finish - launch, 0) if finish else 0
    _fold(tasks, duration, failed, killed or text == "TaskKilled", metrics)
    return True


def _fold(
    tasks: StageTasks, duration: int, failed: bool, killed: bool, metrics: tuple[Any, ...]
) -> None:
    tasks.count += 1
    tasks.failed += failed
    tasks.killed += killed
    tasks.durations.append(duration)
    tasks.rows.append(metrics)


def quantile(sorted_values: list[int], q: float) -> float | None:
    """Linear-interpolated quantile of an already sorted list.

    >>> quantile([1, 2, 3, 4], 0.5)
    2.5
    >>> quantile([], 0.9) is None
    True
    """
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _as_int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _columns(rows: list[tuple[Any, ...]]) -> list[tuple[int, ...]]:
    width = len(SUMMED) + len(MAXED)
    if not rows:
        return [()] * width
    cols = list(zip(*rows, strict=True))
    try:
        sum(map(sum, cols))
    except TypeError:  # a log wrote a metric as a string or object: count it as zero
        cols = [tuple(map(_as_int, c)) for c in cols]
    return cols


def stage_metric_row(tasks: StageTasks) -> dict[str, Any]:
    """The stage table's task-aggregate columns for one stage attempt."""
    d = sorted(tasks.durations)
    cols = _columns(tasks.rows)
    s = {name: sum(col) for name, col in zip(SUMMED, cols, strict=False)}
    row: dict[str, Any] = {
        "task_count": tasks.count,
        "failed_tasks": tasks.failed,
        "killed_tasks": tasks.killed,
        "task_duration_sum_ms": sum(d),
        "task_duration_min_ms": d[0] if d else None,
        "task_duration_p50_ms": quantile(d, 0.5),
        "task_duration_p90_ms": quantile(d, 0.9),
        "task_duration_max_ms": d[-1] if d else None,
        "shuffle_read_bytes": s.pop("shuffle_remote_bytes") + s.pop("shuffle_local_bytes"),
        **s,
    }
    for name, col in zip(MAXED, cols[len(SUMMED) :], strict=True):
        row[name] = max(col, default=0)
    return row
