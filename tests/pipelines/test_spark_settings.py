"""The Spark engine's parts that need no JVM: settings, the missing extra, bad options, the rows
the executors build, the DuckDB gate sample and the DuckDB side of ``features materialize``.

The tests that start Spark are in ``test_spark.py`` and ``test_spark_standalone.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
import pytest
from parity import export_tables
from typer.testing import CliRunner

from autofe.cli import app
from autofe.config import example_workspace
from autofe.console import EXIT_USER_ERROR
from autofe.errors import ConfigError, WarehouseError
from autofe.feature_catalog import load_catalog, save_catalog
from autofe.featurespec import FeatureSpec
from autofe.ingest.event_logs import ingest_event_logs
from autofe.ingest.eventlog.files import find_event_logs
from autofe.ingest.log_rows import log_rows, source_digest
from autofe.modeling.compute import compute_values
from autofe.pipelines.spark import (
    INSTALL_HINT,
    MERGED_PARTITIONS,
    Refusal,
    SparkFeatures,
    SparkSettings,
    Staged,
    StagedValues,
    _checked,
    _Planned,
    _staged_counts,
    materialize_on_spark,
    session_conf,
    spark_session,
    write_spark_features,
)
from autofe.sandbox.session import Sandbox
from autofe.schema import IngestReport
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.feature_store import read_feature_values, read_store_values
from autofe.warehouse.parquet_sample import gate_sample
from autofe.warehouse.parquet_tables import duckdb_select
from autofe.warehouse.tables import TABLES

runner = CliRunner()
CATALOG = Path(__file__).resolve().parents[1] / "fixtures" / "catalogs" / "ex8"


def test_pinned_settings_win_and_a_conflicting_one_is_refused() -> None:
    conf = session_conf(SparkSettings(conf={"spark.executor.memory": "2g"}))
    assert conf["spark.executor.memory"] == "2g"
    assert conf["spark.sql.ansi.enabled"] == "true"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.driver.host"] == "127.0.0.1"  # local master: loopback only
    # a full driver heap ends the JVM (an error) instead of hanging the call it serves
    assert conf["spark.driver.extraJavaOptions"] == "-XX:+ExitOnOutOfMemoryError"
    own = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert session_conf(SparkSettings(conf=own))["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert "spark.driver.host" not in session_conf(SparkSettings(master="spark://10.0.0.5:7077"))
    with pytest.raises(ConfigError, match=r"spark.sql.ansi.enabled=false: autofe pins"):
        session_conf(SparkSettings(conf={"spark.sql.ansi.enabled": "false"}))


def test_a_local_master_gets_shuffle_partitions_for_its_cores_unless_the_user_sets_them() -> None:
    def partitions(master: str, **conf: str) -> str | None:
        return session_conf(SparkSettings(master=master, conf=conf)).get(
            "spark.sql.shuffle.partitions"
        )

    assert partitions("local[2]") == "16"
    assert partitions("local") == "8"
    assert partitions("local[4,3]") == "32"  # four cores, three task retries
    # the machine's core count would make values' last bits follow the machine
    assert partitions("local[*]") is None
    assert partitions("spark://10.0.0.5:7077") is None  # a cluster keeps Spark's default
    assert partitions("local[2]", **{"spark.sql.shuffle.partitions": "200"}) == "200"


def test_a_local_master_merges_partitions_up_to_4_mb_unless_the_user_says_otherwise() -> None:
    """Merging by the cores ran a batch of the example's ratio features out of the 1 GB driver
    at 1 M runs (docs/results.md, session 33)."""
    target = "spark.sql.adaptive.advisoryPartitionSizeInBytes"

    def merging(master: str, **conf: str) -> dict[str, str]:
        found = session_conf(SparkSettings(master=master, conf=conf))
        return {k: found[k] for k in MERGED_PARTITIONS if k in found}

    assert merging("local[2]") == MERGED_PARTITIONS
    assert merging("local")[target] == "4m"
    assert merging("local[*]") == {}  # its partitions are Spark's 200, merged as Spark does
    assert merging("spark://10.0.0.5:7077") == {}
    assert merging("local[2]", **{target: "64m"})[target] == "64m"


def test_without_pyspark_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with (
        pytest.raises(ConfigError, match=r"pip install 'autofe\[spark\]'"),
        spark_session(SparkSettings()),
    ):
        pass


def test_cli_without_pyspark_prints_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    ws = str(example_workspace())
    result = runner.invoke(app, ["ingest", ws, "--engine", "spark", "--out", str(tmp_path / "t")])
    assert result.exit_code == EXIT_USER_ERROR
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and INSTALL_HINT in lines[0], result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "spark"], "give --out DIR"),
        (["--engine", "spark", "--out", "x", "--conf", "novalue"], "--conf expects key=value"),
        (["--engine", "spark", "--out", "x", "--conf", "spark.sql.caseSensitive=true"], "pins"),
        (["--engine", "flink"], "--engine must be duckdb or spark"),
        (["--out", "x"], "--out is for --engine spark"),
    ],
)
def test_cli_ingest_option_errors(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["ingest", str(example_workspace()), *args])
    assert result.exit_code == EXIT_USER_ERROR
    assert message in result.stderr, result.stderr


def test_a_folder_without_a_manifest_is_no_table_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a table folder written by"):
        materialize_on_spark([], tmp_path, SparkSettings())


def test_staged_rows_the_driver_does_not_see_are_an_error_not_a_partial_feature(
    tmp_path: Path,
) -> None:
    """The driver's count of the staged files against the rows the executors wrote: equal, a
    feature is stored (or refused for several rows per run); short, the folder is not shared."""
    planned = [_Planned(0, "a", "q", "double", None), _Planned(1, "b", "q", "long", None)]
    written = {"a": (tmp_path / "batch=0", 10), "b": (tmp_path / "batch=0", 4)}
    refused: list[Refusal] = []
    staged = _checked(planned, written, {0: (10, 10, 9), 1: (4, 3, 3)}, refused, tmp_path)
    assert list(staged) == ["a"] and (staged["a"].rows, staged["a"].covered) == (10, 9)
    assert refused == [Refusal("b", "run", "returns several rows for one run")]
    with pytest.raises(ConfigError, match=r"and read back 0: the tables' folder must be one"):
        _checked(planned, written, {1: (4, 4, 4)}, [], tmp_path)


def test_the_driver_counts_each_staged_feature_against_the_tables_runs(tmp_path: Path) -> None:
    """Rows, distinct run ids, and runs of the tables with a value, from the staged files:
    a NULL value or a run id the tables do not hold is no coverage; a feature with no rows
    staged, or not written, has no counts."""
    tables = tmp_path / "tables"
    (tables / "runs").mkdir(parents=True)
    runs = "SELECT * FROM (VALUES ('r1'), ('r2'), ('r3'), ('r3')) AS t(run_id)"
    duckdb.sql(f"COPY ({runs}) TO '{tables / 'runs' / 'part-0.parquet'}' (FORMAT parquet)")
    batch = tmp_path / "staging" / "batch=0"
    staged = {
        0: "('r1', 1.5), ('r2', NULL), ('r9', 2.0)",
        1: "('r1', 1.0), ('r1', 2.0), ('r3', 3.0)",
    }
    for index, rows in staged.items():
        (batch / f"feature={index}").mkdir(parents=True)
        values = f"SELECT * FROM (VALUES {rows}) AS t(run_id, v_double)"
        columns = (
            "run_id, NULL::BIGINT AS v_long, v_double, NULL::BOOLEAN AS v_bool, NULL AS v_text"
        )
        target = batch / f"feature={index}" / "part-00000.parquet"
        duckdb.sql(f"COPY (SELECT {columns} FROM ({values})) TO '{target}' (FORMAT parquet)")
    planned = [_Planned(i, name, "q", "double", None) for i, name in enumerate("abcd")]
    written = {name: (batch, 3) for name in "abc"}
    # rows with a value, as Spark counted them: a feature with several rows for a run is refused
    assert _staged_counts(tables, planned, written) == (3, {0: (3, 3, 1), 1: (3, 2, 3)})


STAGED_DOUBLES = (
    "SELECT * FROM (VALUES ('r1', 1.5), ('r2', -('nan'::DOUBLE)), ('r3', NULL), ('r4', 1e16)) "
    "AS t(run_id, v_double)"
)
"""Rows as the executors stage a DOUBLE feature (``-nan``: a NaN with its sign bit set)."""


def staged_doubles(root: Path, rows: int) -> StagedValues:
    """One feature's values staged as Spark leaves them, under ``root``, said to be ``rows``."""
    folder = root / "batch=0" / "feature=0"
    folder.mkdir(parents=True)
    columns = "run_id, NULL::BIGINT AS v_long, v_double, NULL::BOOLEAN AS v_bool, NULL AS v_text"
    target = folder / "part-00000.parquet"
    duckdb.sql(f"COPY (SELECT {columns} FROM ({STAGED_DOUBLES})) TO '{target}' (FORMAT parquet)")
    return StagedValues({"d": Staged(0, "double", root / "batch=0", rows, 3)}, root)


