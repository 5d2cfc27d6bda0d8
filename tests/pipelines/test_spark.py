"""DuckDB and Spark (``local[2]``) compute the same: ingest row counts, every feature of a real run,
and each translation rule on edge-case values.

* Ingest: the shipped example workspace through ``spark_ingest`` (logs parsed on the executors)
  gives every warehouse table the row count ``autofe ingest`` gives it.
* Features: ``tests/fixtures/catalogs/ex8`` holds the 132 features the gates accepted in a full
  ``autofe run`` on the same example workspace (``/work/scratch/ex8-run``, committed for the scale
  benchmark). Each is computed by DuckDB's sandbox on the DuckDB ingest and by Spark on the Spark
  ingest; every one Spark computes has the same value for every run (exact for integers, 1e-9
  relative for floats), and every other one is refused with a reason.
* Rules: a small warehouse of edge cases (zero, -0.0, NaN and infinite divisors, half-way
  roundings, number and date text in many spellings, newlines and non-ASCII text for regular
  expressions, NULL list elements, pre-1970 times...) and one feature per rule; DuckDB's
  answer on the warehouse, Spark's on the same rows as Parquet.

Spark starts once for the module (about 10 s); the settings below suit a warehouse this small.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from parity import differences, export_tables, same

from autofe.config import example_workspace
from autofe.feature_catalog import load_catalog, read_feature_file
from autofe.featurespec import FeatureSpec
from autofe.gates.admit import coverage
from autofe.gates.admit import run_ids as warehouse_runs
from autofe.modeling.compute import compute_values
from autofe.modeling.dataset import Value
from autofe.pipelines.spark import (
    BROADCAST_THRESHOLD,
    FEATURE_STAGING,
    SparkFeatures,
    SparkSettings,
    materialize_on_spark,
    spark_ingest,
    spark_session,
    write_spark_features,
)
from autofe.sandbox.session import Sandbox
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.docs import table_counts
from autofe.warehouse.feature_store import read_feature_values, read_store_values, write_feature
from autofe.warehouse.write import insert_rows

pytestmark = pytest.mark.slow

CATALOG = Path(__file__).resolve().parents[1] / "fixtures" / "catalogs" / "ex8"
SMALL_DATA = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    # whole-stage code generation and adaptive re-planning cost more than they save on
    # tables of a few thousand rows (measured: docs/spark.md)
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with spark_session(SparkSettings(master="local[2]", conf=SMALL_DATA)) as session:
        yield session


@pytest.fixture(scope="module")
def spark_tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("spark-tables")
    report = spark_ingest([example_workspace()], out, SparkSettings(), session=spark)
    return out, report


def test_ingest_gives_every_table_duckdbs_row_count(
    spark_tables: tuple[Path, Any], example_warehouse: Path
) -> None:
    _, report = spark_tables
    assert report.logs > 0 and not report.issues
    assert report.tables == table_counts(example_warehouse)


def test_every_accepted_feature_has_duckdbs_values_on_spark(
    spark: Any, spark_tables: tuple[Path, Any], example_warehouse: Path, tmp_path: Path
) -> None:
    specs = load_catalog(CATALOG)
    found = materialize_on_spark(specs, spark_tables[0], SparkSettings(), session=spark)
    assert set(found.values) | {r.name for r in found.refused} == {s.name for s in specs}
    assert all(r.reason and r.stage in ("transpile", "plan") for r in found.refused)
    computed = [s for s in specs if s.name in found.values]
    assert len(computed) > len(found.refused)
    with Sandbox.open(example_warehouse) as sandbox:
        duck = compute_values(sandbox, computed)
    wrong = {name: differences(duck[name], found.values[name])[:3] for name in duck}
    assert {name: d for name, d in wrong.items() if d} == {}
    _report_counts(found, specs, tmp_path)
    stored = write_spark_features(found, computed, tmp_path / "features.duckdb")
    assert len(stored) == len(computed)
    first = computed[0]
    back = read_feature_values(tmp_path / "features.duckdb", first.feature_id)
    assert differences({r: _stored(v) for r, v in duck[first.name].items()}, back) == []


def _stored(value: Any) -> Any:
    return None if value is None else float(value)


def _report_counts(found: Any, specs: list[FeatureSpec], tmp_path: Path) -> None:
    """Kept with the test output: the numbers docs/spark.md quotes."""
    summary = {
        "features": len(specs),
        "computed": len(found.values),
        "refused": [r.as_dict() for r in found.refused],
        "seconds": found.seconds["total"],
    }
    (tmp_path / "parity.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if k != "refused"}))


def test_restricting_to_some_runs_gives_their_values(
    spark: Any, spark_tables: tuple[Path, Any], example_warehouse: Path
) -> None:
    """compute_values(run_ids=...) semantics: only those runs, the same values."""
    specs = [s for s in load_catalog(CATALOG) if s.category == "history"][:3]
    with Sandbox.open(example_warehouse) as sandbox:
        run_ids = [
            r[0] for r in sandbox.query("SELECT run_id FROM runs ORDER BY run_id").rows[::97]
        ]
        duck = compute_values(sandbox, specs, run_ids)
    found = materialize_on_spark(
        specs, spark_tables[0], SparkSettings(), session=spark, run_ids=run_ids
    )
    for spec in specs:
        assert set(found.values[spec.name]) <= set(run_ids)
        assert differences(duck[spec.name], found.values[spec.name]) == []


@contextmanager
def counted_jobs(spark: Any) -> Iterator[Callable[[], list[int]]]:
    """The Spark jobs started in the block (a job group of its own)."""
    sc = spark.sparkContext
    group = f"autofe-test-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "counted")
    try:
        yield lambda: list(sc.statusTracker().getJobIdsForGroup(group))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)


def test_features_run_as_one_spark_job_per_batch(
    spark: Any, spark_tables: tuple[Path, Any]
) -> None:
    """However many features a batch holds, it is one job that the executors write; the driver
    runs no job of its own (it counts the staged values from their files) and collects nothing.

    Broadcast joins are off while features run (each would be a job collecting a table into the
    driver), and these features have no global ORDER BY (whose range partitioning samples a few
    sort keys in a job of its own): what is left is the batches' jobs.
    """
    plain_specs = [
        s
        for s in load_catalog(CATALOG)
        if not re.search(r"\border\s+by\b|\blimit\b|\bjoin\b", s.sql, re.IGNORECASE)
    ]
    threshold = spark.conf.get(BROADCAST_THRESHOLD)
    with counted_jobs(spark) as jobs:
        found = materialize_on_spark(
            plain_specs, spark_tables[0], SparkSettings(), session=spark, batch_features=8
        )
    planned = len(plain_specs) - sum(r.stage != "run" for r in found.refused)
    batches = math.ceil(planned / 8)
    assert len(found.values) >= 16 and batches <= 3
    assert len(jobs()) <= batches < planned
    assert spark.conf.get(BROADCAST_THRESHOLD) == threshold  # the session's own, back


# ------------------------------------------------------------------ rules on edge cases

DOUBLES = [
    *(2.5, 3.5, -2.5, 0.0, -0.0, float("nan"), float("inf"), float("-inf")),
    *(1e300, 1e20, 0.1, None, 7.0, 4503599627370497.0, -0.5),
]
NUMBER_TEXT = [
    *("1", " 12 ", "1_000", "1__0", "1.5d", "1.5f", "inf", "-Infinity", "NaN", "1e400"),
    *("1e-400", "", " ", "abc", ".5", "5.", "+5", "-5", "0x1A", "\t7\n", "1,5", "1e"),
    *("0001.5", "1 2", None),
]
DATE_TEXT = [
    *("2024-01-05", "2024-1-5", " 2024-01-05 ", "2024-02-30", "2024-02-29", "abc", ""),
    *(None, "0001-01-01", "9999-12-31", "x2024-01-05"),
]
TEXT = [
    *("a JOIN b", "ajoinb", "x\nJoin\n", "line one\nline two", "a\x0bb", "İSTANBUL ΟΔΟΣ"),
    *("back\\slash", "a_c", "abc", "x.y.z", "", None, "日本 join", "K", "ſ", "1 2 22 333"),
    *("a\nb", "tail\n"),
]
LISTS: list[list[Any] | None] = [
    *(["--days", "3", "--full"], ["--days"], [], None, ["a", None, "b"]),
    *(["--days", "x", "--days", "y"], [1, 2.50, True, None]),
]
TIMES = [
    *(datetime(2024, 3, 9, 23, 59, 59, 900_000), datetime(1969, 12, 31, 23, 59, 59, 500_000)),
    *(datetime(2024, 2, 29, 12, 0), datetime(2024, 12, 31, 23, 0)),
    datetime(2023, 1, 1, 0, 0, 0, 1),
]
CONF: list[dict[str, Any]] = [
    *({"spark.master": "local[4]", "n": 1.50}, {"spark.master": "spark://x"}, {"n": 100}),
    *({"n": 1e5}, {"n": {"a": [1, {"b": 2}]}}, {}),
]


def _at(values: list[Any], i: int) -> Any:
    return values[i % len(values)]


def _edge_rows(i: int) -> dict[str, list[dict[str, Any]]]:
    """Run ``i`` of the edge-case warehouse: edge values cycled over runs, so runs pair them."""
    run_id, submit = f"r{i:02d}", _at(TIMES, i)
    ends = submit + timedelta(seconds=[0.2, 1.1, 3599.9, 86400 * 40][i % 4])
    params = {"python_params": _at(LISTS, i), "days": _at(NUMBER_TEXT, i)}
    run = {
        **{"run_id": run_id, "job_id": f"j{i % 3}", "submit_time": submit},
        **{"start_time": submit, "end_time": ends, "duration_s": _at(DOUBLES, i)},
        **{"status": _at(TEXT, i), "script_text": _at(TEXT, i + 1)},
        **{"cluster_config_id": f"c{i % len(CONF)}", "parameters": json.dumps(params)},
    }
    known = "known_at_submit"
    attributes = [
        {
            "run_id": run_id,
            "name": "text",
            "value_text": _at(NUMBER_TEXT, i),
            "availability": known,
        },
        {"run_id": run_id, "name": "date", "value_text": _at(DATE_TEXT, i), "availability": known},
    ]
    return {
        "runs": [run],
        "run_attributes": attributes,
        "stages": [_stage(i, k) for k in range(i % 4)],
    }


def _stage(i: int, k: int) -> dict[str, Any]:
    return {
        **{"app_key": f"a{i}", "run_id": f"r{i:02d}", "stage_id": k, "attempt_id": 0},
        **{"name": None if (i + k) % 3 == 0 else f"s{k}", "duration_ms": (i * 7 + k * 13) % 11},
        **{"failed_tasks": k % 2, "task_duration_p50_ms": _at(DOUBLES, i + k)},
    }


@pytest.fixture(scope="module")
def edge_warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The edge-case warehouse in DuckDB, and the same rows as a Parquet table folder."""
    folder = tmp_path_factory.mktemp("edges")
    con = open_warehouse(folder / "edges.duckdb")
    configs = [{"config_id": f"c{k}", "spark_conf": json.dumps(c)} for k, c in enumerate(CONF)]
    rows: dict[str, list[dict[str, Any]]] = {
        "jobs": [{"job_id": f"j{k}", "name": f"job {k}"} for k in range(3)],
        "cluster_configs": configs,
    }
    for i in range(2 * max(len(DOUBLES), len(NUMBER_TEXT), len(TEXT))):
        for name, batch in _edge_rows(i).items():
            rows.setdefault(name, []).extend(batch)
    for name, batch in rows.items():
        insert_rows(con, name, batch)
    con.close()
    return folder / "edges.duckdb", export_tables(folder / "edges.duckdb", folder / "tables")


