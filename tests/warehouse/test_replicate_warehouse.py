"""Warehouse replicas of the shipped example: N times the rows, the same history per copy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.errors import ConfigError
from autofe.feature_catalog import read_feature_file
from autofe.warehouse.replicate import WarehouseReplica, is_per_copy, replicate_warehouse
from autofe.warehouse.tables import TABLES

CATALOG = Path(__file__).resolve().parents[1] / "fixtures" / "catalogs" / "ex8"
COPIES = 3
SHIFT = 86_400.25
PER_COPY = {
    "jobs", "runs", "applications", "spark_jobs", "stages", "sql_executions", "executors",
    "run_attributes",
}  # fmt: skip
FEATURES = (
    "baseline_last_success_duration_s",  # the job's last successful earlier run
    "dataload_prior_scan_mb_per_task_s",  # stages of the job's three latest earlier runs
    "rampup_prior_first_job_delay_s",  # applications and Spark jobs of earlier runs
    "param_days",  # a value inside the runs.parameters JSON
)


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path) -> WarehouseReplica:
    out = tmp_path_factory.mktemp("replica") / "x3.duckdb"
    return replicate_warehouse(example_warehouse, out, COPIES)


@pytest.fixture(scope="module")
def shifted(tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path) -> WarehouseReplica:
    out = tmp_path_factory.mktemp("shifted") / "x3.duckdb"
    return replicate_warehouse(example_warehouse, out, COPIES, shift_seconds=SHIFT)


def _open(report: WarehouseReplica) -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect(str(report.out), read_only=True) as con:
        con.execute(f"ATTACH '{report.source}' AS source (READ_ONLY)")
        yield con


@pytest.fixture
def con(replica: WarehouseReplica) -> Iterator[duckdb.DuckDBPyConnection]:
    yield from _open(replica)


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> object:
    row = con.execute(sql).fetchone()
    assert row is not None
    return row[0]


def test_per_copy_tables_hold_n_times_the_rows_and_shared_ones_the_same(
    replica: WarehouseReplica, con: duckdb.DuckDBPyConnection
) -> None:
    assert {t.name for t in TABLES if is_per_copy(t)} == PER_COPY
    assert replica.rows_before["runs"] == 490
    for t in TABLES:
        factor = COPIES if t.name in PER_COPY else 1
        assert replica.rows_after[t.name] == factor * replica.rows_before[t.name], t.name
        assert _one(con, f"SELECT count(*) FROM {t.name}") == replica.rows_after[t.name]


def test_copy_zero_and_the_shared_tables_are_the_source_row_for_row(
    con: duckdb.DuckDBPyConnection,
) -> None:
    for t in TABLES:
        missing = f"SELECT count(*) FROM (FROM source.{t.name} EXCEPT ALL FROM {t.name})"
        assert _one(con, missing) == 0, t.name
    for meta in ("column_catalog", "warehouse_meta"):
        same = f"SELECT count(*) FROM (FROM source.{meta} EXCEPT FROM {meta})"
        assert _one(con, same) == 0, meta


def test_every_copy_has_its_own_ids_that_map_back_to_the_original(
    replica: WarehouseReplica, con: duckdb.DuckDBPyConnection
) -> None:
    assert (replica.run_stride, replica.job_stride) == (10_000, 1_000)  # ids 1001… and 101…
    copies = con.execute(
        f"SELECT r.run_id::BIGINT // {replica.run_stride} AS k, count(*) FROM runs r "
        f"JOIN source.runs o ON o.run_id::BIGINT = r.run_id::BIGINT % {replica.run_stride} "
        f"AND o.job_id::BIGINT = r.job_id::BIGINT % {replica.job_stride} "
        f"AND r.job_id::BIGINT // {replica.job_stride} = r.run_id::BIGINT // {replica.run_stride} "
        "AND o.duration_s = r.duration_s AND o.submit_time = r.submit_time "
        "AND o.cluster_config_id = r.cluster_config_id GROUP BY k ORDER BY k"
    ).fetchall()
    assert copies == [(k, 490) for k in range(COPIES)]
    apps = con.execute(
        "SELECT count(*), count(DISTINCT a.app_key) FROM applications a JOIN source.applications o "
        "ON o.app_key = regexp_replace(a.app_key, '-c[0-9]+([:@]|$)', '\\1') "
        f"AND o.run_id::BIGINT = a.run_id::BIGINT % {replica.run_stride} "
        "AND o.num_tasks = a.num_tasks AND a.app_id LIKE o.app_id || '%'"
    ).fetchone()
    assert apps == (COPIES * 490, COPIES * 490)
    for child in ("spark_jobs", "stages", "sql_executions", "executors"):
        orphans = (
            f"SELECT count(*) FROM {child} c LEFT JOIN applications a "
            "ON a.app_key = c.app_key AND a.run_id = c.run_id WHERE a.app_key IS NULL"
        )
        assert _one(con, orphans) == 0, child


def test_a_copys_names_and_json_carry_its_ids(con: duckdb.DuckDBPyConnection) -> None:
    job = con.execute("SELECT name, definition->>'name' FROM jobs WHERE job_id = '2102'").fetchone()
    assert job == ("late_delivery_by_supplier_c2", "late_delivery_by_supplier_c2")
    app = con.execute(
        "SELECT app_name, databricks_tags->>'clusterId', "
        "spark_properties->>'$.\"spark.databricks.job.runId\"', "
        "spark_properties->>'$.\"spark.app.name\"', spark_properties->>'$.\"spark.app.id\"', "
        "app_id FROM applications WHERE run_id = '21277'"
    ).fetchone()
    assert app == (
        "customer_kmeans_c2-21277", "0309-080905-321238ab-c2", "21277",
        "customer_kmeans_c2-21277", "local-1796043094651-c2", "local-1796043094651-c2",
    )  # fmt: skip


def _values(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, object]:
    sql = read_feature_file(CATALOG / f"{name}.sql").sql
    return {str(run_id): value for run_id, value in con.execute(sql).fetchall()}


@pytest.mark.parametrize("report", ["replica", "shifted"])
def test_features_give_every_copy_its_originals_values(
    report: str, request: pytest.FixtureRequest
) -> None:
    built: WarehouseReplica = request.getfixturevalue(report)
    for con in _open(built):
        for name in FEATURES:
            values = _values(con, name)
            assert len(values) == COPIES * 490
            informative = [v for v in values.values() if v is not None]
            assert len(informative) > 100, name  # the feature is not NULL everywhere
            for run_id, value in values.items():
                original = str(int(run_id) % built.run_stride)
                assert value == pytest.approx(values[original], nan_ok=True), (name, run_id)


def test_shift_moves_every_timestamp_of_copy_k_by_k_shifts(
    shifted: WarehouseReplica,
) -> None:
    for con in _open(shifted):
        delta = con.execute(
            f"SELECT DISTINCT r.run_id::BIGINT // {shifted.run_stride} AS k, "
            "epoch(r.submit_time - o.submit_time), epoch(r.end_time - o.end_time) "
            f"FROM runs r JOIN source.runs o ON o.run_id::BIGINT = "
            f"r.run_id::BIGINT % {shifted.run_stride} ORDER BY k"
        ).fetchall()
        assert delta == [(k, k * SHIFT, k * SHIFT) for k in range(COPIES)]
        stages = (
            "SELECT DISTINCT epoch(s.completion_time - o.completion_time) FROM stages s "
            "JOIN source.stages o ON s.run_id = o.run_id::BIGINT + 20000 "
            "AND s.stage_id = o.stage_id AND s.attempt_id = o.attempt_id"
        )
        assert con.execute(stages).fetchall() == [(2 * SHIFT,)]
        shared = "SELECT count(*) FROM (FROM table_stats EXCEPT FROM source.table_stats)"
        assert _one(con, shared) == 0


def test_warehouse_stats_counts_the_replicas_runs(replica: WarehouseReplica) -> None:
    result = CliRunner().invoke(app, ["warehouse", "stats", "--db", str(replica.out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["runs"] == COPIES * 490


def test_the_command_reports_the_rows_as_json(tmp_path: Path, example_warehouse: Path) -> None:
    out = tmp_path / "x2.duckdb"
    args = ["warehouse", "replicate", str(example_warehouse), "--copies", "2", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["rows_after"]["stages"] == 2 * report["rows_before"]["stages"]
    assert report["out"] == str(out)
    assert out.is_file() and not (tmp_path / "x2.duckdb.partial").exists()


def test_an_existing_out_is_refused_and_left_byte_for_byte(
    tmp_path: Path, example_warehouse: Path
) -> None:
    out = tmp_path / "taken.duckdb"
    out.write_bytes(b"someone else's file\n")
    with pytest.raises(ConfigError, match=r"taken\.duckdb exists; give a new file"):
        replicate_warehouse(example_warehouse, out, 2)
    assert out.read_bytes() == b"someone else's file\n"
    args = ["warehouse", "replicate", str(example_warehouse), "--copies", "2", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "exists; give a new file" in result.output
    assert out.read_bytes() == b"someone else's file\n"


def test_bad_inputs_are_refused_naming_them(tmp_path: Path, example_warehouse: Path) -> None:
    out = tmp_path / "out.duckdb"
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database\n")
    plain = tmp_path / "plain.duckdb"
    duckdb.connect(str(plain)).close()
    cases = [
        (example_warehouse, 0, "copies must be at least 1, got 0"),
        (tmp_path / "missing.duckdb", 2, "missing.duckdb: no such warehouse file"),
        (text, 2, "notes.duckdb: cannot open as a warehouse: .*not a valid DuckDB database"),
        (plain, 2, "plain.duckdb: cannot open as a warehouse: .*warehouse_meta"),
    ]
    for source, copies, message in cases:
        with pytest.raises(ConfigError, match=message):
            replicate_warehouse(source, out, copies)
        assert not out.exists() and not out.with_name("out.duckdb.partial").exists()
    with pytest.raises(ConfigError, match="shift_seconds must be a finite number"):
        replicate_warehouse(example_warehouse, out, 2, shift_seconds=float("nan"))
