"""Property: a bad value in any field the parser reads never escapes, and costs only its own log.

Every (event, field) of ``EVENT_FIELDS`` (the parser's own table, checked against what the
handlers read in ``tests/ingest/eventlog/test_fields.py``) gets values of the wrong type, numbers
out of range, huge strings and NUL bytes, written into one line of a real log. That log is
ingested between two real good ones. Whatever the value, no exception escapes and both good
logs are stored whole. A value Spark never writes there refuses the log: the report names its
file, line and field, and the warehouse holds nothing of it (no rows, no ledger entry). A value
that is merely odd (a NUL byte or a megabyte in a name, a null in an optional field) is stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from autofe.ingest.event_logs import ingest_event_logs
from autofe.ingest.eventlog.fields import (
    EACH,
    EVENT_FIELDS,
    INT32_MAX,
    INT64_MAX,
    MAX_EPOCH_MS,
    METRIC_LIMIT,
    EventField,
)
from autofe.ingest.eventlog.files import find_event_logs
from autofe.ingest.eventlog.parse import ParsedApplication, iter_lines, short_event_name
from autofe.schema import IngestReport
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.tables import TABLES

BASE = "sparklens/local-1532512550423"
"""Spark 2.3, 30 lines; the events it lacks are transplanted from other real logs."""
GOOD = ("dr-elephant/event_log_1", "spark-rapids-tools/spark-events-profiling/spark2-eventlog.zstd")
APP_TABLES = ("applications", "spark_jobs", "stages", "sql_executions", "executors")
FIELDS = [(name, f) for name, fields in EVENT_FIELDS.items() for f in fields]


@dataclass(frozen=True)
class Huge:
    """A megabyte of text, written out only into the log: Hypothesis, reporting a failure,
    shows this instead of a megabyte."""

    size: int = 1 << 20


def _materialized(value: Any) -> Any:
    if isinstance(value, Huge):
        return "x" * value.size
    if isinstance(value, list):
        return [_materialized(v) for v in value]
    return value


HUGE = Huge()


class Cases:
    """The base log's lines, and per table field the line holding that field's object.

    A plain class with a short repr: Hypothesis prints a failing test's arguments, and a
    dataclass it would print whole.
    """

    def __init__(self, lines: tuple[bytes, ...], index: dict[tuple[str, tuple[str, ...]], int]):
        self.lines, self.index = lines, index

    def __repr__(self) -> str:
        return f"<{len(self.index)} cases>"


def _events(path: Path) -> Iterator[bytes]:
    app = ParsedApplication(path=str(path))
    for source in find_event_logs(path):
        for part in source.parts:
            yield from (line for _, line in iter_lines(part, app) if line.strip())


def _name(line: bytes) -> str:
    return short_event_name(orjson.loads(line)["Event"])


def _holders(node: Any, path: tuple[str, ...]) -> list[dict[str, Any]]:
    """The objects that hold the last step of ``path`` (the first element below a ``[]``)."""
    for step in path[:-1]:
        if step == EACH:
            node = node[0] if isinstance(node, list) and node else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
    return [node] if isinstance(node, dict) else []


@pytest.fixture(scope="module")
def base_lines(eventlogs: Path) -> tuple[bytes, ...]:
    """The base log with one real line of each handled event it lacks, before its end."""
    lines = list(_events(eventlogs / BASE))
    missing = set(EVENT_FIELDS) - {_name(line) for line in lines}
    for source in sorted(find_event_logs(eventlogs), key=lambda s: s.path):
        if not missing:
            break
        for line in _events(source.path):
            try:
                name = _name(line)
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
            if name in missing:
                missing.discard(name)
                lines.insert(len(lines) - 1, line)
    assert not missing
    return tuple(lines)


@pytest.fixture(scope="module")
def cases(base_lines: tuple[bytes, ...]) -> Cases:
    """For each table field, the first line of its event holding the field's object."""
    found = {}
    for name, f in FIELDS:
        found[(name, f.path)] = next(
            i
            for i, line in enumerate(base_lines)
            if _name(line) == name and _holders(orjson.loads(line), f.path)
        )
    return Cases(base_lines, found)


@dataclass
class Batch:
    """A warehouse reused across examples (emptied before each), and the logs' paths."""

    con: duckdb.DuckDBPyConnection
    bad: Path
    """The folder the edited logs are written to."""
    good: tuple[Path, ...]
    baseline: dict[str, dict[str, int]]
    """Rows per application table of each good log, ingested alone."""


def _counts(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, int]]:
    """Rows per application table, per log (one query: it runs for every example)."""
    sql = " UNION ALL ".join(
        f"SELECT a.source_path, '{t}', count(*) FROM {t} JOIN applications a USING (app_key) "
        "GROUP BY ALL"
        for t in APP_TABLES
    )
    counts: dict[str, dict[str, int]] = {}
    for source, name, rows in con.execute(sql).fetchall():
        counts.setdefault(source, {})[name] = rows
    return counts


def _empty(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(";".join(f"DELETE FROM {t.name}" for t in TABLES))


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory, eventlogs: Path) -> Iterator[Batch]:
    root = tmp_path_factory.mktemp("fuzz")
    good = tuple(eventlogs / g for g in GOOD)
    con = open_warehouse(":memory:")  # the same schema; no file to sync after each example
    try:
        ingest_event_logs(con, list(good), IngestReport())
        baseline = _counts(con)
        assert {s: c["applications"] for s, c in baseline.items()} == {str(g): 1 for g in good}
        yield Batch(con, root, good, baseline)
    finally:
        con.close()


