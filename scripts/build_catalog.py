"""Build ``autofe/scheduler/data/catalog.csv``, the scheduler's instance catalog.

Why a shipped table: the planner prices every (instance type, cloud, region, market) a job could
run on, and it must do so offline and reproducibly. The CSV is committed output; this script
documents (and repeats) how it was derived from the price snapshots in
``../shared/data/external/cloud-prices`` (each folder's repository, commit and licence are in its
``SOURCE.md`` and in ``docs/scheduler.md``). One row per (cloud, region, instance type):

* ``aws``, us-east-1 / us-west-2 / eu-west-1: the 76 EC2 types of the ec2instances.info scrape of
  2017-03 (the era of Scout, CherryPick and C3O), Linux on-demand $/h, wherever that region prices
  the type. Spot $/h = on-demand x (1 - s/100) with ``s`` the AWS Spot Instance Advisor's savings
  % (2025 feed, Linux) - an approximation: a 2025 discount applied to a 2017 price. The advisor's
  interruption class (share of instances interrupted per month) gives a hazard per instance-hour
  from the class midpoint. Types the advisor omits (previous generation, t2.nano) get no spot.
  GPUs: NVIDIA's EMR instance catalog (p2: K80); the scrape has no GPU column.
* ``gcp``, us-central1 / europe-west4: machine families n1, n2, n2d, e2, c2, a2 (A100) and g2 (L4)
  of the Cyclenerd pricing.yml (generated 2026-07-30), on-demand ``hour`` and Spot VM
  ``hour_spot``. Shared-core types whose ``cpu`` is a fraction (e2-micro, e2-small) are left
  out. GPUs that are attached to n1 (T4, V100, ...) are not priced in the file, so there are no
  n1+GPU rows. Google publishes no preemption rate: the hazard is an assumption (the AWS ">20%"
  class, see ``GCP_ASSUMED_CLASS``).
* ``azure-databricks``, westus2: the 195 VM types of Databricks Jobs Compute (premium), price per
  node-hour = VM + DBU (``TotalPricePerHour``), on-demand only (the data has no spot price).
  GPU counts from NVIDIA's Databricks-on-Azure instance catalog.

GPU facts that no snapshot holds (g2, cg1 on AWS; the Azure NC v1 and ND A100 v4 sizes; Azure GPU
model names) are the small tables ``GPUS_NOT_IN_SOURCES`` and ``AZURE_GPU_MODELS`` below, from the
providers' instance-type pages. The ``source`` column names every input a row used.

Usage (from the repository root; needs PyYAML, which the venv has)::

    python scripts/build_catalog.py [--prices DIR] [--out catalog.csv]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML, in the venv via huggingface_hub

from autofe.scheduler.catalog import COLUMNS

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PRICES = REPO.parent / "shared" / "data" / "external" / "cloud-prices"
DEFAULT_OUT = REPO / "autofe" / "scheduler" / "data" / "catalog.csv"
Row = tuple[str, ...]

AWS_FILE = "aws-ec2instances-2017-03/instances.json.gz"
ADVISOR_FILE = "aws-spot-advisor/spot-advisor-data.json.gz"
EMR_FILE = "instance-catalogs/emr-instance-catalog.json"
GCP_FILE = "gcp/pricing.yml.gz"
AZURE_FILE = "databricks-azure/premium-databricks-azure-catalog.json"
AZURE_GPU_FILE = "instance-catalogs/databricks_azure-instance-catalog.json"

AWS_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
GCP_REGIONS = ("us-central1", "europe-west4")
GCP_FAMILIES = frozenset({"n1", "n2", "n2d", "e2", "c2", "a2", "g2"})
GCP_NOT_GPU = frozenset({"cpu", "ram", "cost", "local-ssd", "type"})
AZURE_REGION = "westus2"

HOURS_PER_MONTH = 730.0
# Midpoint of each Spot Advisor class, as a share of instances interrupted per month; the open
# ">20%" class is taken as 20-30 %.
CLASS_MIDPOINTS = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.25}
# Google publishes no Spot VM preemption rate; assume the worst AWS class rather than none.
GCP_ASSUMED_CLASS = ">20%"

GPUS_NOT_IN_SOURCES: dict[str, tuple[str, int]] = {
    "g2.2xlarge": ("K520", 1),
    "g2.8xlarge": ("K520", 4),
    "cg1.4xlarge": ("M2050", 2),
    "Standard_NC12": ("K80", 2),
    "Standard_NC24": ("K80", 4),
    "Standard_ND96asr_A100_v4": ("A100", 8),
}
AZURE_GPU_MODELS = (
    (re.compile(r"_T4_"), "T4"),
    (re.compile(r"_A100_"), "A100"),
    (re.compile(r"^Standard_NC\d+s_v3$"), "V100"),
    (re.compile(r"^Standard_NC\d+$"), "K80"),
)


def hazard_per_hour(monthly_share: float) -> float:
    """Constant hazard (per instance-hour) under which ``monthly_share`` of instances is
    interrupted within a month of 730 h: 1 - exp(-730 h x rate) = share.

    >>> round(hazard_per_hour(0.25) * 1e4, 4)
    3.9409
    """
    return -math.log(1.0 - monthly_share) / HOURS_PER_MONTH


def interruption(label: str) -> tuple[str, str]:
    """The ``interruptions_per_h`` and ``interruption_class`` cells of a Spot Advisor class.

    >>> interruption("<5%")
    ('3.46819e-05', '<5%')
    """
    return f"{hazard_per_hour(CLASS_MIDPOINTS[label]):.6g}", label


def number(value: float) -> str:
    """A CSV cell for a price or size: shortest round-trip text, to the micro-dollar.

    >>> number(0.2 * (1 - 56 / 100)), number(15), number(0.706832255)
    ('0.088', '15.0', '0.706832')
    """
    return repr(round(float(value), 6))


def _read_json(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------- AWS


def aws_on_demand(instance: dict[str, Any], region: str) -> float | None:
    """Linux on-demand $/h in ``region``; ``None`` where unpriced (absent or "N/A").

    >>> aws_on_demand({"pricing": {"us-east-1": {"linux": {"ondemand": "0.2"}}}}, "us-east-1")
    0.2
    >>> aws_on_demand({"pricing": {"us-east-1": {"linux": {"ondemand": "N/A"}}}}, "us-east-1")
    """
    raw = instance.get("pricing", {}).get(region, {}).get("linux", {}).get("ondemand")
    try:
        price = float(raw) if raw is not None else 0.0
    except ValueError:
        return None
    return price if price > 0 else None


def emr_gpu(entry: dict[str, Any] | None) -> tuple[str, int] | None:
    """(model, count) from an NVIDIA instance-catalog entry, ``None`` for CPU-only types.

    >>> emr_gpu({"VCpuCount": 4, "GpuInfo": [{"Name": "K80", "Count": [1]}]})
    ('K80', 1)
    >>> emr_gpu({"VCpuCount": 4})
    """
    infos = (entry or {}).get("GpuInfo") or []
    if not infos:
        return None
    return str(infos[0].get("Name", "")), int(max(infos[0]["Count"]))


def aws_gpu(name: str, emr: dict[str, Any]) -> tuple[str, int, str] | None:
    """GPU model, count and the source tag that gave them."""
    if name in GPUS_NOT_IN_SOURCES:
        return (*GPUS_NOT_IN_SOURCES[name], "gpu-facts")
    gpu = emr_gpu(emr.get(name))
    return (*gpu, "emr-instance-catalog") if gpu else None


def aws_row(
    instance: dict[str, Any],
    region: str,
    price: float,
    advice: dict[str, Any] | None,
    labels: dict[int, str],
    gpu: tuple[str, int, str] | None,
) -> Row:
    """One AWS row; ``advice`` is the Spot Advisor's ``{s, r}`` for this type and region."""
    tags = ["ec2instances-2017-03"]
    spot, hazard, label = "", "0.0", ""
    if advice is not None:
        spot = number(price * (1.0 - float(advice["s"]) / 100.0))
        hazard, label = interruption(labels[int(advice["r"])])
        tags.append("aws-spot-advisor")
    if gpu:
        tags.append(gpu[2])
    gpu_type, gpu_count = (gpu[0], str(gpu[1])) if gpu else ("", "0")
    memory = number(instance["memory"])
    vcpus = str(int(instance["vCPU"]))
    name = str(instance["instance_type"])
    head = ("aws", region, name, vcpus, memory, gpu_type, gpu_count, number(price))
    return (*head, spot, hazard, label, "+".join(tags))


