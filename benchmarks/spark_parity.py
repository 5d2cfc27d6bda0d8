"""Spark parity on the example workspace, measured: ingest counts and times, how many features of
a real run Spark computes with DuckDB's values, what is refused and why, and what sqlglot's
plain DuckDB → Spark transpilation would have computed instead.

Run: ``.venv/bin/python benchmarks/spark_parity.py [--master local[2]] [--write docs/results.md]``

The feature catalog is ``tests/fixtures/catalogs/ex8``: the 132 features the gates accepted in a
full ``autofe run`` on the example workspace. Values are compared as ``make test-spark`` does
(``tests/pipelines/parity.py``: exact for integers, 1e-9 relative for floats).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlglot
from report import machine, write_section

from autofe.config import IngestSettings, example_workspace
from autofe.feature_catalog import load_catalog
from autofe.featurespec import FeatureSpec
from autofe.ingest.ingest import ingest
from autofe.modeling.compute import compute_values, plain
from autofe.modeling.dataset import Value
from autofe.pipelines.spark import (
    SparkSettings,
    materialize_on_spark,
    register_tables,
    spark_ingest,
    spark_session,
)
from autofe.sandbox.session import Sandbox
from autofe.warehouse.docs import table_counts

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "pipelines"))
from parity import differences  # noqa: E402

CATALOG = REPO / "tests" / "fixtures" / "catalogs" / "ex8"
SMALL_DATA = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}


def naive(spark: Any, spec: FeatureSpec) -> dict[str, Value] | str:
    """sqlglot's own DuckDB → Spark transpilation, run as is: values, or why it failed."""
    try:
        rows = spark.sql(sqlglot.transpile(spec.sql, read="duckdb", write="spark")[0]).collect()
    except Exception as exc:  # any failure counts as one
        return type(exc).__name__
    return {str(r[0]): plain(r[1]) for r in rows if r[0] is not None}


def measure(master: str, work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    db = work / "example.duckdb"
    ingest([example_workspace()], IngestSettings(db=db, workers=2))
    duck_ingest_s = time.perf_counter() - started
    specs = load_catalog(CATALOG)
    with Sandbox.open(db) as sandbox:
        begun = time.perf_counter()
        duck = compute_values(sandbox, specs)
        duck_features_s = time.perf_counter() - begun
    with spark_session(SparkSettings(master=master, conf=SMALL_DATA)) as spark:
        report = spark_ingest(
            [example_workspace()], work / "tables", SparkSettings(), session=spark
        )
        found = materialize_on_spark(specs, work / "tables", SparkSettings(), session=spark)
        register_tables(spark, work / "tables")
        plain_sqlglot = {s.name: naive(spark, s) for s in specs}
    wrong = [n for n, v in found.values.items() if differences(duck[n], v)]
    outcome = collections.Counter(
        "failed" if isinstance(v, str) else "differ" if differences(duck[n], v) else "equal"
        for n, v in plain_sqlglot.items()
    )
    return {
        "counts_equal": report.tables == table_counts(db),
        "rows": sum(report.tables.values()),
        "duck_ingest_s": duck_ingest_s,
        "spark_ingest_s": report.seconds,
        "features": len(specs),
        "computed": len(found.values),
        "wrong": wrong,
        "refused": found.refused,
        "duck_features_s": duck_features_s,
        "spark_features_s": found.seconds["total"],
        "naive": outcome,
    }


def render(m: dict[str, Any], master: str) -> str:
    load = os.getloadavg()[0]
    reasons = collections.Counter(f"{r.stage}: {_family(r.reason)}" for r in m["refused"])
    lines = [
        f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/spark_parity.py --master "
        f"'{master}'`. 1-minute load average at the end: {load:.1f}.\n",
        f"- Ingest of the example workspace: {m['rows']:,} rows, every table's count equal to "
        f"DuckDB's: **{m['counts_equal']}**; DuckDB {m['duck_ingest_s']:.1f} s (2 parser "
        f"processes), Spark {m['spark_ingest_s']:.1f} s (session already running).",
        f"- Features of the example run (`tests/fixtures/catalogs/ex8`): {m['features']}; "
        f"computed on Spark **{m['computed']}**, of which with a value differing from DuckDB's: "
        f"**{len(m['wrong'])}**; refused {len(m['refused'])}. DuckDB {m['duck_features_s']:.1f} s, "
        f"Spark {m['spark_features_s']:.1f} s.",
        "- Refused, by reason:",
        *(f"  - {n} × {why}" for why, n in reasons.most_common()),
        f"- sqlglot's plain transpilation of the same {m['features']} features: "
        f"{m['naive']['equal']} give DuckDB's values, {m['naive']['differ']} give other values "
        f"(silently), {m['naive']['failed']} fail in Spark.",
        "",
    ]
    return "\n".join(lines)


def _family(reason: str) -> str:
    """A refusal's reason without the SQL it quotes."""
    return reason.split(": ", 1)[-1][:110] if ": " in reason[:90] else reason[:110]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--write", type=Path, help="results file to update (docs/results.md)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        body = render(measure(args.master, Path(work)), args.master)
    print(body)
    if args.write:
        write_section(args.write, "spark-parity", body)


if __name__ == "__main__":
    main()
