"""The shipped node-type catalog and the facts ingest fills from it, on the real run tables."""

from __future__ import annotations

import csv
import runpy
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from autofe.config import IngestSettings
from autofe.errors import ConfigError
from autofe.ingest.ingest import ingest
from autofe.ingest.run_table.ingest_run_table import ingest_run_table
from autofe.schema import IngestReport
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.node_types import (
    COLUMNS,
    fill_hardware_facts,
    load_node_types,
    parse_node_types,
)
from autofe.warehouse.write import insert_rows

REPO = Path(__file__).resolve().parents[2]
MAPPINGS = REPO / "examples" / "mappings"
CATALOG = REPO / "autofe" / "warehouse" / "node_types.csv"
# The mappings reach the data as ../../../shared/data/external, i.e. beside this checkout.
EXTERNAL = REPO.parent / "shared" / "data" / "external"
SOURCE_TAG = "ec2instances.info 2017-03 (MIT), us-east-1 linux on-demand"

CONFIGS = (
    "SELECT node_type, num_workers, vcpu_per_node, memory_gb_per_node, hourly_price "
    "FROM cluster_configs WHERE source = ? ORDER BY config_id"
)


@pytest.fixture(scope="module")
def shared_data() -> Path:
    if not EXTERNAL.is_dir():
        pytest.skip("../shared/data/external is not beside this checkout (the mappings use it)")
    return EXTERNAL


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """Scout (types only), CherryPick (types with facts) and the mini workspace (Azure types)."""
    db = tmp_path_factory.mktemp("node-types") / "w.duckdb"
    ingest(_inputs(), IngestSettings(db=db, workers=1))
    return db


def _inputs() -> list[Path]:
    return [
        MAPPINGS / "scout-multinode.toml",
        MAPPINGS / "cherrypick.toml",
        REPO / "examples" / "workspaces" / "mini",
    ]


def _query(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


# ------------------------------------------------------------------------------ the catalog


def test_catalog_has_the_76_types_of_the_2017_snapshot() -> None:
    catalog = load_node_types()
    with CATALOG.open(newline="") as f:
        names = [row["node_type"] for row in csv.DictReader(f)]
    assert len(catalog) == len(names) == len(set(names)) == 76
    assert all(n.vcpu > 0 and n.memory_gb > 0 for n in catalog.values())
    assert all(n.hourly_price_usd is None or n.hourly_price_usd > 0 for n in catalog.values())
    assert {n.source for n in catalog.values()} == {SOURCE_TAG}
    unpriced = {name for name, n in catalog.items() if n.hourly_price_usd is None}
    assert unpriced == {"f1.2xlarge", "f1.16xlarge"}  # the snapshot has no us-east-1 f1 price
    c4 = catalog["c4.2xlarge"]
    assert (c4.vcpu, c4.memory_gb, c4.hourly_price_usd) == (8, 15.0, 0.398)


def test_load_node_types_returns_a_fresh_dict() -> None:
    first = load_node_types()
    first.pop("c4.2xlarge")
    assert "c4.2xlarge" in load_node_types()


def test_shipped_csv_is_what_the_build_script_writes(shared_data: Path, tmp_path: Path) -> None:
    script = runpy.run_path(str(REPO / "scripts" / "build_node_types.py"))
    source = shared_data / "cloud-prices" / "aws-ec2instances-2017-03" / "instances.json.gz"
    out = tmp_path / "node_types.csv"
    assert script["build"](source, out) == 76
    assert out.read_text() == CATALOG.read_text()


HEADER = ",".join(COLUMNS)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("m4.large,2,8.0,0.108,x\nc4.large,two,3.75,,x\n", r"bad\.csv:3: vcpu 'two'"),
        ("m4.large,2,8.0,0.108,x\nm4.large,2,8.0,0.108,x\n", r"bad\.csv:3: 'm4.large' repeats"),
        ("m4.large,2,-8,0.108,x\n", r"bad\.csv:2: memory_gb '-8' is not a positive"),
        ("m4.large,2,8.0,free,x\n", r"bad\.csv:2: hourly_price_usd 'free' is not a number"),
        ("m4.large,2,8.0\n", r"bad\.csv:2: expected 5 fields, got 3"),
    ],
)
def test_a_malformed_row_names_the_file_and_line(body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_node_types(f"{HEADER}\n{body}", "bad.csv")


def test_a_wrong_header_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"bad\.csv:1: header must be"):
        parse_node_types("type,cores\nm4.large,2\n", "bad.csv")


# --------------------------------------------------------------------- filling at ingest


def test_every_scout_config_gets_the_catalog_facts(warehouse: Path) -> None:
    catalog = load_node_types()
    rows = _query(warehouse, CONFIGS, ["scout-multinode"])
    assert len(rows) == 69  # 69 AWS configurations, every type (c4/m4/r4) in the catalog
    for node_type, nodes, vcpu, memory, price in rows:
        known = catalog[node_type]
        assert known.hourly_price_usd is not None
        assert (vcpu, memory) == (known.vcpu, known.memory_gb)
        assert price == pytest.approx(known.hourly_price_usd * nodes)