def aws_rows(prices: Path) -> list[Row]:
    """Every priced (type, region) of the 2017 scrape in ``AWS_REGIONS``."""
    instances = _read_json(prices / AWS_FILE)
    advisor = _read_json(prices / ADVISOR_FILE)
    labels = {int(r["index"]): str(r["label"]) for r in advisor["ranges"]}
    if set(labels.values()) != set(CLASS_MIDPOINTS):
        raise ValueError(f"{ADVISOR_FILE}: interruption classes {labels} changed")
    emr = _read_json(prices / EMR_FILE)
    rows = []
    for instance in instances:
        name = str(instance["instance_type"])
        gpu = aws_gpu(name, emr)
        for region in AWS_REGIONS:
            price = aws_on_demand(instance, region)
            if price is not None:
                advice = advisor["spot_advisor"].get(region, {}).get("Linux", {}).get(name)
                rows.append(aws_row(instance, region, price, advice, labels, gpu))
    return rows


# ---------------------------------------------------------------------------------------- GCP


def gcp_gpu(entry: dict[str, Any], name: str) -> tuple[str, str]:
    """(gpu_type, gpu_count) cells: the machine type's accelerator key, upper-cased.

    >>> gcp_gpu({"cpu": 12, "ram": 85, "a100": 1, "cost": {}}, "a2-highgpu-1g")
    ('A100', '1')
    >>> gcp_gpu({"cpu": 4, "ram": 15}, "n1-standard-4")
    ('', '0')
    """
    keys = sorted(set(entry) - GCP_NOT_GPU)
    if len(keys) > 1:
        raise ValueError(f"{GCP_FILE}: {name} has several accelerators {keys}")
    return (keys[0].upper(), str(int(entry[keys[0]]))) if keys else ("", "0")


