"""The instance catalog: the shipped CSV against its raw sources, loading and its errors."""

from __future__ import annotations

import gzip
import json
import math
import runpy
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from autofe.errors import ConfigError, ScheduleError
from autofe.lab.configs import NODE_TYPES
from autofe.scheduler.catalog import COLUMNS, Catalog, Offer, load_catalog
from autofe.warehouse.node_types import load_node_types

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "autofe" / "scheduler" / "data" / "catalog.csv"
SCRIPT = REPO / "scripts" / "build_catalog.py"
HEADER = ",".join(COLUMNS)
GOOD_ROW = "aws,us-east-1,m4.large,2,8.0,,0,0.1,0.03,0.0001,<5%,mine"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def prices(external: Path) -> Path:
    return external / "cloud-prices"


def _raw(path: Path) -> Any:
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _in(catalog: Catalog, cloud: str) -> list[Offer]:
    return [o for o in catalog if o.cloud == cloud]


# ------------------------------------------------------------------- the shipped catalog


def test_shipped_csv_is_what_the_build_script_derives(
    prices: Path, tmp_path: Path, catalog: Catalog
) -> None:
    script = runpy.run_path(str(SCRIPT))
    out = tmp_path / "catalog.csv"
    counts = script["build"](prices, out)
    assert out.read_text(encoding="utf-8") == SHIPPED.read_text(encoding="utf-8")
    assert counts == dict(Counter(o.cloud for o in catalog))
    assert set(counts) == {"aws", "gcp", "azure-databricks"}


def test_aws_prices_and_spot_classes_follow_the_raw_files(prices: Path, catalog: Catalog) -> None:
    instances = {
        i["instance_type"]: i for i in _raw(prices / "aws-ec2instances-2017-03/instances.json.gz")
    }
    advisor = _raw(prices / "aws-spot-advisor/spot-advisor-data.json.gz")
    labels = {r["index"]: r["label"] for r in advisor["ranges"]}
    midpoints = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.25}
    offers = _in(catalog, "aws")
    assert {o.region for o in offers} == {"us-east-1", "us-west-2", "eu-west-1"}
    for o in offers:
        od = float(instances[o.instance_type]["pricing"][o.region]["linux"]["ondemand"])
        assert o.on_demand_usd_h == od
        advice = advisor["spot_advisor"][o.region]["Linux"].get(o.instance_type)
        if advice is None:
            assert (o.spot_usd_h, o.interruptions_per_h, o.interruption_class) == (None, 0.0, "")
            continue
        assert o.spot_usd_h == pytest.approx(od * (1 - advice["s"] / 100), abs=1e-6)
        assert o.interruption_class == labels[advice["r"]]
        monthly = 1 - math.exp(-730 * o.interruptions_per_h)
        assert monthly == pytest.approx(midpoints[o.interruption_class], rel=1e-5)


def test_m4_xlarge_in_us_east_1_is_the_2017_price(prices: Path, catalog: Catalog) -> None:
    raw = _raw(prices / "aws-ec2instances-2017-03/instances.json.gz")
    m4 = next(i for i in raw if i["instance_type"] == "m4.xlarge")
    [offer] = catalog.where(region="us-east-1").offers("m4.xlarge")
    assert offer.on_demand_usd_h == float(m4["pricing"]["us-east-1"]["linux"]["ondemand"]) == 0.215
    assert (offer.vcpus, offer.memory_gib) == (4, 16.0)


def test_aws_us_east_1_agrees_with_the_ingest_node_types(catalog: Catalog) -> None:
    # Both tables come from the same 2017 scrape; a planner and the warehouse must not disagree.
    known = load_node_types()
    offers = catalog.where(cloud="aws", region="us-east-1")
    priced = {n for n, t in known.items() if t.hourly_price_usd is not None}
    assert set(offers.instance_types()) == priced
    for o in offers:
        t = known[o.instance_type]
        assert o.on_demand_usd_h == t.hourly_price_usd
        assert (o.vcpus, o.memory_gib) == (t.vcpu, t.memory_gb)