def _whole(low: int, high: int) -> st.SearchStrategy[Any]:
    near = st.integers(low, min(high, low + 1000)) | st.just(high)
    outside = st.integers(high + 1, high + 2**70) | st.integers(low - 2**70, low - 1)
    return near | outside


NUMBERS = {
    "ms": (0, MAX_EPOCH_MS),
    "int32": (0, INT32_MAX),
    "int64": (0, INT64_MAX),
    "metric": (-METRIC_LIMIT, METRIC_LIMIT),
}
TEXTS = st.text(max_size=20) | st.just("a\x00b") | st.just(HUGE) | st.just("yesterday")
JUNK = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.just(1e300)
    | TEXTS
    | st.lists(st.integers(-5, 5), max_size=3)
    | st.dictionaries(st.text(max_size=4), st.integers(-5, 5), max_size=2)
)


def values(kind: str) -> st.SearchStrategy[Any]:
    """Bad values for a kind, mixed with good ones (so both outcomes are exercised)."""
    if kind in NUMBERS:
        return JUNK | _whole(*NUMBERS[kind])
    if kind == "int_list":
        return JUNK | st.lists(_whole(0, INT32_MAX), max_size=3)
    if kind == "int_text":
        return JUNK | _whole(0, INT64_MAX) | _whole(0, INT64_MAX).map(str)
    if kind == "objects":
        return JUNK | st.lists(JUNK, max_size=2)
    if kind == "properties":
        return JUNK | st.lists(st.lists(TEXTS, min_size=2, max_size=2), max_size=2)
    return JUNK


def acceptable(f: EventField, value: Any) -> bool:
    """What Spark could have written there (or an absent-like null), by this test's reading."""
    value = _materialized(value)
    if value is None:
        return not f.identity
    if f.kind in NUMBERS:
        low, high = NUMBERS[f.kind]
        return type(value) is int and low <= value <= high
    checks = {
        "text": lambda v: isinstance(v, str),
        "flag": lambda v: isinstance(v, bool),
        "object": lambda v: isinstance(v, dict),
        "objects": lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
        "int_list": lambda v: (
            isinstance(v, list) and all(type(x) is int and 0 <= x <= INT32_MAX for x in v)
        ),
        "properties": lambda v: (
            isinstance(v, dict)
            or (isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 for p in v))
        ),
        "int_text": lambda v: (
            (type(v) is int and 0 <= v <= INT64_MAX)
            or (
                isinstance(v, str)
                and (v == "" or (v.isascii() and v.isdigit() and int(v) <= INT64_MAX))
            )
        ),
    }
    return bool(checks[f.kind](value))


def _write(
    lines: tuple[bytes, ...], at: int, f: EventField, value: Any, dest: Path, salt: int
) -> int:
    """``lines`` with ``value`` at ``f``'s place in line ``at``, written out; the line's number.

    ``salt`` trailing blank lines (which the parser skips) keep two edits that happen to give
    the same bytes from being one input to the content-hash ledger.
    """
    event = orjson.loads(lines[at])
    _holders(event, f.path)[0][f.path[-1]] = _materialized(value)
    line = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
    edited = [*lines[:at], line, *lines[at + 1 :]]
    dest.write_bytes(b"".join(x + b"\n" for x in edited) + b"\n" * salt)
    return at + 1


def _sources(con: duckdb.DuckDBPyConnection, sql: str) -> set[str]:
    return {p for (p,) in con.execute(sql).fetchall()}


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    # No shrinking: an example is 80 logs, so shrinking a failure took over five minutes; the
    # assertions name the field and the value instead.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(drawn=st.tuples(*(values(f.kind) for _, f in FIELDS)))
def test_a_bad_field_costs_only_its_own_log(
    batch: Batch, cases: Cases, drawn: tuple[Any, ...]
) -> None:
    """One batch per example: a log per table field, each with that field's drawn value."""
    edits = []
    for n, ((name, f), value) in enumerate(zip(FIELDS, drawn, strict=True)):
        path = batch.bad / f"app-{n:03d}"
        at = cases.index[(name, f.path)]
        edits.append((name, f, value, path, _write(cases.lines, at, f, value, path, n)))
    _empty(batch.con)
    report = IngestReport()
    ingest_event_logs(batch.con, [batch.good[0], *(e[3] for e in edits), batch.good[1]], report)

    counts = _counts(batch.con)
    for good in batch.good:
        assert counts[str(good)] == batch.baseline[str(good)]
    fatal = {i.path: i for i in report.issues if i.fatal}
    ledger = _sources(batch.con, "SELECT path FROM ingested_files")
    refused = set()
    for name, f, value, path, line in edits:
        if acceptable(f, value):
            assert str(path) not in fatal, (f.dotted, value, fatal[str(path)].reason)
            assert str(path) in ledger and str(path) in counts, (f.dotted, value)
            continue
        issue = fatal.get(str(path))
        assert issue is not None, (name, f.dotted, value)
        assert issue.line == line and issue.reason.startswith(f"{name} field '{f.dotted}' ")
        assert str(path) not in ledger and str(path) not in counts, (f.dotted, value)
        refused.add(str(path))
    assert set(fatal) == refused
    assert _sources(batch.con, "SELECT path FROM ingest_issues WHERE fatal") == refused
    orphans = [
        t
        for t in APP_TABLES[1:]
        if batch.con.execute(
            f"SELECT count(*) FROM {t} WHERE app_key NOT IN (SELECT app_key FROM applications)"
        ).fetchall()[0][0]
    ]
    assert orphans == []


def test_every_field_has_a_place_in_the_base_log(cases: Cases) -> None:
    assert len(cases.index) == len(FIELDS) > 60
