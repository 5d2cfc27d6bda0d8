"""describe_schema: tables and columns with availability tags, from the warehouse's catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from autofe.errors import ConfigError
from autofe.tools.describe_schema import AVAILABILITY_RULES, describe_schema
from autofe.warehouse.catalog import NOT_QUERYABLE, code_catalog, read_catalog
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.tables import TABLES

REPO = Path(__file__).resolve().parents[2]


def test_every_queryable_table_in_declaration_order() -> None:
    described = describe_schema(code_catalog())
    assert [t.name for t in described.tables] == [
        t.name for t in TABLES if t.name not in NOT_QUERYABLE
    ]
    assert described.availability_rules == AVAILABILITY_RULES


def test_columns_carry_type_availability_ordering_and_meaning() -> None:
    runs = describe_schema(code_catalog(), "runs").tables[0]
    assert runs.primary_key == ["run_id"]
    assert "label" in runs.description.lower()
    by_name = {c.name: c for c in runs.columns}
    label = by_name["duration_s"]
    assert (label.type, label.availability, label.ordered_by) == (
        "DOUBLE",
        "post_execution",
        "runs.end_time",
    )
    assert label.description.startswith("Label")
    assert by_name["submit_time"].availability == "known_at_submit"
    assert [c.name for c in runs.columns][:3] == ["run_id", "job_id", "submit_time"]


def test_describes_what_a_real_warehouse_holds(gates_warehouse: Path) -> None:
    con = open_warehouse(gates_warehouse, read_only=True)
    try:
        catalog = read_catalog(con)
    finally:
        con.close()
    stats = describe_schema(catalog, "TABLE_STATS").tables[0]
    assert stats.name == "table_stats"
    assert {c.name: c.ordered_by for c in stats.columns}["as_of"] == "table_stats.as_of"
    assert sum(len(t.columns) for t in describe_schema(catalog).tables) == len(catalog.columns)


def test_unknown_table_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"no table 'run'.*tables: jobs, runs, .*table_stats"):
        describe_schema(code_catalog(), "run")
    with pytest.raises(ConfigError, match="no table 'ingest_issues'"):
        describe_schema(code_catalog(), "ingest_issues")  # bookkeeping is not telemetry


def test_rules_paragraph_says_what_docs_schema_md_says() -> None:
    docs = (REPO / "docs" / "schema.md").read_text()
    for phrase in ("known_at_submit", "post_execution", "strictly before", "runs.submit_time"):
        assert phrase in docs
        assert phrase in AVAILABILITY_RULES
    assert "runs.duration_s" in AVAILABILITY_RULES
    assert len(AVAILABILITY_RULES) < 1000
