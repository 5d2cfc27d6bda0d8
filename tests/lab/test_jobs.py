"""The lab's job catalog: interface, parameters, scripts that parse, and a real run of each job."""

from __future__ import annotations

import random
import re
import shutil
import sys
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from autofe.errors import ConfigError
from autofe.lab.jobs import JOBS, LabJob, job, render

DAYS = (0, 1, 7, 180, 1999, 2500)
SCRATCH = "/tmp/autofe-lab-scratch"
TPCH_TABLES = {"lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region"}
TABLES = TPCH_TABLES | {"lineitem_skew", "orders_skew"}
SQL_JOBS = [j for j in JOBS if j.kind == "sql"]
PYSPARK_JOBS = [j for j in JOBS if j.kind == "pyspark"]


def _scripts(j: LabJob) -> list[str]:
    return [j.script, *j.variants]


def _params(j: LabJob, day: int, seed: int = 7) -> dict[str, str]:
    return {**j.params(random.Random(seed * 100_003 + day), day), "scratch": SCRATCH}


def test_catalog_has_enough_uniquely_named_jobs() -> None:
    names = [j.name for j in JOBS]
    assert len(JOBS) >= 25
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names)
    assert len(PYSPARK_JOBS) >= 2
    assert sum(1 for j in JOBS if j.variants) >= 3


@pytest.mark.parametrize("j", JOBS, ids=lambda j: j.name)
def test_job_declares_known_tables_and_schedule(j: LabJob) -> None:
    assert j.tables and set(j.tables) <= TABLES
    assert j.schedule in ("daily", "hourly", "weekly", "adhoc")
    assert j.description


def test_job_lookup_by_name() -> None:
    assert job(JOBS[0].name) is JOBS[0]
    with pytest.raises(ConfigError, match=r"unknown lab job 'nope'; known: .*idle_stock"):
        job("nope")


@pytest.mark.parametrize("j", JOBS, ids=lambda j: j.name)
def test_params_are_deterministic_for_a_seed(j: LabJob) -> None:
    for day in DAYS:
        assert j.params(random.Random(3), day) == j.params(random.Random(3), day)


@pytest.mark.parametrize("j", JOBS, ids=lambda j: j.name)
def test_date_windows_stay_in_tpch_range(j: LabJob) -> None:
    for day in DAYS:
        p = _params(j, day)
        start, end = date.fromisoformat(p["start"]), date.fromisoformat(p["end"])
        assert date(1992, 1, 1) <= start < end <= date(1998, 12, 31)
        assert int(p["days"]) == (end - start).days


def test_window_length_spans_two_weeks_to_two_years() -> None:
    lengths = [
        int(job("segment_order_value").params(random.Random(s), s)["days"]) for s in range(400)
    ]
    assert min(lengths) <= 16 and max(lengths) >= 600


def test_moving_windows_follow_the_virtual_day() -> None:
    ends = [job("daily_revenue_by_shipmode").params(random.Random(0), d)["end"] for d in (5, 6)]
    assert date.fromisoformat(ends[1]).toordinal() - date.fromisoformat(ends[0]).toordinal() == 1


def _source_tables(statements: list[exp.Expr]) -> set[str]:
    """Tables the statements read, minus CTE names and the job's own ``lab_*`` outputs."""
    ctes = {c.alias for s in statements for c in s.find_all(exp.CTE)}
    names = {t.name for s in statements for t in s.find_all(exp.Table)}
    return {n for n in names - ctes if not n.startswith("lab_")}


@pytest.mark.parametrize("j", SQL_JOBS, ids=lambda j: j.name)
def test_sql_scripts_parse_as_spark_after_substitution(j: LabJob) -> None:
    read: set[str] = set()
    for script in _scripts(j):
        for day in DAYS:
            sql = render(script, _params(j, day))
            statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
            assert statements, j.name
            assert isinstance(statements[-1], exp.Query), "the last statement is the forced query"
            read |= _source_tables(statements)
    assert read == set(j.tables)


@pytest.mark.parametrize("j", SQL_JOBS, ids=lambda j: j.name)
def test_sql_scripts_use_every_drawn_parameter(j: LabJob) -> None:
    used = set(re.findall(r"\$\{(\w+)\}", "".join(_scripts(j))))
    assert set(j.params(random.Random(0), 0)) - {"days"} <= used


@pytest.mark.parametrize("j", PYSPARK_JOBS, ids=lambda j: j.name)
def test_pyspark_scripts_compile_and_define_run(j: LabJob) -> None:
    for script in _scripts(j):
        namespace: dict[str, Any] = {}
        exec(compile(script, f"<lab job {j.name}>", "exec"), namespace)
        assert callable(namespace["run"])
        needed = set(re.findall(r"params\[\"(\w+)\"\]", script))
        assert needed <= set(_params(j, 0))


# --- a real run of every job on local PySpark over TPC-H SF 0.01 --------------------------------


def _tpchgen() -> str | None:
    beside = Path(sys.executable).parent / "tpchgen-cli"
    return str(beside) if beside.exists() else shutil.which("tpchgen-cli")


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if _tpchgen() is None:
        pytest.skip("tpchgen-cli is not installed")
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from autofe.lab.data import prepare_data, table_dir

    # The lab's own layout: month-partitioned fact tables and Zipf-skewed copies.
    root = tmp_path_factory.mktemp("tpch")
    prepare_data(root, (0.01,), seed=1)
    session = (
        SparkSession.builder.master("local[1]")
        .appName("autofe-lab-jobs-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .getOrCreate()
    )
    for table in TABLES:
        session.read.parquet(table_dir(root, 0.01, table).as_posix()).createOrReplaceTempView(table)
    yield session
    session.stop()


def _run(spark: Any, j: LabJob, script: str, params: dict[str, str]) -> None:
    if j.kind == "pyspark":
        namespace: dict[str, Any] = {}
        exec(compile(script, f"<lab job {j.name}>", "exec"), namespace)
        namespace["run"](spark, params)
        return
    statements = [s for s in render(script, params).split(";") if s.strip()]
    for statement in statements[:-1]:
        spark.sql(statement)
    spark.sql(statements[-1]).collect()


@pytest.mark.slow
@pytest.mark.parametrize("j", JOBS, ids=lambda j: j.name)
def test_every_job_runs_on_local_spark(spark: Any, j: LabJob, tmp_path: Path) -> None:
    # A long window so every job meets data; variants run on a shorter one.
    params = {**j.params(random.Random(11), 1500), "scratch": str(tmp_path)}
    for i, script in enumerate(_scripts(j)):
        started = time.perf_counter()
        _run(spark, j, script, params)
        print(f"{j.name} script {i}: {time.perf_counter() - started:.2f}s")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["daily_revenue_by_shipmode", "cross_nation_trade"])
def test_date_windows_prune_month_partitions(spark: Any, name: str) -> None:
    j = job(name)
    sql = render(j.script, {**j.params(random.Random(1), 300), "scratch": SCRATCH})
    plan = spark.sql(sql)._jdf.queryExecution().executedPlan().toString()
    filters = re.findall(r"PartitionFilters: \[([^\]]*)\]", plan)
    assert any("l_shipmonth" in f and ">=" in f for f in filters), filters