def test_staged_values_are_read_whole_and_stored_as_write_feature_stores_them(
    tmp_path: Path,
) -> None:
    """DuckDB reads the staged Parquet (no JVM needed): as floats, as text spelled as Python's
    ``str`` (a NaN is ``nan`` whatever its sign bit); gone once discarded."""
    values = staged_doubles(tmp_path / "staging" / "call", rows=4)
    read = values["d"]
    assert read["r1"] == 1.5 and read["r3"] is None and read["r2"] != read["r2"]
    found = SparkFeatures(values, [], {"d": "q"}, runs=5, seconds={})
    spec = FeatureSpec(name="d", sql="SELECT 1", category="static-config")
    for value_type, expected in (
        ("VARCHAR", {"r1": "1.5", "r2": "nan", "r3": None, "r4": "1e+16"}),
        ("DOUBLE", {"r1": 1.5, "r3": None, "r4": 1e16}),
    ):
        typed = spec.model_copy(update={"value_type": value_type})
        store = tmp_path / f"{value_type}.duckdb"
        [stored] = write_spark_features(found, [typed], store)
        assert (stored.rows, stored.coverage) == (4, 3 / 5)
        back = read_store_values(store, [typed.feature_id])[typed.feature_id]
        assert {r: v for r, v in back.items() if v == v} == expected
    with found:
        pass
    assert not (tmp_path / "staging").exists()
    with pytest.raises(WarehouseError, match=r"feature d: the driver reads 0 of the 4 rows"):
        values["d"]