SEMANTICS = sorted(
    (Path(__file__).resolve().parents[1] / "fixtures" / "spark_semantics").glob("*.sql")
)


@pytest.fixture(scope="module")
def semantics(spark: Any, edge_warehouse: tuple[Path, Path]) -> Iterator[SparkFeatures]:
    """The rule features computed on Spark once for the module."""
    specs = [read_feature_file(path) for path in SEMANTICS]
    with materialize_on_spark(specs, edge_warehouse[1], SparkSettings(), session=spark) as found:
        yield found


def test_each_rule_gives_duckdbs_values(
    semantics: SparkFeatures, edge_warehouse: tuple[Path, Path]
) -> None:
    db, _ = edge_warehouse
    specs = [read_feature_file(path) for path in SEMANTICS]
    found = semantics
    assert [r.as_dict() for r in found.refused] == []
    with Sandbox.open(db) as sandbox:
        duck = compute_values(sandbox, specs)
    wrong = {name: differences(duck[name], found.values[name])[:3] for name in duck}
    assert {name: d for name, d in wrong.items() if d} == {}
    assert any(v is not None and math.isinf(float(v)) for v in duck["div_by_double"].values())


def test_text_only_duckdb_reads_fails_the_spark_query_rather_than_differing(
    spark: Any, edge_warehouse: tuple[Path, Path]
) -> None:
    """A date spelled with slashes (DuckDB reads it, the translation does not) and a DOUBLE
    printed as text (2.5: Java and DuckDB spell some such values differently): run refused."""
    sql = (
        "SELECT r.run_id, TRY_CAST(replace(a.value_text, '-', '/') AS DATE) AS value "
        "FROM runs AS r JOIN run_attributes AS a ON a.run_id = r.run_id AND a.name = 'date'"
    )
    dates = FeatureSpec(name="slashed_date", sql=sql, category="static-config")
    halves = FeatureSpec(
        name="half_as_text",
        sql="SELECT r.run_id, CAST(r.duration_s AS VARCHAR) AS value FROM runs AS r",
        category="static-config",
    )
    found = materialize_on_spark([dates, halves], edge_warehouse[1], SparkSettings(), session=spark)
    assert [(r.name, r.stage) for r in found.refused] == [
        ("slashed_date", "run"),
        ("half_as_text", "run"),
    ]
    assert "only DuckDB reads" in found.refused[0].reason
    assert "not a whole number" in found.refused[1].reason