def test_ten_c4_2xlarge_nodes_cost_ten_catalog_prices(warehouse: Path) -> None:
    sql = CONFIGS.replace("source = ?", "source = ? AND node_type = ? AND num_workers = ?")
    rows = _query(warehouse, sql, ["scout-multinode", "c4.2xlarge", 10])
    assert rows == [("c4.2xlarge", 10, 8.0, 15.0, pytest.approx(10 * 0.398))]


def test_values_a_mapping_set_are_never_overwritten(warehouse: Path, shared_data: Path) -> None:
    """CherryPick maps cpu_count, ram and vm_cost x num_machines; its 2016 prices differ."""
    expected: dict[str, tuple[str, int, float, float, float]] = {}
    for path in sorted((shared_data / "cherrypick").glob("CP_*.csv")):
        with path.open(newline="") as f:
            for n, r in enumerate(csv.DictReader(f), start=1):
                machines = int(r["num_machines"])
                expected[f"cherrypick:{path.stem}:{n}"] = (
                    r["vm_name"],
                    machines,
                    float(r["cpu_count"]),
                    float(r["ram"]),
                    float(r["vm_cost"]) * machines,
                )
    sql = (
        "SELECT r.run_id, c.node_type, c.num_workers, c.vcpu_per_node, c.memory_gb_per_node, "
        "c.hourly_price FROM runs r JOIN cluster_configs c ON c.config_id = r.cluster_config_id "
        "WHERE r.source = 'cherrypick'"
    )
    stored = {row[0]: row[1:] for row in _query(warehouse, sql)}
    assert len(stored) == len(expected) == 291
    for run_id, (vm, machines, cpus, ram, price) in expected.items():
        assert stored[run_id] == (vm, machines, cpus, ram, pytest.approx(price))
    # The check has teeth: the catalog's c4.2xlarge is $0.398/h, CherryPick's $0.552/h.
    ten = stored["cherrypick:CP_kmeans:1"]
    assert ten[0] == "c4.2xlarge" and ten[4] == pytest.approx(5.52)


def test_types_outside_the_catalog_are_left_alone(warehouse: Path, tmp_path: Path) -> None:
    # The mini workspace's Azure types keep what node_types.json says, and get no price.
    rows = _query(warehouse, CONFIGS, ["workspace"])
    assert sorted(r[0] for r in rows) == ["Standard_DS4_v2", "Standard_E8s_v3"]
    assert all(r[4] is None for r in rows)
    db = tmp_path / "w.duckdb"
    shutil.copy(warehouse, db)
    with open_warehouse(db) as con:
        insert_rows(con, "cluster_configs", [{"config_id": "m5", "node_type": "m5.xlarge"}])
        assert fill_hardware_facts(con) == 0  # post-2017 type: not in the 2017 snapshot
        got = con.execute(
            "SELECT vcpu_per_node, memory_gb_per_node, hourly_price FROM cluster_configs "
            "WHERE config_id = 'm5'"
        ).fetchall()
    assert got == [(None, None, None)]


def test_price_needs_a_fixed_node_count(tmp_path: Path) -> None:
    configs: list[dict[str, Any]] = [
        {"config_id": "one", "node_type": "c4.large"},  # no count: one machine
        {"config_id": "auto", "node_type": "c4.large", "autoscale_min": 2, "autoscale_max": 8},
        {"config_id": "zero", "node_type": "c4.large", "num_workers": 0},
    ]
    with open_warehouse(tmp_path / "w.duckdb") as con:
        insert_rows(con, "cluster_configs", configs)
        assert fill_hardware_facts(con) == 3
        rows = con.execute(
            "SELECT config_id, vcpu_per_node, memory_gb_per_node, hourly_price "
            "FROM cluster_configs ORDER BY config_id"
        ).fetchall()
    price = load_node_types()["c4.large"].hourly_price_usd
    assert rows == [("auto", 2.0, 3.75, None), ("one", 2.0, 3.75, price), ("zero", 2.0, 3.75, None)]


def test_fill_counts_changed_rows_once(tmp_path: Path, shared_data: Path) -> None:
    with open_warehouse(tmp_path / "w.duckdb") as con:
        ingest_run_table(con, MAPPINGS / "scout-multinode.toml", IngestReport())  # no fill
        assert fill_hardware_facts(con) == 69
        assert fill_hardware_facts(con) == 0


def test_reingesting_changes_nothing(warehouse: Path, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    shutil.copy(warehouse, db)
    table = "SELECT * FROM cluster_configs ORDER BY config_id"
    before = _query(db, table)
    report = ingest(_inputs(), IngestSettings(db=db, workers=1))
    assert report.runs == 0
    assert _query(db, table) == before