def test_fewer_staged_rows_than_spark_counted_are_an_error(tmp_path: Path) -> None:
    values = staged_doubles(tmp_path / "staging" / "call", rows=5)
    with pytest.raises(WarehouseError, match=r"the driver reads 4 of the 5 rows Spark staged"):
        values["d"]
    found = SparkFeatures(values, [], {"d": "q"}, runs=5, seconds={})
    spec = FeatureSpec(name="d", sql="SELECT 1", category="static-config")
    with pytest.raises(WarehouseError, match=r"the driver reads 4 of the 5 rows"):
        write_spark_features(found, [spec], tmp_path / "features.duckdb")
    assert read_store_values(tmp_path / "features.duckdb", [spec.feature_id]) == {
        spec.feature_id: {}
    }


def test_executor_rows_equal_the_duckdb_ingest_of_the_same_log(tmp_path: Path) -> None:
    """The executors' unit of work builds exactly the rows the DuckDB ingest stores."""
    source = find_event_logs(example_workspace() / "cluster-logs")[0]
    con = open_warehouse(tmp_path / "w.duckdb")
    ingest_event_logs(con, [source.path], IngestReport())
    digest = source_digest(source)
    assert isinstance(digest, str)
    by_table: dict[str, set[tuple[object, ...]]] = {}
    for name, row in log_rows(source, digest, None):
        by_table.setdefault(name, set()).add(hashable(row))
    for t in TABLES:
        stored = {hashable(r) for r in con.execute(duckdb_select(t)).fetchall()}
        built = by_table.get(t.name, set())
        if t.name in ("ingested_files", "ingest_issues"):  # ingest time differs
            stored, built = {r[:-1] for r in stored}, {r[:-1] for r in built}
        assert built == stored, t.name
    con.close()


def hashable(row: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(tuple(v) if isinstance(v, list) else v for v in row)


@pytest.fixture(scope="module")
def duckdb_tables(tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path) -> Path:
    """The example warehouse as a table folder (Parquet per table), written by DuckDB."""
    return export_tables(example_warehouse, tmp_path_factory.mktemp("tables"))


def test_gate_sample_takes_whole_jobs(duckdb_tables: Path, tmp_path: Path) -> None:
    sample = gate_sample(duckdb_tables, tmp_path / "s.duckdb", max_runs=100)
    con = duckdb.connect(str(sample), read_only=True)
    runs = con.execute("SELECT count(*), count(DISTINCT job_id) FROM runs").fetchall()[0]
    assert 0 < runs[0] <= 100 and runs[1] >= 1
    whole = con.execute("SELECT job_id, count(*) FROM runs GROUP BY job_id ORDER BY 1").fetchall()
    orphans = con.execute(
        "SELECT count(*) FROM stages WHERE run_id NOT IN (SELECT run_id FROM runs)"
    ).fetchall()[0][0]
    con.close()
    full = duckdb.connect()
    glob = str(duckdb_tables / "runs" / "*.parquet")
    totals = dict(
        full.execute(
            f"SELECT job_id, count(*) FROM read_parquet('{glob}') GROUP BY job_id"
        ).fetchall()
    )
    full.close()
    assert all(totals[job] == n for job, n in whole)  # every run of each sampled job
    assert orphans == 0


def test_features_materialize_on_duckdb_stores_what_compute_values_gives(
    example_warehouse: Path, tmp_path: Path
) -> None:
    specs = [s for s in load_catalog(CATALOG) if s.category in ("static-config", "calendar")][:4]
    catalog = tmp_path / "catalog"
    save_catalog(catalog, specs)
    store = tmp_path / "features.duckdb"
    args = ["features", "materialize", "--catalog", str(catalog), "--engine", "duckdb"]
    result = runner.invoke(
        app, [*args, "--db", str(example_warehouse), "--store", str(store), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["gated_on"] == "warehouse" and not report["rejected"]
    assert len(report["stored"]) == len(specs)
    assert not (tmp_path / "features.duckdb.spill").exists()  # the batch's spill folder went
    with Sandbox.open(example_warehouse) as sandbox:
        expected = compute_values(sandbox, specs)
    for spec in specs:
        stored = read_feature_values(store, spec.feature_id)
        want = {r: (None if v is None else float(v)) for r, v in expected[spec.name].items()}
        assert stored == want, spec.name