def test_gcp_prices_follow_pricing_yml(prices: Path, catalog: Catalog) -> None:
    with gzip.open(prices / "gcp/pricing.yml.gz", "rt", encoding="utf-8") as f:
        machines = yaml.load(f, Loader=yaml.CSafeLoader)["compute"]["instance"]
    offers = _in(catalog, "gcp")
    assert {o.region for o in offers} == {"us-central1", "europe-west4"}
    families = {"n1", "n2", "n2d", "e2", "c2", "a2", "g2"}
    whole = {n for n, m in machines.items() if float(m["cpu"]).is_integer()}
    chosen = {n for n in whole if n.split("-")[0] in families}
    assert {o.instance_type for o in offers} == chosen
    for o in offers:
        m = machines[o.instance_type]
        cost = m["cost"][o.region]
        assert o.on_demand_usd_h == pytest.approx(cost["hour"], abs=1e-6)
        assert o.spot_usd_h == pytest.approx(cost["hour_spot"], abs=1e-6)
        assert (o.vcpus, o.memory_gib) == (m["cpu"], m["ram"])
        assert o.interruption_class == ">20%"  # the documented assumption, not a measurement
    left_out = {"e2-micro", "e2-small"}  # shared-core: a fraction of a vCPU
    assert all(machines[n]["cpu"] < 1 for n in left_out)
    assert left_out.isdisjoint(o.instance_type for o in offers)


def test_lab_node_types_cost_what_the_lab_says(catalog: Catalog) -> None:
    for node in NODE_TYPES:
        [offer] = catalog.offers(node.node_type_id)
        assert (offer.cloud, offer.region) == ("azure-databricks", "westus2")
        assert offer.on_demand_usd_h == node.hourly_price_usd
        assert (offer.vcpus, offer.memory_gib * 1024) == (node.vcpus, node.memory_mb)


def test_azure_databricks_has_every_jobs_compute_type_and_no_spot(
    prices: Path, catalog: Catalog
) -> None:
    raw = _raw(prices / "databricks-azure/premium-databricks-azure-catalog.json")
    types = raw["Jobs Compute"]["Instances"]
    offers = _in(catalog, "azure-databricks")
    assert {o.instance_type for o in offers} == {f"Standard_{k}" for k in types}
    for o in offers:
        vm_and_dbu = types[o.instance_type.removeprefix("Standard_")]["TotalPricePerHour"]
        assert o.on_demand_usd_h == vm_and_dbu
        assert (o.spot_usd_h, o.price("spot"), o.interruptions_per_h) == (None, None, 0.0)


def test_gpu_offers_are_heterogeneous_and_counted(prices: Path, catalog: Catalog) -> None:
    gpus = [o for o in catalog if o.gpu_count > 0]
    assert all(o.gpu_type for o in gpus)
    assert all(o.gpu_type is None for o in catalog if o.gpu_count == 0)
    by_cloud = {
        c: {o.gpu_type for o in gpus if o.cloud == c} for c in ("aws", "gcp", "azure-databricks")
    }
    assert {"A100", "L4"} <= by_cloud["gcp"]
    assert {"A100", "T4", "V100"} <= by_cloud["azure-databricks"]
    assert {"K80"} <= by_cloud["aws"]
    nvidia = _raw(prices / "instance-catalogs/databricks_azure-instance-catalog.json")
    for o in gpus:
        if o.cloud == "azure-databricks" and o.instance_type in nvidia:
            assert o.gpu_count == nvidia[o.instance_type]["GpuInfo"][0]["Count"][0]
    emr = _raw(prices / "instance-catalogs/emr-instance-catalog.json")
    p2 = [o for o in gpus if o.instance_type.startswith("p2.")]
    assert len(p2) == 9  # three sizes in three regions
    assert all(o.gpu_count == emr[o.instance_type]["GpuInfo"][0]["Count"][0] for o in p2)


def test_every_offer_is_sane(catalog: Catalog) -> None:
    for o in catalog:
        assert o.vcpus > 0 and o.memory_gib > 0 and o.on_demand_usd_h > 0
        if o.spot_usd_h is not None:
            assert 0 < o.spot_usd_h < o.on_demand_usd_h
            assert o.interruptions_per_h > 0 and o.interruption_class


# ------------------------------------------------------------------------------- helpers


def test_cheapest_offer_is_the_lowest_price_over_regions(catalog: Catalog) -> None:
    for name in catalog.instance_types():
        offers = catalog.offers(name)
        for market in ("on-demand", "spot"):
            best = catalog.cheapest_offer(name, market)
            priced = [p for o in offers if (p := o.price(market)) is not None]
            if best is None:
                assert priced == []
            else:
                assert best.price(market) == min(priced)
    assert catalog.cheapest_offer("Standard_F4s", "spot") is None  # no Azure spot price


def test_where_keeps_one_cloud_or_region(catalog: Catalog) -> None:
    gcp = catalog.where(cloud="gcp")
    assert len(gcp) == len(_in(catalog, "gcp")) > 0
    assert {o.region for o in catalog.where(region="westus2")} == {"westus2"}
    assert len(catalog.where(cloud="gcp", region="us-east-1")) == 0


