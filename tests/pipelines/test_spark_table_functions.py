"""DuckDB's ``range(n) AS t(j)`` and ``unnest(list) AS x`` in a select list, translated to
Spark's ``range`` table-valued function and ``explode`` (``autofe/sandbox/spark_rules.py``),
compute the same on Spark ``local[2]``:

* edge cases: NULL, empty and one-empty-string lists (no row, no row, one row), ``range(0)``;
* every knowledge-base recipe using either, computed by DuckDB's sandbox on the example
  workspace's DuckDB ingest and by Spark on its Spark ingest.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from parity import differences, export_tables

from autofe.config import example_workspace
from autofe.errors import Untranspilable
from autofe.featurespec import FeatureSpec
from autofe.knowledge_base.corpus import load_corpus, recipe_spec
from autofe.modeling.compute import compute_values
from autofe.pipelines.spark import SparkSettings, materialize_on_spark, spark_ingest, spark_session
from autofe.sandbox.session import Sandbox
from autofe.sandbox.transpile import to_spark_sql
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.write import insert_rows

pytestmark = pytest.mark.slow

SMALL_DATA = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}
RANGE = re.compile(r"\bJOIN\s+range\(", re.IGNORECASE)
UNNEST = re.compile(r"\bunnest\(", re.IGNORECASE)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with spark_session(SparkSettings(master="local[2]", conf=SMALL_DATA)) as session:
        yield session


# job ids: no list, a list of one empty string, no letters (an empty list), letters
JOB_IDS = {"r1": None, "r2": "", "r3": "123", "r4": "ab", "r5": "a1,b2,a3"}
ROWS_PER_RUN = (
    "WITH u AS (SELECT t.run_id, t.job_id, unnest({list}) AS x FROM runs AS t), "
    "b AS (SELECT u.run_id, u.x, back.j FROM u CROSS JOIN range({n}) AS back(j)) "
    "SELECT t.run_id, count(b.run_id) * 1000 + coalesce(sum(b.j), 0) * 100 "
    "+ count(DISTINCT b.x) * 10 + count(b.x) AS value "
    "FROM runs AS t LEFT JOIN b ON b.run_id = t.run_id GROUP BY t.run_id"
)
EDGE_FEATURES = {
    "split": ROWS_PER_RUN.format(list="string_split(t.job_id, ',')", n=2),
    "letters": ROWS_PER_RUN.format(list="regexp_extract_all(t.job_id, '[a-z]')", n=3),
    "range_0": ROWS_PER_RUN.format(list="string_split(t.job_id, ',')", n=0),
}


@pytest.fixture(scope="module")
def edge_tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The edge-case warehouse in DuckDB, and the same rows as a Parquet table folder."""
    folder = tmp_path_factory.mktemp("table-function-edges")
    con = open_warehouse(folder / "edges.duckdb")
    insert_rows(con, "runs", [{"run_id": r, "job_id": j} for r, j in JOB_IDS.items()])
    con.close()
    return folder / "edges.duckdb", export_tables(folder / "edges.duckdb", folder / "tables")


def test_edge_cases_give_duckdbs_values(spark: Any, edge_tables: tuple[Path, Path]) -> None:
    db, tables = edge_tables
    specs = [FeatureSpec(name=n, sql=s, category="history") for n, s in EDGE_FEATURES.items()]
    with Sandbox.open(db) as sandbox:
        duck = compute_values(sandbox, specs)
    with materialize_on_spark(specs, tables, SparkSettings(), session=spark) as found:
        assert [r.as_dict() for r in found.refused] == []
        wrong = {n: differences(duck[n], found.values[n]) for n in duck}
    assert {n: d for n, d in wrong.items() if d} == {}
    # NULL list: no row; [''] a row per j; 3 parts x 2 j; no letters: no row; 2 letters x 3 j
    assert [duck["split"][r] for r in ("r1", "r2", "r5")] == [0, 2112, 6336]
    assert [duck["letters"][r] for r in ("r3", "r4")] == [0, 6000 + 600 + 20 + 6]
    assert set(duck["range_0"].values()) == {0}


@pytest.fixture(scope="module")
def example_tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("table-functions-example")
    spark_ingest([example_workspace()], out, SparkSettings(), session=spark)
    return out


def recipes(pattern: re.Pattern[str]) -> list[FeatureSpec]:
    """The knowledge-base recipes whose SQL matches ``pattern`` and translates."""
    found = [recipe_spec(d, r) for d in load_corpus() for r in d.recipes]
    return [s for s in found if pattern.search(s.sql) and _translates(s)]


def _translates(spec: FeatureSpec) -> bool:
    try:
        to_spark_sql(spec.sql)
    except Untranspilable:
        return False
    return True


@pytest.mark.parametrize(("pattern", "least"), [(RANGE, 10), (UNNEST, 8)], ids=["range", "unnest"])
def test_recipes_give_duckdbs_values_on_the_example(
    spark: Any, example_tables: Path, example_warehouse: Path, pattern: re.Pattern[str], least: int
) -> None:
    specs = recipes(pattern)
    assert len(specs) >= least
    with Sandbox.open(example_warehouse) as sandbox:
        duck = compute_values(sandbox, specs)
    with materialize_on_spark(specs, example_tables, SparkSettings(), session=spark) as found:
        wrong = {n: differences(duck[n], found.values[n])[:3] for n in found.values}
        refused = [r.as_dict() for r in found.refused]
    assert {n: d for n, d in wrong.items() if d} == {}
    assert refused == []
    valued = sorted(n for n in found.values if any(v is not None for v in duck[n].values()))
    print({"recipes": len(specs), "equal on Spark": len(found.values), "with values": valued})
