"""A known event with a wrongly typed or out-of-range field: that log is refused, the batch goes on.

The bad logs are real logs with one field edited. Such a value used to reach the row builder
(``ts("yesterday")``, ``fromtimestamp(1e300)``) and stop the whole batch with a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from autofe.ingest.event_logs import ingest_event_logs
from autofe.schema import IngestReport
from autofe.warehouse.connect import open_warehouse

BASE = "sparklens/local-1532512550423"
"""Spark 2.3, plain, 8 tasks: the log each bad one is derived from."""
GOOD = ("dr-elephant/event_log_1", "sparklint/spark_event_log_example")

EDITS: list[Any] = [
    pytest.param("SparkListenerJobStart", ("Submission Time",), "yesterday", id="time-as-text"),
    pytest.param("SparkListenerApplicationEnd", ("Timestamp",), "later", id="end-as-text"),
    pytest.param("SparkListenerApplicationEnd", ("Timestamp",), 1e300, id="end-1e300"),
    pytest.param("SparkListenerJobStart", ("Job ID",), None, id="null-job-id"),
    pytest.param("SparkListenerStageCompleted", ("Stage Info", "Stage ID"), 2**40, id="stage-2^40"),
    pytest.param("SparkListenerTaskEnd", ("Task Metrics", "JVM GC Time"), 1e300, id="metric-1e300"),
    pytest.param("SparkListenerTaskEnd", ("Task Info", "Failed"), "no", id="flag-as-text"),
    pytest.param("SparkListenerApplicationStart", ("App Name",), {"a": 1}, id="name-object"),
]


def _edited(lines: list[bytes], event: str, path: tuple[str, ...], value: Any) -> tuple[bytes, int]:
    """The log with ``path`` of the first ``event`` set to ``value``, and that line's number."""
    index = next(i for i, line in enumerate(lines) if orjson.loads(line)["Event"] == event)
    parsed = orjson.loads(lines[index])
    holder = parsed
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    out = [*lines[:index], orjson.dumps(parsed), *lines[index + 1 :]]
    return b"".join(line + b"\n" for line in out), index + 1


def _sources(con: duckdb.DuckDBPyConnection, table: str, column: str) -> set[str]:
    return {p for (p,) in con.execute(f"SELECT {column} FROM {table}").fetchall()}


@pytest.mark.parametrize(("event", "path", "value"), EDITS)
def test_a_bad_field_refuses_its_log_naming_line_and_field_and_the_batch_goes_on(
    tmp_path: Path, eventlogs: Path, event: str, path: tuple[str, ...], value: Any
) -> None:
    original = (eventlogs / BASE).read_bytes()
    data, line = _edited(original.splitlines(), event, path, value)
    bad = tmp_path / "bad"
    bad.write_bytes(data)
    good, good2 = (eventlogs / g for g in GOOD)
    con = open_warehouse(tmp_path / "w.duckdb")
    try:
        report = IngestReport()
        ingest_event_logs(con, [good, bad, good2], report)

        [issue] = [i for i in report.issues if i.fatal]
        assert (issue.path, issue.line) == (str(bad), line)
        assert issue.reason.startswith(f"{event} field '{'.'.join(path)}' ")
        assert issue.reason.endswith("; log not ingested")
        assert report.applications == 2
        stored = {str(good), str(good2)}
        assert _sources(con, "applications", "source_path") == stored
        assert _sources(con, "ingested_files", "path") == stored
        assert _sources(con, "ingest_issues", "path") >= {str(bad)}

        bad.write_bytes(original)  # fixed: the next ingest stores it
        again = IngestReport()
        ingest_event_logs(con, [good, bad, good2], again)
        assert (again.applications, again.files_unchanged, again.issues) == (1, 2, [])
    finally:
        con.close()