def test_an_unknown_instance_type_names_the_job(catalog: Catalog) -> None:
    with pytest.raises(ScheduleError, match=r"job 'etl-7': unknown instance type 'm9.huge'") as err:
        catalog.cheapest_offer("m9.huge", "spot", job_id="etl-7")
    assert err.value.job_id == "etl-7"
    with pytest.raises(ScheduleError, match=r"unknown instance type 'c5.large'"):
        catalog.offers("c5.large")  # post-2017: not in the 2017 scrape


# ------------------------------------------------------------------------ user catalogs


def test_a_user_catalog_loads_with_columns_in_any_order(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    columns = list(reversed(COLUMNS))
    cells = dict(zip(COLUMNS, GOOD_ROW.split(","), strict=True))
    row = ",".join(cells[c] for c in columns)
    no_spot = dict(cells, instance_type="m4.xlarge", spot_usd_h="", interruptions_per_h="")
    no_spot.update(interruption_class="", gpu_count="")
    path.write_text(
        "\n".join([",".join(columns), row, ",".join(no_spot[c] for c in columns)]) + "\n"
    )
    mine = load_catalog(path)
    assert mine.instance_types() == ("m4.large", "m4.xlarge")
    [large] = mine.offers("m4.large")
    assert large == Offer(
        "aws", "us-east-1", "m4.large", 2, 8.0, 0.1, 0.03, 0.0001, None, 0, "<5%", "mine"
    )
    [xlarge] = mine.offers("m4.xlarge")
    assert (xlarge.spot_usd_h, xlarge.interruptions_per_h, xlarge.gpu_count) == (None, 0.0, 0)


def test_the_shipped_file_loads_the_same_by_path(catalog: Catalog) -> None:
    assert list(load_catalog(SHIPPED)) == list(catalog)


def _with(column: str, value: str) -> str:
    cells = dict(zip(COLUMNS, GOOD_ROW.split(","), strict=True))
    cells[column] = value
    return ",".join(cells[c] for c in COLUMNS)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_with("vcpus", "two"), r"bad\.csv:3: column vcpus: 'two' is not a number"),
        (_with("vcpus", "2.5"), r"bad\.csv:3: column vcpus: '2.5' is not whole"),
        (_with("memory_gib", "0"), r"bad\.csv:3: column memory_gib: '0' must be above 0"),
        (_with("on_demand_usd_h", "-0.1"), r"bad\.csv:3: column on_demand_usd_h: '-0.1' must be"),
        (_with("on_demand_usd_h", "0"), r"bad\.csv:3: column on_demand_usd_h: '0' must be above"),
        (_with("on_demand_usd_h", ""), r"bad\.csv:3: column on_demand_usd_h is empty"),
        (_with("spot_usd_h", "free"), r"bad\.csv:3: column spot_usd_h: 'free' is not a number"),
        (
            _with("interruptions_per_h", "-1e-4"),
            r"bad\.csv:3: column interruptions_per_h: .* at least",
        ),
        (_with("interruptions_per_h", "nan"), r"bad\.csv:3: column interruptions_per_h: 'nan'"),
        (_with("gpu_count", "2"), r"bad\.csv:3: columns gpu_type '' and gpu_count 2 disagree"),
        (_with("instance_type", ""), r"bad\.csv:3: column instance_type is empty"),
        ("aws,us-east-1,m4.large,2", r"bad\.csv:3: expected 12 fields, got 4"),
        (GOOD_ROW, r"bad\.csv:3: aws / us-east-1 / m4.large is listed twice"),
    ],
)
def test_a_bad_row_names_the_file_line_and_column(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f"{HEADER}\n{GOOD_ROW}\n{body}\n")  # line 3 is the bad one
    with pytest.raises(ConfigError, match=message):
        load_catalog(path)


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    header = HEADER.replace(",spot_usd_h", "").replace(",source", ",notes")
    path.write_text(f"{header}\n")
    with pytest.raises(ConfigError, match=r"bad\.csv:1: missing column 'spot_usd_h', 'source'"):
        load_catalog(path)


def test_an_empty_or_unreadable_catalog_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text(f"{HEADER}\n")
    with pytest.raises(ConfigError, match=r"empty\.csv: the instance catalog has no offers"):
        load_catalog(empty)
    with pytest.raises(ConfigError, match=r"absent\.csv: cannot read the instance catalog"):
        load_catalog(tmp_path / "absent.csv")
