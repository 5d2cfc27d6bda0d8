"""Pure pieces of the event-log parser: names, quantiles, log discovery, metric field names."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
import zstandard
from fifos import released

from autofe.errors import IngestError, PathNotAllowed
from autofe.ingest.eventlog.codecs import iter_decompressed
from autofe.ingest.eventlog.files import LogSource, find_event_logs, rolled_parts
from autofe.ingest.eventlog.parse import (
    ParsedApplication,
    _event_name,
    _fast_task_end,
    iter_lines,
    parse_event_log,
    short_event_name,
)
from autofe.ingest.eventlog.task_metrics import StageTasks, add_task_end, quantile, stage_metric_row
from autofe.tools.summarize_event_log import summarize_event_log

NDS_Q72 = "spark-rapids-tools/spark-events-qualification/nds_q72_dataproc_2_2.zstd"
V2_DIR = "spark-rapids-tools/spark-events-qualification/eventlog_v2_local-1623876083964"
DB_DIR = "spark-rapids-tools/spark-events-qualification/db_sim_eventlog"


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("SparkListenerTaskEnd", "SparkListenerTaskEnd"),
        (
            "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
            "SparkListenerSQLExecutionStart",
        ),
        (
            "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate",
            "SparkListenerSQLAdaptiveExecutionUpdate",
        ),
        (
            "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent",
            "QueryProgressEvent",
        ),
        ("StreamingQueryListener$QueryIdleEvent", "QueryIdleEvent"),
    ],
)
def test_short_event_name(name: str, short: str) -> None:
    assert short_event_name(name) == short


@pytest.mark.parametrize(
    ("line", "name"),
    [
        (b'{"Event":"SparkListenerTaskEnd","Stage ID":0}', "SparkListenerTaskEnd"),
        (
            b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd","time":1}',
            "SparkListenerSQLExecutionEnd",
        ),
        (b'{"Stage ID":0,"Event":"SparkListenerTaskEnd"}', None),  # not first: parse the line
        (b'{"Event": "SparkListenerTaskEnd"}', None),  # not Spark's compact form
        (b'{"Event":"SparkListenerTaskEnd', None),  # cut inside the name
        (b"\x00\xff garbage", None),
        (b"", None),
    ],
)
def test_event_name_reads_only_a_leading_event_field(line: bytes, name: str | None) -> None:
    assert _event_name(line) == name


def test_events_with_reordered_fields_are_still_parsed(tmp_path: Path) -> None:
    """The name shortcut is only a shortcut: an event whose "Event" is not first still counts."""
    log = tmp_path / "app"
    events = [
        {"App Name": "a", "Event": "SparkListenerApplicationStart", "App ID": "x", "Timestamp": 5},
        {"Stage ID": 3, "Event": "SparkListenerTaskEnd", "Task Info": {"Finish Time": 9}},
        {"Timestamp": 12, "Event": "SparkListenerApplicationEnd"},
    ]
    log.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    app = parse_event_log(log)
    assert (app.app_id, app.start_ms, app.end_ms, app.task_count) == ("x", 5, 12, 1)
    assert app.issues == []


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1, 2, 3, 4], 0.5, 2.5),
        ([7], 0.9, 7),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9, 9.1),
        ([3, 5], 0.0, 3),
        ([3, 5], 1.0, 5),
        ([], 0.5, None),
    ],
)
def test_quantile(values: list[int], q: float, expected: float | None) -> None:
    result = quantile(values, q)
    assert result == (pytest.approx(expected) if expected is not None else None)


def test_find_event_logs_on_the_corpus(eventlogs: Path) -> None:
    sources = find_event_logs(eventlogs)
    assert len(sources) == 41
    paths = [s.path for s in sources]
    assert len(set(paths)) == len(paths)
    assert not [p for p in paths if p.suffix in (".md", ".csv", ".json")]
    rolled = {
        s.path.relative_to(eventlogs).as_posix(): s.parts for s in sources if len(s.parts) > 1
    }
    assert {k: [p.name for p in v] for k, v in rolled.items()} == {
        V2_DIR: ["events_1_local-1623876083964.zstd", "events_2_local-1623876083964.zstd"],
        DB_DIR: ["eventlog-2021-06-15--15-00.gz", "eventlog"],
    }
    assert not any("appstatus" in p.name for s in sources for p in s.parts)


def test_v2_parts_are_ordered_by_number_not_name(tmp_path: Path) -> None:
    v2 = tmp_path / "eventlog_v2_app-1"
    v2.mkdir()
    for name in ("events_10_app-1.zstd", "events_2_app-1.zstd", "events_1_app-1.zstd"):
        (v2 / name).touch()
    (v2 / "appstatus_app-1.inprogress").touch()
    assert [p.name for p in rolled_parts(v2) or ()] == [
        "events_1_app-1.zstd",
        "events_2_app-1.zstd",
        "events_10_app-1.zstd",
    ]
    [source] = find_event_logs(tmp_path)
    assert source.path == v2


def test_databricks_parts_are_ordered_by_time_then_current(tmp_path: Path) -> None:
    db = tmp_path / "cluster-1"
    db.mkdir()
    for name in ("eventlog", "eventlog-2021-06-15--16-00.gz", "eventlog-2021-06-15--15-00.gz"):
        (db / name).touch()
    assert [p.name for p in rolled_parts(db) or ()] == [
        "eventlog-2021-06-15--15-00.gz",
        "eventlog-2021-06-15--16-00.gz",
        "eventlog",
    ]


def test_a_v2_log_split_in_ten_parts_parses_like_one_file(eventlogs: Path, tmp_path: Path) -> None:
    """Parts 1..10 must be read in numeric order: line numbers and the app's events follow it."""
    single = eventlogs / "sparklens/local-1532512550423"
    lines = single.read_bytes().splitlines(keepends=True)
    v2 = tmp_path / "eventlog_v2_local-1532512550423"
    v2.mkdir()
    step = -(-len(lines) // 10)
    for n in range(10):
        (v2 / f"events_{n + 1}_local-1532512550423").write_bytes(
            b"".join(lines[n * step : (n + 1) * step])
        )
    [source] = find_event_logs(v2)
    assert [int(p.name.split("_")[1]) for p in source.parts] == list(range(1, 11))
    rolled, whole = parse_event_log(source), parse_event_log(single)
    assert rolled.lines == whole.lines and rolled.events == whole.events
    assert (rolled.app_id, rolled.start_ms, rolled.end_ms) == (
        whole.app_id,
        whole.start_ms,
        whole.end_ms,
    )
    assert {k: s.metrics for k, s in rolled.stages.items()} == {
        k: s.metrics for k, s in whole.stages.items()
    }
    assert rolled.path == str(v2)


def _task_end_line(path: Path, task_id: int) -> bytes:
    """The TaskEnd line of one task in a real log (any codec)."""
    app = ParsedApplication(path=str(path))
    needle = b'"Task ID":%d,' % task_id
    for _, line in iter_lines(path, app):
        if line.startswith(b'{"Event":"SparkListenerTaskEnd"') and needle in line:
            return line
    raise AssertionError(f"task {task_id} not in {path}")


# Real TaskEnd events, one per metric layout: Spark 1.5 has no CPU time, no peak memory and
# "Data Read Method" in its input metrics; 1.6 adds shuffle sections only when a task shuffles;
# 3.x always writes every section (push-based shuffle fields in 3.2+).
METRIC_LAYOUTS = [
    pytest.param(
        "sparklint/spark_event_log_example",
        1,
        {
            "task_duration_sum_ms": 1466087852118 - 1466087848577,
            "executor_run_time_ms": 2301,
            "executor_cpu_time_ns": 0,
            "executor_deserialize_time_ms": 1192,
            "gc_time_ms": 76,
            "input_bytes": 134283264,
            "input_records": 52818,
            "shuffle_read_bytes": 0,
            "shuffle_write_bytes": 0,
            "result_size_max": 2673,
            "peak_execution_memory_max": 0,
        },
        id="spark-1.5.2-input",
    ),
    pytest.param(
        "sparklint/application_1489705648216_1600",
        54,
        {
            "executor_run_time_ms": 2133,
            "gc_time_ms": 1414,
            "shuffle_read_bytes": 3746649 + 1667960,
            "shuffle_read_records": 16990,
            "shuffle_fetch_wait_ms": 1,
            "output_bytes": 13907364,
            "output_records": 16990,
            "input_bytes": 0,
        },
        id="spark-1.6.1-shuffle-read-output",
    ),
    pytest.param(
        "sparklint/application_1489705648216_1600",
        2,
        {
            "shuffle_write_bytes": 1007460,
            "shuffle_write_time_ns": 18468661,
            "shuffle_write_records": 3134,
            "input_bytes": 983116,
            "input_records": 3134,
        },
        id="spark-1.6.1-shuffle-write",
    ),
    pytest.param(
        NDS_Q72,
        13225,
        {
            "task_duration_sum_ms": 1751494007128 - 1751493983501,
            "executor_run_time_ms": 23602,
            "executor_cpu_time_ns": 21480594877,
            "gc_time_ms": 256,
            "shuffle_read_bytes": 54454767 + 31358541,
            "shuffle_read_records": 7438993,
            "shuffle_write_bytes": 12936428,
            "shuffle_write_time_ns": 144489274,
            "shuffle_write_records": 207909,
            "result_size_max": 28356,
            "peak_execution_memory_max": 765462064,
        },
        id="spark-3.5.3-all-sections",
    ),
]


@pytest.mark.parametrize(("log", "task_id", "expected"), METRIC_LAYOUTS)
def test_metric_field_names_across_spark_versions(
    eventlogs: Path, log: str, task_id: int, expected: dict[str, int]
) -> None:
    line = _task_end_line(eventlogs / log, task_id)
    for event in (orjson.loads(line), _fast_task_end(line)):
        assert event is not None
        tasks = StageTasks()
        add_task_end(tasks, event)
        row = stage_metric_row(tasks)
        assert row["task_count"] == 1 and row["failed_tasks"] == 0
        assert {k: row[k] for k in expected} == expected


def test_fast_task_end_drops_only_what_aggregates_do_not_read(eventlogs: Path) -> None:
    line = _task_end_line(eventlogs / NDS_Q72, 13225)
    full, fast = orjson.loads(line), _fast_task_end(line)
    assert len(full["Task Info"].pop("Accumulables")) > 10
    assert full.pop("Task Executor Metrics")["JVMHeapMemory"] > 0
    assert fast == full


@pytest.mark.parametrize(
    "line",
    [
        b'{"Event":"SparkListenerTaskEnd","Stage ID":0,"Task Metrics":{},"Task Info":{}}',
        b'{"Event":"SparkListenerTaskEnd","Stage ID":0,"Task Info":{"Accumulables":[]}',
        b'{"Event":"SparkListenerTaskEnd","Stage ID":0}',
    ],
)
def test_fast_task_end_declines_unusual_shapes(line: bytes) -> None:
    assert _fast_task_end(line) is None


def test_log_source_path_is_the_directory_for_rolled_logs(tmp_path: Path) -> None:
    assert LogSource((tmp_path / "app-1.zstd",)).path == tmp_path / "app-1.zstd"
    part = tmp_path / "eventlog_v2_a" / "events_1_a"
    assert LogSource((part,)).path == tmp_path / "eventlog_v2_a"


def test_iter_lines_keeps_a_last_line_without_newline(tmp_path: Path) -> None:
    log = tmp_path / "app"
    log.write_bytes(b'{"a":1}\n\n{"b":2}')
    app = ParsedApplication(path=str(log))
    assert list(iter_lines(log, app)) == [(1, b'{"a":1}'), (2, b""), (3, b'{"b":2}')]
    assert app.decompressed_bytes == len(b"".join(iter_decompressed(log)))


def test_a_cut_line_of_an_unread_event_is_still_reported(tmp_path: Path) -> None:
    log = tmp_path / "app"
    log.write_bytes(
        b'{"Event":"SparkListenerApplicationStart","App ID":"a","Timestamp":1}\n'
        b'{"Event":"SparkListenerTaskStart","Stage ID":0,"Task Info":{"Task ID":'
    )
    app = parse_event_log(log)
    assert [(i.line, i.reason.split(":")[0]) for i in app.issues] == [(2, "invalid JSON")]
    assert (app.events, app.bad_lines) == (1, 1)


@pytest.mark.parametrize(
    ("properties", "app_id", "origin"),
    [
        ({"spark.app.id": "local-1", "spark.app.name": "n"}, "local-1", "spark.app.id"),
        ({}, "app-7.zstd", "the file name"),
    ],
)
def test_an_app_without_its_start_event_is_named_from_its_properties(
    tmp_path: Path, properties: dict[str, str], app_id: str, origin: str
) -> None:
    log = tmp_path / "app-7.zstd.inprogress"
    event = {"Event": "SparkListenerEnvironmentUpdate", "Spark Properties": properties}
    log.write_bytes(zstandard.ZstdCompressor().compress(orjson.dumps(event) + b"\n"))
    app = parse_event_log(log)
    assert (app.app_id, app.app_name, app.start_ms) == (
        app_id,
        properties.get("spark.app.name"),
        None,
    )
    assert [i.reason for i in app.issues] == [f"no SparkListenerApplicationStart: id from {origin}"]


def test_a_malformed_task_end_leaves_no_trace() -> None:
    tasks = StageTasks()
    with pytest.raises(TypeError, match="unsupported operand"):
        add_task_end(
            tasks, {"Task Info": {"Finish Time": "late", "Launch Time": 1, "Failed": True}}
        )
    assert (tasks.count, tasks.failed, tasks.durations, tasks.rows) == (0, 0, [], [])


def test_a_finished_log_supersedes_its_inprogress_twin(tmp_path: Path, eventlogs: Path) -> None:
    log = eventlogs / "sparklens" / "local-1532512550423"
    (tmp_path / log.name).write_bytes(log.read_bytes())
    (tmp_path / f"{log.name}.inprogress").write_bytes(log.read_bytes()[:5000])
    (tmp_path / "other.inprogress").write_bytes(log.read_bytes())
    found = [s.parts for s in find_event_logs(tmp_path)]
    assert found == [(tmp_path / log.name,), (tmp_path / "other.inprogress",)]


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "logs" / "app-pipe"
    fifo.parent.mkdir()
    reason = "is a named pipe (FIFO), not a regular file: refused without opening it"
    with released(fifo) as opened:
        with pytest.raises(IngestError, match=re.escape(f"{fifo}: {reason}")):
            parse_event_log(fifo)
        with pytest.raises(PathNotAllowed, match=re.escape(f"{fifo}: {reason}")):
            summarize_event_log(fifo.parent, [tmp_path])  # the MCP tool parse_event_log
    assert opened == []
