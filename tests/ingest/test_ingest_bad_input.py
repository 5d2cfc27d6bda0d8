"""Damaged inputs next to good logs: each is reported, the good ones are stored in full.

Every bad file is built in ``tmp_path`` at test time from a real corpus log (nothing large is
committed). "Unreadable" is a ``chmod 000`` file when that blocks reading; as root it does
not, so a dangling symlink named like a log stands in for it.
"""

from __future__ import annotations

import gzip
import os
import random
import re
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
import zstandard

import autofe.ingest.event_logs as pipeline
from autofe.ingest.event_logs import ingest_event_logs
from autofe.ingest.eventlog.parse import parse_event_log
from autofe.schema import IngestIssue, IngestReport
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.write import insert_rows

BASE = "sparklens/local-1532512550423"
"""Spark 2.3, plain, 8 tasks: the log every bad file is derived from."""
GOOD = ("dr-elephant/event_log_1", "sparklint/spark_event_log_example")
APP_CHILD_TABLES = ("spark_jobs", "stages", "sql_executions", "executors")
HUGE = 50 << 20


@dataclass(frozen=True)
class Bad:
    """One damaged input and what the report must say about it."""

    path: Path
    reason: str
    """Regex the issue's reason must match."""
    line: int | None
    fatal: bool


