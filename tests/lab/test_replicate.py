"""autofe lab replicate: N distinct copies of a real lab workspace, ingested N times the rows."""

from __future__ import annotations

import filecmp
import json
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.config import IngestSettings, example_workspace
from autofe.errors import ConfigError
from autofe.ingest.ingest import ingest
from autofe.lab.cut import cut_workspace
from autofe.lab.replicate import MANIFEST, read_replica, replicate_workspace
from autofe.warehouse.tables import TABLES

SHARED_TABLES = {"cluster_configs", "table_stats"}
"""Shared by every copy: configurations are content-derived, the tables read are the same."""
SHARED_FILES = 3
"""Ledger entries shared by every copy: jobs/list.json, node_types.json, the statistics CSV."""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped workspace's first three days (62 real runs): small enough to ingest thrice."""
    out = tmp_path_factory.mktemp("replicate") / "source"
    cut_workspace(example_workspace(), out, datetime(2024, 3, 4))
    return out


@pytest.fixture(scope="module")
def warehouses(source: Path) -> dict[int, Path]:
    """The replicas of 1 and 2 copies, each ingested into its own warehouse."""
    dbs = {}
    for copies in (1, 2):
        replica = source.parent / f"x{copies}"
        replicate_workspace(source, replica, copies, workers=copies)
        dbs[copies] = source.parent / f"x{copies}.duckdb"
        report = ingest([replica], IngestSettings(db=dbs[copies], workers=2))
        assert not report.issues
    return dbs


def _counts(db: Path) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {t.name: _one(con, f"SELECT count(*) FROM {t.name}") for t in TABLES}


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    rows = con.execute(sql).fetchall()
    return int(rows[0][0])


def test_one_copy_is_the_source_file_for_file(source: Path, warehouses: dict[int, Path]) -> None:
    replica = source.parent / "x1"
    files = sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())
    per_copy = [f for f in files if f.parts[0] in ("runs", "clusters", "cluster-logs")]
    assert len(per_copy) > 150
    assert filecmp.cmpfiles(source, replica, [str(f) for f in per_copy], shallow=False)[0] == [
        str(f) for f in per_copy
    ]
    jobs = json.loads((replica / "jobs" / "list.json").read_text())["jobs"]
    assert jobs == json.loads((source / "jobs" / "list.json").read_text())["jobs"]
    assert not (replica / "lab.json").exists()  # the generator's manifest: not a lab workspace


def test_two_copies_ingest_to_twice_the_rows_of_every_per_copy_table(
    warehouses: dict[int, Path],
) -> None:
    one, two = _counts(warehouses[1]), _counts(warehouses[2])
    assert one["runs"] == 62 and one["applications"] == 62 and one["stages"] > 500
    for table, n in one.items():
        if table in SHARED_TABLES:
            assert two[table] == n > 0, table
        elif table == "ingested_files":
            assert two[table] == 2 * n - SHARED_FILES
        else:
            assert two[table] == 2 * n, table


def test_every_copy_has_its_own_keys_and_its_logs_link_to_its_runs(
    warehouses: dict[int, Path],
) -> None:
    report = read_replica(warehouses[2].with_suffix(""))
    assert report is not None and (report.copies, report.run_stride) == (2, 10_000)
    with duckdb.connect(str(warehouses[2]), read_only=True) as con:
        assert _one(con, "SELECT count(DISTINCT app_id) FROM applications") == 124
        assert _one(con, "SELECT count(DISTINCT content_hash) FROM applications") == 124
        assert _one(con, "SELECT count(DISTINCT job_id) FROM runs") == 2 * _one(
            con, "SELECT count(DISTINCT job_id) FROM runs WHERE run_id::INT < 10000"
        )
        # Every log links (by its runId property) to the run of its own copy.
        assert (
            _one(
                con,
                "SELECT count(*) FROM applications a JOIN runs r USING (run_id) "
                "WHERE a.app_id LIKE '%-c1' = (r.run_id::INT >= 10000) "
                "AND a.app_name LIKE '%_c1-1____' = (r.run_id::INT >= 10000)",
            )
            == 124
        )


def test_a_copy_mirrors_its_original_run_for_run(warehouses: dict[int, Path]) -> None:
    sql = """
        SELECT count(*) FROM runs c JOIN runs o ON o.run_id::INT = c.run_id::INT - 10000
        JOIN applications ca ON ca.run_id = c.run_id JOIN applications oa ON oa.run_id = o.run_id
        WHERE c.job_id::INT = o.job_id::INT + 1000 AND c.duration_s = o.duration_s
          AND c.submit_time = o.submit_time AND c.cluster_config_id = o.cluster_config_id
          AND ca.num_tasks = oa.num_tasks AND ca.spark_properties <> oa.spark_properties
    """
    with duckdb.connect(str(warehouses[2]), read_only=True) as con:
        assert _one(con, sql) == 62


def test_parts_starting_at_later_copies_add_up_to_the_whole(
    source: Path, warehouses: dict[int, Path]
) -> None:
    part = source.parent / "part1"
    report = replicate_workspace(source, part, 1, first=1)
    assert (report.first, report.runs) == (1, 62)
    assert min(int(p.stem) for p in (part / "runs").glob("*.json")) > 10_000
    db = source.parent / "parts.duckdb"
    ingest([source.parent / "x1", part], IngestSettings(db=db, workers=1))
    whole, parts = _counts(warehouses[2]), _counts(db)
    # one jobs/list.json per part; the shared files' second copies are skipped as unchanged
    assert parts == {**whole, "ingested_files": whole["ingested_files"] + 1}


def test_bad_arguments_are_config_errors(source: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        replicate_workspace(source, tmp_path / "r", 0)
    with pytest.raises(ConfigError, match="first at least 0"):
        replicate_workspace(source, tmp_path / "r", 1, first=-1)
    with pytest.raises(ConfigError, match="exists"):
        replicate_workspace(source, tmp_path, 2)
    with pytest.raises(ConfigError, match="not a lab workspace"):
        replicate_workspace(tmp_path, tmp_path / "r", 2)


def test_the_cli_writes_a_replica_and_reports_it(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "r3"
    args = ["lab", "replicate", "--workspace", str(source), "--copies", "3", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["copies"], report["runs"], report["event_logs"]) == (3, 186, 186)
    assert json.loads((out / MANIFEST).read_text())["runs"] == 186
    assert len(list((out / "runs").glob("*.json"))) == 186
    assert {p.name for p in (out / "cluster-logs").iterdir()} == {
        p.stem for p in (out / "clusters").glob("*.json")
    }
