"""The real event-log corpus ingested end to end, against its inventory and NVIDIA's numbers.

Ground truth
    ``SOURCE.md``'s inventory (parsed here): per log, the stage, task and SQL-execution counts
    and the application's duration. Its "stages" column counts stage ids that *completed*
    (``truncated_eventlog``: 1 of the 3 it submitted), so that is what is compared.

    NVIDIA spark-rapids-tools' expected outputs of their own parser on the same logs, mapped
    to our applications by the app id (and attempt) inside each log; only logs that have an
    ApplicationStart are mapped (NVIDIA cannot read the others either).

Expectations used
    ProfilingExpectations/
      rapids_join_eventlog_{stage,job,sql}metricsagg_expectation.csv and
      rapids_join_eventlog_stagediagnosticmetrics_expectation.csv (totals only)
          -> spark-events-profiling/rapids_join_eventlog.zstd (local-1622814619968)
      nds_q88_photon_db_13_3_{stage,job,sql}_metrics_agg_expectation.csv
          -> spark-events-qualification/nds_q88_photon_db_13_3.zstd
      {tasks,stages,jobs}_failure_eventlog_expectation.csv, executors_removed_eventlog_...
          -> tasks_executors_fail_compressed_eventlog.zstd (application_1603128018386_7846)
    QualificationExpectations/<label>/apps_summary.csv and <app id>/persql.csv, see QUAL_USED.
      nested_type_eventlog and repeated_jobname describe local-1629446106683, whose copies are
      e2e-event_logs/photon_eventlog.zstd and streaming_eventlog.zstd (the third copy,
      incorrect_app_status_eventlog.zstd, has no ApplicationStart and is not mapped);
      support_multiple_attempts reports attempt 4 only (NVIDIA keeps the latest attempt).

Expectations skipped, and why
    *agg2_expectation.csv: local-1622821994212 is rapids_join_eventlog2.zstd, not copied.
    rapids_duration_and_cpu_expectation.csv, dsv1_complex: local-1626104300434, not copied.
    empty_eventlog, missing_sql_end, nested_dsv2, writeformat_eventlog, nds_q86_test,
    nds_q86_fail_test (>= 4 MB, absent), repeated_jobname's local-1623263471760, simple_udf's
    local-1651187225439 / -1651188809790 / -1623281204390: their logs were not copied.
    (cluster_information/platform/databricks-* have simple_udf local-1651187225439's exact
    duration but another app id, local-1726394182053-db: not mapped.)
    simple_udf's local-1622043423018: NVIDIA's row is udf_dataset_eventlog (not copied: 4 SQLs,
    16.3 s); our truncated_eventlog is a cut copy with the same id, checked by truncated_1_end.
    removed_blockManagers_eventlog_expectation.csv: BlockManagerRemoved is not stored.
    rapids_join_eventlog_sqlmetrics / _iodiagnosticmetrics, unsupported_sql_eventlog: SQL plan
    node accumulators, not in our schema (unsupported_sql's dataset_eventlog is absent too).

Definitions (NVIDIA's, as read in their source at the commit SOURCE.md names)
    * Stage rows: NVIDIA sums a stage id's attempts (numTasks, duration, sums; max / min of
      max / min). Our rows are per attempt; the test aggregates them the same way.
    * Every task attempt counts, failed, killed and resubmitted ones too ("numTasks includes
      duplicate task attempts"); so do ours.
    * CPU and shuffle-write time: NVIDIA truncates each stage attempt's nanosecond sum to ms
      (TimeUnit.NANOSECONDS.toMillis) and sums those. We store ns; truncating per stage
      attempt reproduces their numbers exactly, so no +-1 ms per stage tolerance is needed.
    * Photon (Databricks) logs: NVIDIA takes peakExecutionMemoryMax and swWriteTimeSum from
      Photon SQL accumulators. Photon task metrics carry 0 for both and we store task metrics
      (accumulators are skipped for speed), so ours are asserted to be 0 there.
    * Job / SQL aggregates: over the stages the job declares (a SQL: its jobs' distinct stage
      ids) that ran; jobs whose stages ran no task are not reported.
    * App duration without ApplicationEnd: NVIDIA estimates the end as max(last JobEnd
      "Completion Time", last SQLExecutionEnd "time") and flags "App Duration Estimated". We
      store duration_ms NULL and complete=False; the estimate is derivable from spark_jobs and
      sql_executions, and the test derives it that way.
    * A SQL execution without its end: NVIDIA's "SQL DF Duration" is 0, our duration_ms NULL.
    * Failed tasks: NVIDIA lists task attempts that are not successful (failed or killed), so
      they are compared with failed_tasks + killed_tasks.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from autofe.ingest.event_logs import ingest_event_logs
from autofe.ingest.eventlog.files import find_event_logs
from autofe.schema import IngestReport
from autofe.warehouse.connect import open_warehouse

RAPIDS = "spark-rapids-tools"
PROF = f"{RAPIDS}/ProfilingExpectations"
QUAL = f"{RAPIDS}/QualificationExpectations"
RAPIDS_JOIN = "local-1622814619968"
Q88 = "app-20240919162642-0000"
FAILING = "application_1603128018386_7846"
V2_DIR = f"{RAPIDS}/spark-events-qualification/eventlog_v2_local-1623876083964"
DB_DIR = f"{RAPIDS}/spark-events-qualification/db_sim_eventlog"
MALFORMED = f"{RAPIDS}/spark-events-profiling/malformed_json_eventlog.zstd"
TRUNCATED = f"{RAPIDS}/spark-events-qualification/truncated_eventlog"

APP_TABLES = ("applications", "spark_jobs", "stages", "sql_executions", "executors", "runs", "jobs")

# (label, App ID, log) of every apps_summary.csv row that describes a log in the corpus.
QUAL_USED = {
    ("db_eventlog_rolling", "local-1623876083964", "db_sim_eventlog"),
    ("db_eventlog_rolling", "local-1623876083964", "eventlog_v2_local-1623876083964"),
    ("eventlog_rolling", "local-1623876083964", "db_sim_eventlog"),
    ("eventlog_rolling", "local-1623876083964", "eventlog_v2_local-1623876083964"),
    ("jdbc_eventlog", "app-20211019113801-0001", "jdbc_eventlog.zstd"),
    ("nested_type_eventlog", "local-1629446106683", "photon_eventlog.zstd"),
    ("nested_type_eventlog", "local-1629446106683", "streaming_eventlog.zstd"),
    ("photon_db_13_3", Q88, "nds_q88_photon_db_13_3.zstd"),
    ("read_dsv2", "local-1624371906627", "eventlog_dsv2.zstd"),
    ("repeated_jobname", "local-1629446106683", "photon_eventlog.zstd"),
    ("repeated_jobname", "local-1629446106683", "streaming_eventlog.zstd"),
    ("spark_2", "local-1634253215009", "spark2-eventlog.zstd"),
    ("support_multiple_attempts", "application_1724877841851_0016", "attempt_4_eventlog.zstd"),
    ("truncated_1_end", "local-1622043423018", "truncated_eventlog"),
}
QUAL_NOT_THIS_LOG = {("simple_udf", "local-1622043423018")}

# NVIDIA column -> our stages aggregate, per stage id over its attempts (see the docstring).
STAGE_AGG = """
SELECT stage_id AS "id",
    sum(task_count) AS "numTasks",
    sum(duration_ms) AS "duration",
    sum(disk_spilled_bytes) AS "diskBytesSpilledSum",
    sum(task_duration_sum_ms) AS "durationSum",
    max(coalesce(task_duration_max_ms, 0)) AS "durationMax",
    min(coalesce(task_duration_min_ms, 0)) AS "durationMin",
    sum(executor_cpu_time_ns // 1000000) AS "executorCPUTimeSum",
    sum(executor_deserialize_time_ms) AS "executorDeserializeTimeSum",
    sum(executor_run_time_ms) AS "executorRunTimeSum",
    sum(input_bytes) AS "inputBytesReadSum",
    sum(input_records) AS "inputRecordsReadSum",
    sum(gc_time_ms) AS "jvmGCTimeSum",
    sum(memory_spilled_bytes) AS "memoryBytesSpilledSum",
    sum(output_bytes) AS "outputBytesWrittenSum",
    sum(output_records) AS "outputRecordsWrittenSum",
    max(peak_execution_memory_max) AS "peakExecutionMemoryMax",
    max(result_size_max) AS "resultSizeMax",
    sum(shuffle_fetch_wait_ms) AS "srFetchWaitTimeSum",
    sum(shuffle_read_bytes) AS "srTotalBytesReadSum",
    sum(shuffle_write_bytes) AS "swBytesWrittenSum",
    sum(shuffle_write_records) AS "swRecordsWrittenSum",
    sum(shuffle_write_time_ns // 1000000) AS "swWriteTimeSum"
FROM stages WHERE app_key = ? GROUP BY stage_id
"""
# Not in our schema: executorDeserializeCpuTimeSum, resultSerializationTimeSum, inputBytesReadMax,
# srLocalBlocksFetchedSum, srRemoteBlocksFetchSum, srcLocalBytesReadSum, srRemoteBytesReadSum,
# srRemoteBytesReadToDiskSum (we keep the remote + local total), durationAvg (= sum / count).
PHOTON_ACCUMULATOR_COLUMNS = ("peakExecutionMemoryMax", "swWriteTimeSum")

Aggregates = dict[int, dict[str, int]]


@pytest.fixture(scope="module")
def corpus(corpus_warehouse: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(str(corpus_warehouse), read_only=True)
    yield con
    con.close()


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _one(con: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> Any:
    row = con.execute(sql, list(params)).fetchone()
    assert row is not None
    return row[0]


def _key_of_app(con: duckdb.DuckDBPyConnection, app_id: str) -> str:
    keys = con.execute("SELECT app_key FROM applications WHERE app_id = ?", [app_id]).fetchall()
    assert len(keys) == 1, f"{app_id}: {keys}"
    return str(keys[0][0])


def _key_of_path(con: duckdb.DuckDBPyConnection, path: Path) -> str:
    return str(_one(con, "SELECT app_key FROM applications WHERE source_path = ?", str(path)))


def _dump(con: duckdb.DuckDBPyConnection, table: str, exclude: str = "") -> list[tuple[Any, ...]]:
    columns = f"* EXCLUDE ({exclude})" if exclude else "*"
    return con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()


# --- the inventory in SOURCE.md ------------------------------------------------------------


def _inventory_rows(eventlogs: Path) -> list[dict[str, str]]:
    text = (eventlogs / "SOURCE.md").read_text()
    section = text.split("\n## Inventory", 1)[1].split("\n## ", 1)[0]
    table = [line.strip() for line in section.splitlines() if line.startswith("|")]
    header, rows = table[0], table[2:]

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip("|").split("|")]

    return [dict(zip(cells(header), cells(row), strict=True)) for row in rows]


def _expected_per_log(eventlogs: Path) -> dict[str, dict[str, Any]]:
    """Inventory rows summed per application log (a rolled log's parts are separate rows)."""
    log_of_part = {p: s.path for s in find_event_logs(eventlogs) for p in s.parts}
    expected: dict[str, dict[str, Any]] = {}
    for row in _inventory_rows(eventlogs):
        part = eventlogs / row["file"]
        if part not in log_of_part:
            assert row["note"] == "empty" and "appstatus" in part.name
            continue
        log = str(log_of_part[part])
        counts = expected.setdefault(log, {"stages": 0, "tasks": 0, "sql": 0, "dur": []})
        counts["stages"] += int(row["stages"])
        counts["tasks"] += int(row["tasks"])
        counts["sql"] += int(row["SQL execs"])
        counts["dur"].append(float(row["app dur s"]) if row["app dur s"] else None)
    return expected


def test_every_log_ingests_once(corpus: duckdb.DuckDBPyConnection, eventlogs: Path) -> None:
    paths = {r[0] for r in corpus.execute("SELECT source_path FROM applications").fetchall()}
    assert len(paths) == 41
    assert paths == set(_expected_per_log(eventlogs))
    assert _one(corpus, "SELECT count(*) FROM runs") == 41
    issues = corpus.execute("SELECT path, line, reason, fatal FROM ingest_issues ORDER BY ALL")
    assert [(Path(p).name, line, fatal) for p, line, _, fatal in issues.fetchall()] == [
        ("incorrect_app_status_eventlog.zstd", None, False),
        ("malformed_json_eventlog.zstd", 4, False),
    ]


def test_counts_and_durations_match_the_inventory(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path
) -> None:
    ours = corpus.execute(
        """SELECT a.source_path, a.duration_ms, a.num_tasks, a.num_stages,
            (SELECT count(DISTINCT stage_id) FILTER (WHERE completion_time IS NOT NULL)
             FROM stages s WHERE s.app_key = a.app_key),
            (SELECT count(*) FROM stages s WHERE s.app_key = a.app_key),
            (SELECT coalesce(sum(task_count), 0) FROM stages s WHERE s.app_key = a.app_key),
            (SELECT count(*) FROM sql_executions q WHERE q.app_key = a.app_key)
        FROM applications a"""
    ).fetchall()
    expected, mismatches = _expected_per_log(eventlogs), []
    for path, duration_ms, tasks, stage_rows, completed, rows, stage_tasks, sql in ours:
        want = expected[path]
        got = {"stages": completed, "tasks": tasks, "sql": sql}
        if got != {k: want[k] for k in got} or (stage_tasks, stage_rows) != (tasks, rows):
            mismatches.append((path, got, want))
        if len(want["dur"]) == 1:  # a rolled log's parts each lack a start or an end
            [seconds] = want["dur"]
            if (seconds is None) != (duration_ms is None) or (
                seconds is not None and abs(duration_ms / 1000 - seconds) > 0.05 + 1e-9
            ):
                mismatches.append((path, duration_ms, seconds))
    assert mismatches == []


# --- NVIDIA's profiling aggregates --------------------------------------------------------


def _stage_aggregates(con: duckdb.DuckDBPyConnection, key: str) -> Aggregates:
    cur = con.execute(STAGE_AGG, [key])
    names = [d[0] for d in cur.description]
    return {row[0]: dict(zip(names[1:], row[1:], strict=True)) for row in cur.fetchall()}


def _combine(stages: list[dict[str, int]]) -> dict[str, int]:
    """Roll stage aggregates up to a job or SQL execution the way NVIDIA's AggAccumHelper does."""
    combined: dict[str, int] = {}
    for name in stages[0]:
        values = [s[name] for s in stages]
        if name.endswith("Max"):
            combined[name] = max(values)
        elif name.endswith("Min"):
            combined[name] = min(values)
        else:
            combined[name] = sum(values)
    return combined


def _job_aggregates(con: duckdb.DuckDBPyConnection, key: str) -> Aggregates:
    stages = _stage_aggregates(con, key)
    jobs: Aggregates = {}
    sql = "SELECT job_id, duration_ms, stage_ids FROM spark_jobs WHERE app_key = ?"
    for job_id, duration, stage_ids in con.execute(sql, [key]).fetchall():
        ran = [stages[s] for s in stage_ids if s in stages]
        if ran and sum(s["numTasks"] for s in ran):
            jobs[job_id] = {**_combine(ran), "duration": duration}
    return jobs


def _sql_aggregates(con: duckdb.DuckDBPyConnection, key: str) -> Aggregates:
    stages = _stage_aggregates(con, key)
    result: Aggregates = {}
    sql = "SELECT execution_id, duration_ms FROM sql_executions WHERE app_key = ?"
    for execution_id, duration in con.execute(sql, [key]).fetchall():
        ids = con.execute(
            "SELECT DISTINCT unnest(stage_ids) FROM spark_jobs "
            "WHERE app_key = ? AND sql_execution_id = ?",
            [key, execution_id],
        ).fetchall()
        ran = [stages[i] for (i,) in ids if i in stages]
        if ran and sum(s["numTasks"] for s in ran):
            result[execution_id] = {**_combine(ran), "duration": duration}
    return result


def _compare(expected: list[dict[str, str]], ours: Aggregates, id_col: str, photon: bool) -> None:
    assert set(ours) == {int(row[id_col]) for row in expected}
    mismatches = []
    for row in expected:
        got = ours[int(row[id_col])]
        for name, value in got.items():
            # NVIDIA reads Photon accumulators for these; Photon task metrics say 0.
            photon_accumulated = photon and name in PHOTON_ACCUMULATOR_COLUMNS
            want = 0 if photon_accumulated else int(row[name])
            if value != want:
                mismatches.append((row[id_col], name, value, row[name]))
    assert mismatches == []


AGG_FILES = [
    pytest.param(
        RAPIDS_JOIN, "rapids_join_eventlog_{}metricsagg_expectation.csv", id="rapids_join"
    ),
    pytest.param(Q88, "nds_q88_photon_db_13_3_{}_metrics_agg_expectation.csv", id="photon_q88"),
]


@pytest.mark.parametrize(("app_id", "pattern"), AGG_FILES)
def test_stage_metrics_match_nvidia(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path, app_id: str, pattern: str
) -> None:
    expected = _read_csv(eventlogs / PROF / pattern.format("stage"))
    ours = _stage_aggregates(corpus, _key_of_app(corpus, app_id))
    _compare(expected, ours, "id", photon=app_id == Q88)


@pytest.mark.parametrize(("app_id", "pattern"), AGG_FILES)
def test_job_metrics_match_nvidia(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path, app_id: str, pattern: str
) -> None:
    expected = _read_csv(eventlogs / PROF / pattern.format("job"))
    ours = _job_aggregates(corpus, _key_of_app(corpus, app_id))
    _compare(expected, ours, "id", photon=app_id == Q88)


@pytest.mark.parametrize(("app_id", "pattern"), AGG_FILES)
def test_sql_metrics_match_nvidia(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path, app_id: str, pattern: str
) -> None:
    expected = _read_csv(eventlogs / PROF / pattern.format("sql"))
    assert {row["appId"] for row in expected} == {app_id}
    ours = _sql_aggregates(corpus, _key_of_app(corpus, app_id))
    _compare(expected, ours, "sqlId", photon=app_id == Q88)


def test_stage_diagnostic_totals_match_nvidia(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path
) -> None:
    expected = _read_csv(
        eventlogs / PROF / "rapids_join_eventlog_stagediagnosticmetrics_expectation.csv"
    )
    stages = _stage_aggregates(corpus, _key_of_app(corpus, RAPIDS_JOIN))
    names = {
        "stageDurationMs": "duration",
        "numTasks": "numTasks",
        "inputBytesReadTotal": "inputBytesReadSum",
        "outputBytesWrittenTotal": "outputBytesWrittenSum",
        "shuffleReadBytesTotal": "srTotalBytesReadSum",
        "shuffleWriteBytesTotal": "swBytesWrittenSum",
        "shuffleReadFetchWaitTimeTotal": "srFetchWaitTimeSum",
        "shuffleWriteWriteTimeTotal": "swWriteTimeSum",
    }
    assert {int(r["stageId"]) for r in expected} == set(stages)
    got = [{n: stages[int(r["stageId"])][ours] for n, ours in names.items()} for r in expected]
    assert got == [{n: int(r[n]) for n in names} for r in expected]


# --- NVIDIA's failure reports -------------------------------------------------------------


def test_failed_jobs_match_nvidia(corpus: duckdb.DuckDBPyConnection, eventlogs: Path) -> None:
    expected = _read_csv(eventlogs / PROF / "jobs_failure_eventlog_expectation.csv")
    failed = corpus.execute(
        "SELECT job_id, sql_execution_id, result FROM spark_jobs "
        "WHERE app_key = ? AND result <> 'JobSucceeded' ORDER BY job_id",
        [_key_of_app(corpus, FAILING)],
    ).fetchall()
    # The failure reason ("Job 79 cancelled because SparkContext was shut down") is not stored.
    assert failed == [(int(r["jobID"]), int(r["sqlID"]), r["jobResult"]) for r in expected]


def _escaped(text: str) -> str:
    """NVIDIA's failure reason as their test renders it: trimmed, then meta characters escaped."""
    text = text.strip()
    for char, escape in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\f", "\\f")):
        text = text.replace(char, escape)
    return text


def test_failed_stages_match_nvidia(corpus: duckdb.DuckDBPyConnection, eventlogs: Path) -> None:
    expected = _read_csv(eventlogs / PROF / "stages_failure_eventlog_expectation.csv")
    failed = corpus.execute(
        "SELECT stage_id, attempt_id, name, num_tasks, failure_reason FROM stages "
        "WHERE app_key = ? AND status = 'failed' ORDER BY ALL",
        [_key_of_app(corpus, FAILING)],
    ).fetchall()
    assert [(*row[:4], _escaped(row[4])) for row in failed] == [
        (int(r["stageId"]), int(r["attemptId"]), r["name"], int(r["numTasks"]), r["failureReason"])
        for r in expected
    ]


def test_failed_task_counts_match_nvidia(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path
) -> None:
    expected: dict[tuple[int, int], int] = {}
    for row in _read_csv(eventlogs / PROF / "tasks_failure_eventlog_expectation.csv"):
        stage = (int(row["stageId"]), int(row["stageAttemptId"]))
        expected[stage] = expected.get(stage, 0) + 1
    ours = corpus.execute(
        "SELECT stage_id, attempt_id, failed_tasks + killed_tasks FROM stages "
        "WHERE app_key = ? AND failed_tasks + killed_tasks > 0",
        [_key_of_app(corpus, FAILING)],
    ).fetchall()
    assert {(s, a): n for s, a, n in ours} == expected == {(238, 0): 3}


def test_removed_executors_match_nvidia(corpus: duckdb.DuckDBPyConnection, eventlogs: Path) -> None:
    expected = _read_csv(eventlogs / PROF / "executors_removed_eventlog_expectation.csv")
    removed = corpus.execute(
        "SELECT executor_id, epoch_ms(remove_time), remove_reason FROM executors "
        "WHERE app_key = ? AND remove_time IS NOT NULL ORDER BY executor_id",
        [_key_of_app(corpus, FAILING)],
    ).fetchall()
    assert removed == [(r["executorId"], int(r["time"]), r["reason"]) for r in expected]


# --- NVIDIA's qualification summaries -----------------------------------------------------


def _estimated_duration(con: duckdb.DuckDBPyConnection, key: str) -> int:
    """NVIDIA's app duration for a log without ApplicationEnd: last job or SQL end - start."""
    return int(
        _one(
            con,
            """SELECT greatest(
                (SELECT max(epoch_ms(completion_time)) FROM spark_jobs WHERE app_key = $1),
                (SELECT max(epoch_ms(end_time)) FROM sql_executions WHERE app_key = $1))
               - (SELECT epoch_ms(start_time) FROM applications WHERE app_key = $1)""",
            key,
        )
    )


def _check_summary(
    con: duckdb.DuckDBPyConnection, key: str, row: dict[str, str], label_dir: Path
) -> list[Any]:
    complete, duration = con.execute(
        "SELECT complete, duration_ms FROM applications WHERE app_key = ?", [key]
    ).fetchone() or (None, None)
    estimated = row["App Duration Estimated"] == "true"
    ours = _estimated_duration(con, key) if estimated else duration
    problems: list[Any] = []
    if complete == estimated or ours != int(row["App Duration"]):
        problems.append(("App Duration", complete, ours, row["App Duration"]))
    sql = dict(
        con.execute(
            "SELECT execution_id, coalesce(duration_ms, 0) FROM sql_executions WHERE app_key = ?",
            [key],
        ).fetchall()
    )
    if max(sql.values(), default=0) != int(row["Longest SQL Duration"]):
        problems.append(("Longest SQL Duration", sql, row["Longest SQL Duration"]))
    per_sql = label_dir / row["App ID"] / "persql.csv"
    for q in _read_csv(per_sql) if per_sql.exists() else []:
        if sql.get(int(q["SQL ID"])) != int(q["SQL DF Duration"]):
            problems.append(("SQL DF Duration", q["SQL ID"], sql.get(int(q["SQL ID"])), q))
    return problems


def test_app_and_sql_durations_match_nvidia_qualification(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path
) -> None:
    used, problems = set(), []
    for summary in sorted((eventlogs / QUAL).glob("*/apps_summary.csv")):
        label = summary.parent.name
        for row in _read_csv(summary):
            if (label, row["App ID"]) in QUAL_NOT_THIS_LOG:
                continue
            apps = corpus.execute(
                "SELECT app_key, source_path FROM applications WHERE app_id = ? "
                "AND start_time IS NOT NULL AND coalesce(attempt_id, '1') = ?",
                [row["App ID"], row["Attempt ID"]],
            ).fetchall()
            for key, path in apps:
                used.add((label, row["App ID"], Path(path).name))
                problems += [
                    (label, path, p) for p in _check_summary(corpus, key, row, summary.parent)
                ]
    assert used == QUAL_USED
    assert problems == []


# --- damaged logs of the corpus -----------------------------------------------------------


def test_malformed_and_truncated_logs_are_kept_up_to_the_damage(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path
) -> None:
    malformed = corpus.execute(
        "SELECT complete, bad_lines, num_tasks FROM applications WHERE source_path = ?",
        [str(eventlogs / MALFORMED)],
    ).fetchall()
    assert malformed == [(True, 1, 217)]
    issue = corpus.execute(
        "SELECT line, reason, fatal FROM ingest_issues WHERE path = ?", [str(eventlogs / MALFORMED)]
    ).fetchall()
    assert len(issue) == 1 and issue[0][0] == 4 and issue[0][2] is False
    assert issue[0][1].startswith("invalid JSON: unexpected character")

    truncated = corpus.execute(
        "SELECT complete, bad_lines, end_time, duration_ms, num_tasks FROM applications "
        "WHERE source_path = ?",
        [str(eventlogs / TRUNCATED)],
    ).fetchall()
    assert truncated == [(False, 0, None, None, 21)]
    statuses = corpus.execute(
        "SELECT status, count(*) FROM stages WHERE app_key = ? GROUP BY ALL ORDER BY ALL",
        [_key_of_path(corpus, eventlogs / TRUNCATED)],
    ).fetchall()
    assert statuses == [("incomplete", 2), ("succeeded", 1)]
    run = corpus.execute(
        "SELECT status, duration_s FROM runs WHERE run_id = ?",
        ["app:" + _key_of_path(corpus, eventlogs / TRUNCATED)],
    ).fetchall()
    assert run == [("INCOMPLETE", None)]


# --- whole-corpus properties of the pipeline ----------------------------------------------


def _fresh_ingest(db: Path, eventlogs: Path, workers: int = 1) -> IngestReport:
    report = IngestReport()
    con = open_warehouse(db)
    try:
        ingest_event_logs(con, [eventlogs], report, workers=workers)
    finally:
        con.close()
    return report


def test_fast_task_end_path_gives_the_same_tables(
    corpus: duckdb.DuckDBPyConnection,
    eventlogs: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("autofe.ingest.eventlog.parse._fast_task_end", lambda line: None)
    _fresh_ingest(tmp_path / "slow.duckdb", eventlogs)
    slow = duckdb.connect(str(tmp_path / "slow.duckdb"), read_only=True)
    try:
        assert len(_dump(slow, "stages")) == 500
        for table in APP_TABLES:
            assert _dump(slow, table) == _dump(corpus, table), table
    finally:
        slow.close()


def test_ingesting_twice_adds_nothing(warehouse_copy: Path, eventlogs: Path) -> None:
    con = open_warehouse(warehouse_copy)
    try:
        tables = (*APP_TABLES, "ingested_files", "ingest_issues")
        before = {t: _one(con, f"SELECT count(*) FROM {t}") for t in tables}
        report = IngestReport()
        ingest_event_logs(con, [eventlogs], report)
        after = {t: _one(con, f"SELECT count(*) FROM {t}") for t in tables}
    finally:
        con.close()
    assert (report.files_unchanged, report.files_ingested, report.applications) == (41, 0, 0)
    assert report.issues == []
    assert after == before


def test_two_workers_give_the_same_tables(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path, tmp_path: Path
) -> None:
    report = _fresh_ingest(tmp_path / "w2.duckdb", eventlogs, workers=2)
    assert (report.applications, report.tasks) == (41, 61048)
    parallel = duckdb.connect(str(tmp_path / "w2.duckdb"), read_only=True)
    try:
        for table in APP_TABLES:
            assert _dump(parallel, table) == _dump(corpus, table), table
        for table in ("ingested_files", "ingest_issues"):
            assert _dump(parallel, table, "ingested_at") == _dump(corpus, table, "ingested_at")
    finally:
        parallel.close()


def test_rolled_log_and_its_databricks_twin_agree(
    corpus: duckdb.DuckDBPyConnection, eventlogs: Path
) -> None:
    """SOURCE.md: NVIDIA simulated db_sim_eventlog/ from the same app as the v2 directory."""
    v2, db = (_key_of_path(corpus, eventlogs / d) for d in (V2_DIR, DB_DIR))
    for table in ("stages", "spark_jobs", "sql_executions", "executors"):
        rows = [
            corpus.execute(
                f"SELECT * EXCLUDE (app_key, run_id) FROM {table} WHERE app_key = ? ORDER BY ALL",
                [key],
            ).fetchall()
            for key in (v2, db)
        ]
        assert rows[0] == rows[1], table
    assert len(rows[0]) > 0
    apps = corpus.execute(
        "SELECT app_id, duration_ms, num_stages, num_tasks, events FROM applications "
        "WHERE app_key IN (?, ?)",
        [v2, db],
    ).fetchall()
    assert apps[0] == apps[1] == ("local-1623876083964", 133857, 4, 2801, apps[0][4])


CODEC_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eventlogs" / "codecs"


def test_logs_real_spark_wrote_with_every_codec_ingest_alike(tmp_path: Path) -> None:
    """lz4 / snappy / lzf / zstd / plain / rolled logs by Spark 3.5 and 4.3 give the same facts."""
    con = open_warehouse(tmp_path / "w.duckdb")
    report = IngestReport()
    ingest_event_logs(con, [CODEC_FIXTURES], report)
    assert report.issues == []
    rows = con.execute(
        "SELECT a.spark_version, count(DISTINCT s.stage_id), sum(s.task_count), a.complete "
        "FROM applications a JOIN stages s USING (app_key) GROUP BY a.app_key, a.spark_version, "
        "a.complete ORDER BY 1"
    ).fetchall()
    assert len(rows) == 10
    assert {r[0] for r in rows} == {"3.5.9", "4.3.0"}
    assert {r[1:] for r in rows} == {(4, 5, True)}