@pytest.fixture
def con(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = open_warehouse(tmp_path / "w.duckdb")
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def base_lines(eventlogs: Path) -> list[bytes]:
    return (eventlogs / BASE).read_bytes().splitlines()


def _write(path: Path, lines: Sequence[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def _line_of(lines: Sequence[bytes], event: bytes, nth: int = 0) -> int:
    """0-based index of the nth line of an event type."""
    found = [i for i, line in enumerate(lines) if line.startswith(b'{"Event":"' + event + b'"')]
    return found[nth]


def _unreadable(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    locked = d / "app-locked"
    locked.write_bytes(data)
    locked.chmod(0)
    if not os.access(locked, os.R_OK):
        return [Bad(locked, r"^cannot read: Permission denied$", None, fatal=True)]
    locked.unlink()  # root reads anything: a dangling symlink named like a log instead
    gone = d / "app-gone.zstd"
    gone.symlink_to(d / "nowhere.zstd")
    return [Bad(gone, r"^cannot read: No such file or directory$", None, fatal=True)]


def _wrong_codec(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    wrong = d / "app-gzip.zstd"
    wrong.write_bytes(gzip.compress(data))
    return [Bad(wrong, r"^named \.zstd but content is not zstd .*looks like gzip\)$", None, True)]


def _binary_blob(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    blob = d / "app-blob"
    blob.write_bytes(random.Random(7).randbytes(256 << 10))
    return [Bad(blob, r"^no Spark events found \(invalid JSON: ", None, fatal=True)]


def _empty(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    (d / "app-empty").touch()
    return [Bad(d / "app-empty", r"^empty file$", None, fatal=True)]


def _huge_line(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    """A TaskEnd's valid JSON start, padded to 50 MB without its end, then the good lines."""
    at = _line_of(lines, b"SparkListenerTaskEnd")
    huge = _write(d / "app-huge-line", [*lines[:at], lines[at][:120] + b" " * HUGE, *lines[at:]])
    reason = r"^invalid JSON: \d{8}-byte line does not end with '\}' \(cut or not JSON\)$"
    return [Bad(huge, reason, at + 1, fatal=False)]


def _missing_fields(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    edited = list(lines)
    bads = []
    for event, field in (
        (b"SparkListenerTaskEnd", "Stage ID"),
        (b"SparkListenerJobStart", "Job ID"),
    ):
        index = _line_of(edited, event)
        parsed = orjson.loads(edited[index])
        del parsed[field]
        edited[index] = orjson.dumps(parsed)
        reason = f"^{event.decode()} is missing field '{field}'$"
        bads.append(Bad(d / "app-missing-fields", reason, index + 1, fatal=False))
    _write(d / "app-missing-fields", edited)
    return bads


def _cut_mid_line(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    kept = data[: len(data) * 2 // 3]
    (d / "app-cut").write_bytes(kept)
    return [Bad(d / "app-cut", r"^invalid JSON: ", kept.count(b"\n") + 1, fatal=False)]


def _cut_mid_stream(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    (d / "app-cut.zstd").write_bytes(_zstd_in_blocks(lines)[:-100])  # inside its last block
    reason = r"^compressed stream truncated after \d+ decompressed bytes"
    return [Bad(d / "app-cut.zstd", reason, None, fatal=False)]


def _inprogress(d: Path, data: bytes, lines: list[bytes]) -> list[Bad]:
    """A running application's log: no ApplicationEnd, last line still being written."""
    kept = data[: len(data) // 2]
    running = d / "local-1532512550423.inprogress"
    running.write_bytes(kept)
    return [Bad(running, r"^invalid JSON: ", kept.count(b"\n") + 1, fatal=False)]


BAD_INPUTS = (
    _unreadable,
    _wrong_codec,
    _binary_blob,
    _empty,
    _huge_line,
    _missing_fields,
    _cut_mid_line,
    _cut_mid_stream,
    _inprogress,
)


def _zstd_in_blocks(lines: Sequence[bytes]) -> bytes:
    """One zstd frame flushed every 8 lines, as Spark's buffered stream writes it."""
    compressor = zstandard.ZstdCompressor().compressobj()
    out = []
    for start in range(0, len(lines), 8):
        out.append(compressor.compress(b"".join(x + b"\n" for x in lines[start : start + 8])))
        out.append(compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
    out.append(compressor.flush())
    return b"".join(out)


def _app_rows(con: duckdb.DuckDBPyConnection, path: Path) -> list[tuple[Any, ...]]:
    return con.execute(
        "SELECT app_key, complete, bad_lines, num_tasks FROM applications WHERE source_path = ?",
        [str(path)],
    ).fetchall()


def _matching(issues: list[IngestIssue], bad: Bad) -> list[IngestIssue]:
    return [
        i
        for i in issues
        if i.path == str(bad.path)
        and i.line == bad.line
        and i.fatal == bad.fatal
        and re.search(bad.reason, i.reason)
    ]


def _orphans(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """Child rows whose application is not stored: a fatal input must leave none."""
    return [
        row
        for t in APP_CHILD_TABLES
        for row in con.execute(
            f"SELECT * FROM {t} WHERE app_key NOT IN (SELECT app_key FROM applications)"
        ).fetchall()
    ]


def test_a_batch_of_damaged_logs_next_to_good_ones(
    con: duckdb.DuckDBPyConnection,
    corpus_warehouse: Path,
    eventlogs: Path,
    base_lines: list[bytes],
    tmp_path: Path,
) -> None:
    batch = tmp_path / "batch"
    batch.mkdir()
    data = (eventlogs / BASE).read_bytes()
    bads = [bad for build in BAD_INPUTS for bad in build(batch, data, base_lines)]
    report = IngestReport()
    ingest_event_logs(con, [batch, *(eventlogs / g for g in GOOD)], report)

    unexplained = [b for b in bads if len(_matching(report.issues, b)) != 1]
    assert unexplained == [], report.issues
    fatal = [b.path for b in bads if b.fatal]
    for path in fatal:
        assert _app_rows(con, path) == []
    recorded = con.execute("SELECT path FROM ingest_issues WHERE fatal").fetchall()
    assert sorted(p for (p,) in recorded) == sorted(str(p) for p in fatal)

    kept = {b.path for b in bads if not b.fatal}
    assert report.applications == len(kept) + len(GOOD)
    assert _orphans(con) == []
    huge = _app_rows(con, batch / "app-huge-line")
    assert [row[1:] for row in huge] == [(True, 1, 8)]
    missing = _app_rows(con, batch / "app-missing-fields")
    assert [row[1:] for row in missing] == [(True, 2, 7)]
    for name in ("app-cut", "app-cut.zstd", "local-1532512550423.inprogress"):
        [(_, complete, _, tasks)] = _app_rows(con, batch / name)
        assert complete is False and tasks < 8

    reference = duckdb.connect(str(corpus_warehouse), read_only=True)
    try:
        for good in GOOD:
            [(key, *_)] = _app_rows(con, eventlogs / good)
            for table in ("applications", *APP_CHILD_TABLES):
                sql = f"SELECT * FROM {table} WHERE app_key = ? ORDER BY ALL"
                assert (
                    con.execute(sql, [key]).fetchall() == reference.execute(sql, [key]).fetchall()
                )
    finally:
        reference.close()


def _huge_valid_task_end(lines: list[bytes]) -> bytes:
    event = orjson.loads(lines[_line_of(lines, b"SparkListenerTaskEnd")])
    event["Task Info"]["Accumulables"] = [{"ID": 1, "Name": "blob", "Value": "x" * HUGE}]
    return orjson.dumps(event)


def _huge_garbage(lines: list[bytes]) -> bytes:
    return b"{" + random.Random(3).randbytes(1024).replace(b"\n", b" ") * (HUGE >> 10)


LONG_LINES: list[Any] = [
    pytest.param(_huge_valid_task_end, 0, None, id="valid-50MB-event-parses"),
    pytest.param(_huge_garbage, 0, "invalid JSON", id="garbage-50MB"),
    pytest.param(_huge_valid_task_end, 1 << 20, "line longer than 1 MiB", id="over-max-length"),
]


@pytest.mark.parametrize(("make", "max_line", "reason"), LONG_LINES)
def test_a_50mb_line_is_parsed_or_reported_without_copies(
    base_lines: list[bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[list[bytes]], bytes],
    max_line: int,
    reason: str | None,
) -> None:
    """A valid event under MAX_LINE_BYTES parses; garbage or an over-long line is one issue.

    The line goes in before the log's first TaskEnd; a valid one is a (ninth) TaskEnd.
    """
    if max_line:
        monkeypatch.setattr("autofe.ingest.eventlog.parse.MAX_LINE_BYTES", max_line)
    at = _line_of(base_lines, b"SparkListenerTaskEnd")
    extra = make(base_lines)
    log = _write(tmp_path / "app-long", [*base_lines[:at], extra, *base_lines[at:]])
    tracemalloc.start()
    try:
        app = parse_event_log(log)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * len(extra)  # the line is held at most twice
    tasks, bad_lines = (8, 1) if reason else (9, 0)
    assert (app.task_count, app.bad_lines, app.end_ms is not None) == (tasks, bad_lines, True)
    if reason is None:
        assert app.issues == []
    else:
        [issue] = app.issues
        assert (issue.line, issue.reason.startswith(reason)) == (at + 1, True), issue


def _failing_stage_insert(target: str) -> Callable[..., int]:
    real = insert_rows

    def failing(con: duckdb.DuckDBPyConnection, table: str, rows: Any, **kw: Any) -> int:
        if table == "stages" and any(r["app_key"] == target for r in rows):
            raise duckdb.Error("disk full (simulated)")
        return real(con, table, rows, **kw)

    return failing


def test_a_failure_while_storing_leaves_nothing_of_that_app(
    con: duckdb.DuckDBPyConnection, eventlogs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = [eventlogs / g for g in (*GOOD, BASE)]
    victim = pipeline.app_key(parse_event_log(eventlogs / BASE))
    monkeypatch.setattr(pipeline, "insert_rows", _failing_stage_insert(victim))
    report = IngestReport()
    ingest_event_logs(con, logs, report)

    assert [(i.path, i.fatal) for i in report.issues] == [(str(eventlogs / BASE), True)]
    reason = report.issues[0].reason
    assert re.search(r"^cannot store .*local-1532512550423: disk full \(simulated\)$", reason)
    assert report.applications == 2
    for table in ("applications", *APP_CHILD_TABLES):
        rows = con.execute(f"SELECT count(*) FROM {table} WHERE app_key = ?", [victim]).fetchone()
        assert rows == (0,), table
    assert con.execute(
        "SELECT count(*) FROM runs WHERE run_id = ?", [f"app:{victim}"]
    ).fetchone() == (0,)
    ledger = con.execute("SELECT path FROM ingested_files ORDER BY path").fetchall()
    assert ledger == sorted((str(eventlogs / g),) for g in GOOD)
    for good in GOOD:
        [(key, complete, _, tasks)] = _app_rows(con, eventlogs / good)
        stages = con.execute("SELECT sum(task_count) FROM stages WHERE app_key = ?", [key])
        assert complete and stages.fetchone() == (tasks,)

    monkeypatch.undo()
    retry = IngestReport()
    ingest_event_logs(con, logs, retry)
    assert (retry.applications, retry.files_unchanged) == (1, 2)
    assert [row[1:] for row in _app_rows(con, eventlogs / BASE)] == [(True, 0, 8)]


@pytest.mark.parametrize("finish", ["regrown", "renamed"])
def test_an_inprogress_log_is_replaced_when_it_grows(
    con: duckdb.DuckDBPyConnection, eventlogs: Path, tmp_path: Path, finish: str
) -> None:
    data = (eventlogs / BASE).read_bytes()
    logs = tmp_path / "logs"
    logs.mkdir()
    running = logs / "local-1532512550423.inprogress"
    running.write_bytes(data[: data.index(b"\n", len(data) // 2) + 1])  # whole lines only
    ingest_event_logs(con, [logs], IngestReport())
    [(key, complete, _, tasks)] = _app_rows(con, running)
    assert complete is False and tasks < 8

    final = running
    if finish == "renamed":  # what Spark does when the application ends
        running.unlink()
        final = logs / "local-1532512550423"
    final.write_bytes(data)
    report = IngestReport()
    ingest_event_logs(con, [logs], report)

    assert (report.applications, report.issues) == (1, [])
    assert _app_rows(con, final) == [(key, True, 0, 8)]
    for table in ("applications", "runs"):
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone() == (1,)
    stages = con.execute("SELECT count(*), sum(task_count) FROM stages WHERE app_key = ?", [key])
    assert stages.fetchone() == (2, 8)
