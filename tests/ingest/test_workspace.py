"""Workspace ingest over the hand-written mini workspace, plus one real Databricks event log."""

from __future__ import annotations

import io
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import zstandard

from autofe.ingest.workspace.ingest_workspace import WorkspaceLogs, ingest_workspace
from autofe.ingest.workspace.inputs import is_workspace
from autofe.ingest.workspace.linking import CLUSTER_ID_PROP, RUN_ID_PROP, AppFacts
from autofe.schema import IngestReport
from autofe.warehouse.connect import open_warehouse

MINI = Path(__file__).resolve().parents[2] / "examples" / "workspaces" / "mini"
REAL_LOG = "spark-rapids-tools/spark-events-qualification/db_subExecution_id.zstd"
ALL_PURPOSE = "0207-201646-mku1a74m"


@dataclass(frozen=True)
class RealApp:
    """What the real Databricks log says about itself."""

    log: Path
    properties: dict[str, str]
    start_ms: int


@pytest.fixture(scope="module")
def real_app(eventlogs: Path) -> RealApp:
    log = eventlogs / REAL_LOG
    props: dict[str, str] = {}
    with log.open("rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
        for line in io.TextIOWrapper(reader, encoding="utf-8"):
            event = json.loads(line)
            if event["Event"] == "SparkListenerEnvironmentUpdate":
                props = event["Spark Properties"]
            if event["Event"] == "SparkListenerApplicationStart":
                return RealApp(log, props, event["Timestamp"])
    raise AssertionError("the real log has no ApplicationStart")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(MINI, root)
    return root


def _delivery_folder(root: Path, props: dict[str, str]) -> Path:
    """Where cluster log delivery puts a Spark context's log."""
    cluster = props[CLUSTER_ID_PROP]
    ip = props["spark.driver.host"].replace(".", "_")
    context = props["spark.databricks.sparkContextId"]
    return root / "cluster-logs" / cluster / "eventlog" / f"{cluster}_{ip}" / context


@pytest.fixture
def with_real_log(workspace: Path, real_app: RealApp) -> Path:
    """The mini workspace plus the real log, copied at test time into its delivery folder."""
    leaf = _delivery_folder(workspace, real_app.properties)
    leaf.mkdir(parents=True)
    shutil.copy(real_app.log, leaf / "eventlog-2024-02-13--19-00.zstd")
    return workspace


def _ingest(
    root: Path, db: Path
) -> tuple[duckdb.DuckDBPyConnection, IngestReport, WorkspaceLogs | None]:
    report = IngestReport()
    con = open_warehouse(db)
    logs = ingest_workspace(con, root, report)
    return con, report, logs


def _logs(root: Path, db: Path) -> WorkspaceLogs:
    """The event logs the workspace returns for the event-log ingest (it has some)."""
    _, _, logs = _ingest(root, db)
    assert logs is not None
    return logs


def _one(con: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> Any:
    row = con.execute(sql, list(params)).fetchone()
    assert row is not None, sql
    return row[0] if len(row) == 1 else row


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    return int(_one(con, f"SELECT count(*) FROM {table}"))


def test_is_workspace(tmp_path: Path) -> None:
    assert is_workspace(MINI)
    assert not is_workspace(tmp_path)
    assert not is_workspace(MINI / "jobs" / "list.json")


def test_ingests_jobs_runs_clusters_and_stats(workspace: Path, tmp_path: Path) -> None:
    con, report, _ = _ingest(workspace, tmp_path / "w.duckdb")
    assert report.issues == []
    assert (_count(con, "jobs"), _count(con, "runs"), _count(con, "cluster_configs")) == (2, 6, 2)
    assert _count(con, "table_stats") == 4
    assert report.runs == 6
    assert _one(con, "SELECT task_type FROM jobs WHERE job_id = '411'") == "sql"
    assert _one(con, "SELECT task_type FROM jobs WHERE job_id = '522'") == "python"


def test_label_is_execution_time_without_setup(workspace: Path, tmp_path: Path) -> None:
    con, _, _ = _ingest(workspace, tmp_path / "w.duckdb")
    # Multi-task run: first task's execution start (02:05:12) to the last one's end (02:17:39).
    assert _one(con, "SELECT duration_s FROM runs WHERE run_id = '8003'") == 747.0
    assert str(_one(con, "SELECT start_time FROM runs WHERE run_id = '8003'")) == (
        "2024-02-14 02:05:12"
    )
    # Single-task run: execution_duration from runs/get, merged over a RUNNING list entry.
    assert _one(con, "SELECT duration_s FROM runs WHERE run_id = '8002'") == 379.0
    setup = _one(
        con,
        "SELECT value, availability FROM run_attributes "
        "WHERE run_id = '8003' AND name = 'setup_duration_s'",
    )
    assert setup == (312.0, "post_execution")


def test_status_and_parameters(workspace: Path, tmp_path: Path) -> None:
    con, _, _ = _ingest(workspace, tmp_path / "w.duckdb")
    assert _one(con, "SELECT status FROM runs WHERE run_id = '7002'") == "FAILED"
    assert _one(con, "SELECT status FROM runs WHERE run_id = '8002'") == "SUCCEEDED"
    params = json.loads(_one(con, "SELECT parameters FROM runs WHERE run_id = '7003'"))
    assert params == {"job_parameters": {"run_date": "2024-02-13"}}


def test_cluster_configs(workspace: Path, tmp_path: Path) -> None:
    con, _, _ = _ingest(workspace, tmp_path / "w.duckdb")
    etl = _one(
        con,
        "SELECT c.spot_policy, c.num_workers, c.autoscale_min, c.autoscale_max, "
        "c.vcpu_per_node, c.memory_gb_per_node FROM runs r "
        "JOIN cluster_configs c ON c.config_id = r.cluster_config_id WHERE r.run_id = '8003'",
    )
    assert etl == ("spot_with_fallback", None, 2, 8, 8.0, 28.0)
    shared = _one(
        con,
        "SELECT c.spot_policy, c.num_workers, c.node_type FROM runs r "
        "JOIN cluster_configs c ON c.config_id = r.cluster_config_id WHERE r.run_id = '8001'",
    )
    assert shared == ("on_demand", 2, "Standard_E8s_v3")
    # SQL-warehouse tasks name no cluster: no config, and no issue either.
    assert _one(con, "SELECT count(cluster_config_id) FROM runs WHERE job_id = '411'") == 0


def test_scripts_loaded(workspace: Path, tmp_path: Path) -> None:
    con, _, _ = _ingest(workspace, tmp_path / "w.duckdb")
    path, text = _one(con, "SELECT script_path, script_text FROM jobs WHERE job_id = '411'")
    assert path == "/Workspace/Shared/reports/daily_orders.sql"
    assert text == (workspace / "scripts" / "reports" / "daily_orders.sql").read_text()
    both = _one(con, "SELECT script_text FROM jobs WHERE job_id = '522'")
    assert "==== task ingest: /Workspace/Shared/etl/orders_etl.py ====" in both
    assert "sales.customer_totals" in both
    # Run 8001 ran the job's older, single-task version: its own script is kept.
    older = _one(con, "SELECT script_text FROM runs WHERE run_id = '8001'")
    assert older == (workspace / "scripts" / "etl" / "orders_etl.py").read_text()
    assert _one(con, "SELECT script_text FROM runs WHERE run_id = '8003'") is None


def test_event_logs_handed_over_as_leaf_folders(with_real_log: Path, tmp_path: Path) -> None:
    logs = _logs(with_real_log, tmp_path / "w.duckdb")
    delivery = with_real_log / "cluster-logs"
    assert [p.relative_to(delivery).as_posix() for p in logs.paths] == [
        f"{ALL_PURPOSE}/eventlog/{ALL_PURPOSE}_10_13_1_10/8880912756278443690",
        "0214-020012-k9x2q1ab/eventlog/0214-020012-k9x2q1ab_10_139_64_12/7314159265358979323",
    ]


def test_a_workspace_without_event_logs_returns_none(workspace: Path, tmp_path: Path) -> None:
    shutil.rmtree(workspace / "cluster-logs")
    shutil.rmtree(workspace / "eventlogs", ignore_errors=True)
    _, report, logs = _ingest(workspace, tmp_path / "w.duckdb")
    assert logs is None and report.runs == 6


def _facts(
    path: Path, start_ms: int | None, end_ms: int | None = None, props: dict[str, str] | None = None
) -> AppFacts:
    return AppFacts("app-test", start_ms, end_ms, props or {}, path)


def test_link_by_run_id_property(workspace: Path, tmp_path: Path) -> None:
    logs = _logs(workspace, tmp_path / "w.duckdb")
    elsewhere = tmp_path / "some.log"
    # A task run id resolves to its parent run (the runs row).
    assert logs.link(_facts(elsewhere, None, props={RUN_ID_PROP: "8005"})) == "8003"
    assert logs.link(_facts(elsewhere, None, props={RUN_ID_PROP: "7002"})) == "7002"
    assert logs.link(_facts(elsewhere, None, props={RUN_ID_PROP: "999"})) is None


def test_link_real_log_by_delivery_folder(
    with_real_log: Path, real_app: RealApp, tmp_path: Path
) -> None:
    logs = _logs(with_real_log, tmp_path / "w.duckdb")
    run = json.loads((with_real_log / "runs" / "8002.json").read_text())
    props = real_app.properties
    assert run["cluster_instance"] == {
        "cluster_id": props[CLUSTER_ID_PROP],
        "spark_context_id": int(props["spark.databricks.sparkContextId"]),
    }
    leaf = _delivery_folder(with_real_log, props)
    facts = AppFacts(props["spark.app.id"], real_app.start_ms, None, props, leaf)
    assert logs.link(facts) == "8002"
    # Delivery folder beats time: the folder of 8002's context with 8001's times.
    assert logs.link(_facts(leaf, run["start_time"] - 25 * 60_000)) == "8002"
    # A run id property beats the folder.
    assert logs.link(_facts(leaf, real_app.start_ms, props={RUN_ID_PROP: "8004"})) == "8003"


def test_link_real_log_by_cluster_and_time(
    with_real_log: Path, real_app: RealApp, tmp_path: Path
) -> None:
    logs = _logs(with_real_log, tmp_path / "w.duckdb")
    plain = tmp_path / "eventlogs" / "db_subExecution_id.zstd"  # not a delivery folder
    props = real_app.properties
    # The real log has no ApplicationEnd: its start must fall inside the run.
    assert logs.link(AppFacts("a", real_app.start_ms, None, props, plain)) == "8002"
    t_8001 = 1707849000000 + 10 * 60_000  # 18:40, during run 8001 on the same cluster
    assert logs.link(
        _facts(plain, t_8001, t_8001 + 60_000, props={CLUSTER_ID_PROP: ALL_PURPOSE})
    ) == ("8001")
    between = 1707850081500 + 60_000  # after 8001 ended, before 8002 started
    assert logs.link(_facts(plain, between, between, props={CLUSTER_ID_PROP: ALL_PURPOSE})) is None
    assert logs.link(_facts(plain, t_8001, props={CLUSTER_ID_PROP: "0000-000000-other"})) is None


def test_bad_input_becomes_issues_and_rest_is_ingested(workspace: Path, tmp_path: Path) -> None:
    (workspace / "runs" / "broken.json").write_text('{"runs": [\n  {"run_id": 1,\n')
    extra = {
        "runs": [
            {"job_id": 522, "start_time": 1707900000000},
            {
                "run_id": 9001,
                "job_id": 522,
                "start_time": 1707900000000,
                "execution_duration": 60000,
                "state": {"life_cycle_state": "TERMINATED", "result_state": "SUCCESS"},
                "cluster_spec": {"existing_cluster_id": "0101-000000-gone"},
            },
        ]
    }
    (workspace / "runs" / "extra.json").write_text(json.dumps(extra))
    con, report, _ = _ingest(workspace, tmp_path / "w.duckdb")
    found = {(Path(i.path).name, i.line, i.fatal, i.reason) for i in report.issues}
    assert found == {
        ("broken.json", 3, True, "invalid JSON: Expecting property name enclosed in double quotes"),
        ("extra.json", None, False, "runs[0] has no run_id; skipped"),
        ("extra.json", None, False, "run 9001: unknown cluster '0101-000000-gone'"),
    }
    assert _count(con, "runs") == 7
    assert _one(con, "SELECT duration_s, cluster_config_id FROM runs WHERE run_id = '9001'") == (
        60.0,
        None,
    )
    assert _count(con, "ingest_issues") == 3


def test_reingest_adds_nothing(workspace: Path, tmp_path: Path) -> None:
    (workspace / "runs" / "broken.json").write_text("not json")
    db = tmp_path / "w.duckdb"
    con, first, _ = _ingest(workspace, db)
    tables = ("jobs", "runs", "cluster_configs", "run_attributes", "table_stats")
    before = {t: _count(con, t) for t in (*tables, "ingest_issues", "ingested_files")}
    con.close()
    con, again, _ = _ingest(workspace, db)
    assert (again.files_ingested, again.files_unchanged) == (0, first.files_ingested)
    assert again.issues == [] and again.runs == 0
    assert {t: _count(con, t) for t in before} == before


def test_changed_runs_file_upserts_by_run_id(workspace: Path, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    con, _, _ = _ingest(workspace, db)
    con.close()
    path = workspace / "runs" / "8002.json"
    run = json.loads(path.read_text())
    run["execution_duration"] += 1000
    run["end_time"] += 1000
    path.write_text(json.dumps(run))
    con, report, _ = _ingest(workspace, db)
    assert (report.files_ingested, report.runs) == (1, 1)
    assert _one(con, "SELECT duration_s FROM runs WHERE run_id = '8002'") == 380.0
    assert _count(con, "runs") == 6


def test_run_tags_and_cluster_custom_tags_become_known_at_submit_attributes(
    workspace: Path, tmp_path: Path
) -> None:
    run_file = workspace / "runs" / "8001.json"
    run = json.loads(run_file.read_text())
    run["tags"] = {"team": "finance", "tier": 2, "backfill": True, "note": None}
    run_file.write_text(json.dumps(run))
    cluster_file = workspace / "clusters" / "0207-201646-mku1a74m.json"
    cluster = json.loads(cluster_file.read_text())
    cluster["custom_tags"] = {"team": "platform", "cost_center": "42"}
    cluster_file.write_text(json.dumps(cluster))
    con, _, _ = _ingest(workspace, tmp_path / "w.duckdb")
    rows = con.execute(
        "SELECT name, value, value_text, availability FROM run_attributes "
        "WHERE run_id = '8001' AND name LIKE 'tag.%' ORDER BY name"
    ).fetchall()
    assert rows == [
        ("tag.backfill", 1.0, None, "known_at_submit"),
        ("tag.cost_center", 42.0, None, "known_at_submit"),
        ("tag.team", None, "finance", "known_at_submit"),  # the run's tag wins
        ("tag.tier", 2.0, None, "known_at_submit"),
    ]
    con.close()
    again, _, _ = _ingest(workspace, tmp_path / "w.duckdb")  # idempotent re-ingest
    count = "SELECT count(*) FROM run_attributes WHERE run_id = '8001' AND name LIKE 'tag.%'"
    assert _one(again, count) == 4


_COMPARED = ("jobs", "runs", "cluster_configs", "run_attributes", "table_stats")


def _table_rows(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the workspace tables, plus the ledger and issues without their clock."""
    rows = {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in _COMPARED}
    rows["ingested_files"] = sorted(
        con.execute("SELECT content_hash, path, kind FROM ingested_files").fetchall()
    )
    rows["ingest_issues"] = sorted(
        con.execute("SELECT * EXCLUDE (ingested_at) FROM ingest_issues").fetchall(), key=repr
    )
    return rows


def test_batched_files_store_what_file_by_file_stores(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The shipped example's 500-odd JSON files, in batches of 7 and one by one: same rows."""
    from autofe.config import example_workspace
    from autofe.ingest.workspace import ingest_workspace as ws

    stored = {}
    for size in (1, 7):
        monkeypatch.setattr(ws, "BATCH_FILES", size)
        con, report, _ = _ingest(example_workspace(), tmp_path / f"b{size}.duckdb")
        stored[size] = (_table_rows(con), report.files_ingested, report.runs)
    assert stored[1][1] > 500 and stored[1][2] == 490
    assert stored[7] == stored[1]


def test_refused_file_in_a_batch_is_named_and_the_others_are_kept(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, tmp_path: Path
) -> None:
    from autofe.ingest.workspace import store as ws
    from autofe.warehouse.write import insert_rows as real_insert

    def refuse_run_8002(con: duckdb.DuckDBPyConnection, name: str, rows: Any, **kw: Any) -> int:
        if name == "runs" and any(r["run_id"] == "8002" for r in rows):
            raise duckdb.ConstraintException("duplicate key 8002")
        return int(real_insert(con, name, rows, **kw))

    monkeypatch.setattr(ws, "insert_rows", refuse_run_8002)
    db = tmp_path / "w.duckdb"
    con, report, _ = _ingest(workspace, db)
    [refused] = [i for i in report.issues if i.fatal]
    assert Path(refused.path).name == "8002.json"
    assert re.search(r"^cannot store .*runs/8002\.json: .*duplicate key", refused.reason)
    kept = {Path(p).name for (p,) in con.execute("SELECT path FROM ingested_files").fetchall()}
    assert "8002.json" not in kept and {"8001.json", "8003.json"} <= kept
    assert _one(con, "SELECT count(*) FROM runs WHERE run_id = '8002'") == 0
    assert _one(con, "SELECT count(*) FROM ingest_issues WHERE fatal") == 1
    monkeypatch.setattr(ws, "insert_rows", real_insert)
    con.close()
    con, report, _ = _ingest(workspace, db)
    assert report.files_unchanged == len(kept) and _count(con, "runs") == 6


WRONG_TYPES_RUN = """{
  "run_id": 9001, "job_id": 522, "start_time": "yesterday", "end_time": 1e300,
  "execution_duration": NaN, "state": {"result_state": "SUCCESS"},
  "tags": {"team": "\\ud800", "size": {"a": 1}},
  "cluster_spec": {"new_cluster": {
    "num_workers": 1e300, "node_type_id": {"x": 1}, "spark_version": 13}}
}"""
WRONG_TYPES_JOB = {
    "job_id": 9,
    "settings": {"name": {"x": 1}, "tasks": [{"task_key": "t"}]},
}
LONG_SCRIPT_JOB = {
    "job_id": 10,
    "settings": {
        "name": "long",
        "tasks": [{"task_key": "t", "spark_python_task": {"python_file": "/" + "a" * 5000}}],
    },
}


def test_a_wrongly_typed_field_is_an_issue_for_its_record_not_a_crash(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "runs" / "9001.json").write_text(WRONG_TYPES_RUN)
    (workspace / "jobs" / "9.json").write_text(json.dumps(WRONG_TYPES_JOB))
    (workspace / "jobs" / "10.json").write_text(json.dumps(LONG_SCRIPT_JOB))
    con, report, _ = _ingest(workspace, tmp_path / "w.duckdb")

    run_file, job_file = workspace / "runs" / "9001.json", workspace / "jobs" / "9.json"
    reasons = {(Path(i.path).name, i.reason) for i in report.issues}
    assert {
        (
            run_file.name,
            "run 9001: run_attributes.value_text cannot hold '\\ud800' (expected "
            "text); stored as NULL",
        ),
        (
            run_file.name,
            "run 9001: cluster_configs.num_workers cannot hold 1e+300 (expected a "
            "32-bit whole number); stored as NULL",
        ),
        (
            run_file.name,
            "run 9001: cluster_configs.node_type cannot hold {'x': 1} (expected "
            "text); stored as NULL",
        ),
        (job_file.name, "job 9: jobs.name cannot hold {'x': 1} (expected text); stored as NULL"),
    } <= reasons, reasons
    [long] = [r for name, r in reasons if name == "10.json"]
    assert long.startswith("job 10 skipped: OSError: [Errno 36] File name too long")
    assert len(long) < 250
    assert not any(i.fatal for i in report.issues)
    assert _count(con, "runs") == 7 and report.runs == 7
    row = _one(
        con, "SELECT submit_time, end_time, duration_s, status FROM runs WHERE run_id = '9001'"
    )
    assert row == (None, None, None, "SUCCEEDED")
    assert _one(con, "SELECT name FROM jobs WHERE job_id = '9'") is None
    assert _one(con, "SELECT count(*) FROM jobs WHERE job_id = '10'") == 0
    tags = con.execute(
        "SELECT name, value, value_text FROM run_attributes WHERE run_id = '9001' ORDER BY name"
    ).fetchall()
    assert tags == [("tag.size", None, "{'a': 1}"), ("tag.team", None, None)]