FLOAT_TEXT = re.compile(r"-?\d+(\.\d+)?(e[+-]\d+)?")


def same_stored(duck: Value, spark: Value) -> bool:
    """As :func:`same`; two floats stored as text may differ in their last digits too."""
    if isinstance(duck, str) and isinstance(spark, str) and duck != spark:
        floats = [FLOAT_TEXT.fullmatch(t) and ("." in t or "e" in t) for t in (duck, spark)]
        return all(floats) and same(float(duck), float(spark))
    return same(duck, spark)


def test_the_store_holds_what_write_feature_stores_of_duckdbs_values(
    semantics: SparkFeatures, edge_warehouse: tuple[Path, Path], tmp_path: Path
) -> None:
    """Integers, floats, decimals, booleans, text, dates and times, stored as text (VARCHAR
    features) and as numbers (the others): DuckDB reads the staged Parquet into the store as
    ``write_feature`` stores the values DuckDB computes, with the same row count and coverage."""
    db, _ = edge_warehouse
    specs = [read_feature_file(path) for path in SEMANTICS]
    with Sandbox.open(db) as sandbox:
        duck = compute_values(sandbox, specs)
        runs = warehouse_runs(sandbox)
    texts = [s.model_copy(update={"value_type": "VARCHAR"}) for s in specs]
    numeric = {
        n for n, values in duck.items() if not any(isinstance(v, str) for v in values.values())
    }
    numbers = [s.model_copy(update={"value_type": "DOUBLE"}) if s.name in numeric else t
               for s, t in zip(specs, texts, strict=True)]  # fmt: skip
    assert len(numeric) > 20 and len(specs) - len(numeric) > 10
    for variant, typed in (("text", texts), ("number", numbers)):
        store, reference = tmp_path / f"{variant}.duckdb", tmp_path / f"{variant}-duck.duckdb"
        stored = write_spark_features(semantics, typed, store)
        expected = [
            write_feature(reference, s, list(duck[s.name].items()), coverage(duck[s.name], runs))
            for s in typed
        ]
        assert sorted(stored, key=str) == sorted(expected, key=str)
        ids = [s.feature_id for s in typed]
        ours, theirs = read_store_values(store, ids), read_store_values(reference, ids)
        wrong = {
            f: [
                (r, v, ours[f].get(r))
                for r, v in values.items()
                if not same_stored(v, ours[f].get(r))
            ]
            for f, values in theirs.items()
        }
        assert {f: w[:3] for f, w in wrong.items() if w} == {}
        assert {f: set(v) for f, v in ours.items()} == {f: set(v) for f, v in theirs.items()}