def gcp_row(name: str, entry: dict[str, Any], region: str) -> Row:
    """One GCP row; the spot hazard is the assumed class's (no published rate)."""
    cost = entry["cost"][region]
    spot = cost.get("hour_spot")
    hazard, label = interruption(GCP_ASSUMED_CLASS) if spot else ("0.0", "")
    gpu_type, gpu_count = gcp_gpu(entry, name)
    vcpus, memory = str(int(entry["cpu"])), number(entry["ram"])
    head = ("gcp", region, name, vcpus, memory, gpu_type, gpu_count, number(cost["hour"]))
    return (*head, number(spot) if spot else "", hazard, label, "gcp-pricing-2026-07-30")


def gcp_rows(prices: Path) -> list[Row]:
    """The chosen families in ``GCP_REGIONS``, whole-vCPU machine types only."""
    with gzip.open(prices / GCP_FILE, "rt", encoding="utf-8") as f:
        doc = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    rows = []
    for name, entry in doc["compute"]["instance"].items():
        whole_cpu = float(entry["cpu"]).is_integer()
        if name.split("-")[0] in GCP_FAMILIES and whole_cpu:
            rows += [gcp_row(name, entry, r) for r in GCP_REGIONS if r in entry["cost"]]
    return rows


# -------------------------------------------------------------------------------------- Azure


def azure_gpu_model(name: str) -> str:
    """The GPU model an Azure VM name implies (NVIDIA's catalog gives counts, not models).

    >>> azure_gpu_model("Standard_NC4as_T4_v3"), azure_gpu_model("Standard_NC6s_v3")
    ('T4', 'V100')
    """
    for pattern, model in AZURE_GPU_MODELS:
        if pattern.search(name):
            return model
    raise ValueError(f"{name}: has GPUs but no known model; extend AZURE_GPU_MODELS")


def azure_gpu(name: str, nvidia: dict[str, Any]) -> tuple[str, int, str] | None:
    """GPU model, count and the source tag that gave the count."""
    if name in GPUS_NOT_IN_SOURCES:
        return (*GPUS_NOT_IN_SOURCES[name], "gpu-facts")
    gpu = emr_gpu(nvidia.get(name))
    return (azure_gpu_model(name), gpu[1], "databricks-azure-instance-catalog") if gpu else None


def azure_row(key: str, entry: dict[str, Any], nvidia: dict[str, Any]) -> Row:
    """One Databricks Jobs Compute node type; the price is VM + DBU per node-hour."""
    name = f"Standard_{key}"
    gpu = azure_gpu(name, nvidia)
    tags = ["databricks-azure-jobs-premium", *([gpu[2]] if gpu else [])]
    gpu_type, gpu_count = (gpu[0], str(gpu[1])) if gpu else ("", "0")
    memory = number(int(entry["RAMinMB"]) / 1024)
    price = number(entry["TotalPricePerHour"])
    head = ("azure-databricks", AZURE_REGION, name, str(int(entry["vCPUs"])), memory)
    return (*head, gpu_type, gpu_count, price, "", "0.0", "", "+".join(tags))


def azure_rows(prices: Path) -> list[Row]:
    """Every Jobs Compute (premium, westus2) node type."""
    instances = _read_json(prices / AZURE_FILE)["Jobs Compute"]["Instances"]
    nvidia = _read_json(prices / AZURE_GPU_FILE)
    return [azure_row(key, entry, nvidia) for key, entry in instances.items()]


# ------------------------------------------------------------------------------------- output

CLOUDS = (aws_rows, gcp_rows, azure_rows)


def build(prices: Path, out: Path) -> dict[str, int]:
    """Write the CSV sorted by (cloud, region, instance type); returns rows per cloud."""
    rows = sorted(row for rows_of in CLOUDS for row in rows_of(prices))
    keys = [row[:3] for row in rows]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{prices}: a (cloud, region, instance type) repeats")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return dict(sorted(Counter(row[0] for row in rows).items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prices", type=Path, default=DEFAULT_PRICES)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    counts = build(args.prices, args.out)
    print(f"wrote {sum(counts.values())} offers {counts} to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
