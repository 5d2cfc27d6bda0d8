from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from autofe.errors import WarehouseError
from autofe.schema import Availability
from autofe.warehouse.connect import open_warehouse, schema_fingerprint
from autofe.warehouse.docs import schema_markdown, table_counts
from autofe.warehouse.tables import TABLES, table
from autofe.warehouse.write import insert_rows

REPO = Path(__file__).resolve().parents[2]


def test_docs_schema_is_generated_from_the_code() -> None:
    assert (REPO / "docs" / "schema.md").read_text() == schema_markdown()


def test_every_column_is_tagged_in_the_catalog(tmp_path: Path) -> None:
    con = open_warehouse(tmp_path / "w.duckdb")
    rows = con.execute(
        "SELECT table_name, column_name, availability FROM column_catalog"
    ).fetchall()
    assert len(rows) == sum(len(t.columns) for t in TABLES)
    assert {r[2] for r in rows} == {a.value for a in Availability}
    tags = {(t, c): a for t, c, a in rows}
    assert tags[("runs", "duration_s")] == "post_execution"
    assert tags[("runs", "submit_time")] == "known_at_submit"
    assert tags[("stages", "shuffle_read_bytes")] == "post_execution"
    assert tags[("cluster_configs", "num_workers")] == "known_at_submit"


def test_label_and_time_columns_are_ordered_by_a_timestamp() -> None:
    runs = {c.name: c for c in table("runs").columns}
    assert runs["duration_s"].ordered_by == "runs.end_time"
    assert {c.ordered_by for c in table("table_stats").columns} == {"table_stats.as_of"}


def test_reopening_keeps_rows_and_schema(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    con = open_warehouse(db)
    insert_rows(con, "jobs", [{"job_id": "j1", "name": "nightly"}])
    con.close()
    con = open_warehouse(db)
    assert con.execute("SELECT name FROM jobs").fetchall() == [("nightly",)]
    assert con.execute("SELECT fingerprint FROM warehouse_meta").fetchone() == (
        schema_fingerprint(),
    )


def test_replace_upserts_on_the_primary_key(tmp_path: Path) -> None:
    con = open_warehouse(tmp_path / "w.duckdb")
    insert_rows(con, "jobs", [{"job_id": "j1", "name": "a"}], replace=True)
    insert_rows(con, "jobs", [{"job_id": "j1", "name": "b"}], replace=True)
    assert con.execute("SELECT job_id, name FROM jobs").fetchall() == [("j1", "b")]


def test_a_value_of_the_wrong_type_is_a_warehouse_error(tmp_path: Path) -> None:
    con = open_warehouse(tmp_path / "w.duckdb")
    with pytest.raises(WarehouseError, match="cannot write runs"):
        insert_rows(con, "runs", [{"run_id": "r", "duration_s": "fast"}])


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.duckdb"
    bogus.write_text("not a database\n" * 100)
    with pytest.raises(WarehouseError, match="cannot open warehouse"):
        open_warehouse(bogus)
    assert bogus.read_text().startswith("not a database")


def test_read_only_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="does not exist"):
        table_counts(tmp_path / "missing.duckdb")


def test_read_only_connection_cannot_write(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    open_warehouse(db).close()
    con = open_warehouse(db, read_only=True)
    with pytest.raises(duckdb.Error):
        con.execute("INSERT INTO jobs (job_id) VALUES ('x')")