def test_a_failing_or_ambiguous_feature_is_refused_alone(
    spark: Any, edge_warehouse: tuple[Path, Path]
) -> None:
    """One batch: the feature that fails is refused with its own message after the batch runs
    again in halves, one with several rows for a run is refused, the others are computed; the
    staged values are gone once the result is closed."""
    db, tables = edge_warehouse
    good = [read_feature_file(path) for path in SEMANTICS[:5]]
    fails = FeatureSpec(
        name="half_as_text",
        sql="SELECT r.run_id, CAST(r.duration_s AS VARCHAR) AS value FROM runs AS r",
        category="static-config",
    )
    twice = FeatureSpec(
        name="stage_durations",
        sql="SELECT s.run_id, s.duration_ms AS value FROM stages AS s",
        category="static-config",
    )
    specs = [*good[:2], fails, *good[2:4], twice, good[4]]
    with materialize_on_spark(
        specs, tables, SparkSettings(), session=spark, batch_features=len(specs)
    ) as found:
        assert [(r.name, r.stage) for r in found.refused] == [
            ("half_as_text", "run"),
            ("stage_durations", "run"),
        ]
        assert "not a whole number" in found.refused[0].reason
        assert found.refused[1].reason == "returns several rows for one run"
        with Sandbox.open(db) as sandbox:
            duck = compute_values(sandbox, good)
        assert {n: differences(duck[n], found.values[n])[:3] for n in duck} == {n: [] for n in duck}
        batches = {staged.batch for staged in found.values.staged.values()}
        assert batches and all(b.parent.parent.name == FEATURE_STAGING for b in batches)
    assert not any(b.parent.exists() for b in batches)
