"""Aggregate SparkListenerTaskEnd metrics per stage attempt, across Spark versions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


def _metric_tuple(m: dict[str, Any]) -> tuple[Any, ...]:
    """Pull the metrics in SUMMED + MAXED order; written flat because it runs once per task."""
    g = m.get
    inp = g("Input Metrics") or _EMPTY
    out = g("Output Metrics") or _EMPTY
    sr = g("Shuffle Read Metrics") or _EMPTY
    sw = g("Shuffle Write Metrics") or _EMPTY
    return (
        g("Executor Run Time") or 0,
        g("Executor CPU Time") or 0,
        g("Executor Deserialize Time") or 0,
        g("JVM GC Time") or 0,
        inp.get("Bytes Read") or 0,
        inp.get("Records Read") or 0,
        out.get("Bytes Written") or 0,
        out.get("Records Written") or 0,
        sr.get("Remote Bytes Read") or 0,
        sr.get("Local Bytes Read") or 0,
        sr.get("Total Records Read") or 0,
        sr.get("Fetch Wait Time") or 0,
        sw.get("Shuffle Bytes Written") or 0,
        sw.get("Shuffle Records Written") or 0,
        sw.get("Shuffle Write Time") or 0,
        g("Memory Bytes Spilled") or 0,
        g("Disk Bytes Spilled") or 0,
        g("Result Size") or 0,
        g("Peak Execution Memory") or 0,
    )


def add_task_end(tasks: StageTasks, event: dict[str, Any]) -> None:
    """Fold one TaskEnd event into its stage's aggregates."""
    info = event["Task Info"]
    reason = (event.get("Task End Reason") or _EMPTY).get("Reason")
    finish, launch = info.get("Finish Time") or 0, info.get("Launch Time") or 0
    duration = max(finish - launch, 0) if finish else 0
    metrics = _metric_tuple(event.get("Task Metrics") or _EMPTY)
    # Nothing is counted until every field was read, so a malformed event leaves no trace.
    tasks.count += 1
    tasks.failed += bool(info.get("Failed"))
    tasks.killed += bool(info.get("Killed")) or reason == "TaskKilled"
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
