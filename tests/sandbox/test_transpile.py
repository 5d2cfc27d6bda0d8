"""DuckDB → Spark SQL translation: the rules as fixture files, and the shipped feature catalog.

Each ``tests/fixtures/spark_transpile/*.sql`` starts with a header::

    -- expect: spark                     (or: refuse <words of the reason>)
    -- why: the difference between the engines the rule handles
    -- spark: <text the Spark SQL must contain>   (any number of lines)

Whether the Spark SQL computes DuckDB's values is shown on Spark itself, in
``tests/pipelines/test_spark.py``; here the translation is checked without starting Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlglot

from autofe.errors import Untranspilable
from autofe.feature_catalog import load_catalog
from autofe.modeling.compute import parse_query
from autofe.sandbox.rewrite import restricted
from autofe.sandbox.transpile import to_spark_sql

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RULE_FILES = sorted((FIXTURES / "spark_transpile").glob("*.sql"))
HEADER = re.compile(r"^-- (expect|why|spark): (.+)$")
# sqlglot carries the header into the output as comments, where every expectation would be found
HEADER_COMMENT = re.compile(r"/\* (?:expect|why|spark): .*? \*/\s*")


@dataclass(frozen=True)
class Case:
    sql: str
    expect: str
    reason: str
    spark: tuple[str, ...]


def read_case(path: Path) -> Case:
    sql = path.read_text()
    fields: dict[str, list[str]] = {}
    for line in sql.splitlines():
        if match := HEADER.match(line):
            fields.setdefault(match.group(1), []).append(match.group(2))
    verdict, _, reason = fields["expect"][0].partition(" ")
    assert fields.get("why"), f"{path.name}: say why the rule exists"
    return Case(sql, verdict, reason, tuple(fields.get("spark", ())))


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_rule_fixture(path: Path) -> None:
    case = read_case(path)
    if case.expect == "refuse":
        with pytest.raises(Untranspilable, match=re.escape(case.reason)):
            to_spark_sql(case.sql)
        return
    assert case.expect == "spark"
    spark_sql = HEADER_COMMENT.sub("", to_spark_sql(case.sql))
    for part in case.spark:
        assert part in spark_sql, f"{part!r} not in {spark_sql}"
    sqlglot.parse_one(spark_sql, read="spark")  # the output is one well-formed Spark statement


def test_every_fixture_kind_is_present() -> None:
    kinds = {read_case(p).expect for p in RULE_FILES}
    assert kinds == {"spark", "refuse"}


CATALOG = FIXTURES / "catalogs" / "ex8"


def test_the_example_catalog_translates_or_is_refused_with_a_reason() -> None:
    """Every accepted feature of a real run: Spark SQL, or a refusal naming the construct."""
    translated, refused = 0, []
    for spec in load_catalog(CATALOG):
        try:
            sqlglot.parse_one(to_spark_sql(spec.sql), read="spark")
            translated += 1
        except Untranspilable as exc:
            refused.append(exc.reason)
    assert translated > len(refused)
    assert all(": " in reason or "referenced from" in reason for reason in refused)


def test_a_restricted_feature_translates_with_its_run_filter() -> None:
    spec = load_catalog(CATALOG)[0]
    spark_sql = to_spark_sql(restricted(parse_query(spec), ["a-run", "b-run"]))
    assert "IN ('a-run', 'b-run')" in spark_sql


def test_refusals_name_what_is_refused() -> None:
    with pytest.raises(Untranspilable, match=r"^ROUND\(t\.duration_s, 2\): round\(DOUBLE, n\)"):
        to_spark_sql("SELECT t.run_id, round(t.duration_s, 2) AS value FROM runs AS t")


def test_two_statements_are_refused_by_the_sandbox_first() -> None:
    with pytest.raises(Untranspilable, match="sandbox refuses it: only one statement"):
        to_spark_sql("SELECT 1; SELECT 2")
