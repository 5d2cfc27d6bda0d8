"""Build ``autofe/warehouse/node_types.csv``, the AWS node-type facts ingest fills in.

Why a shipped table: Scout, C3O and CherryPick name an EC2 type (``c4.2xlarge``) but not always
its vCPUs, memory or price, and a model asked about a type it has never seen needs those numbers.
The CSV is committed output; this script documents (and repeats) how it was derived.

Source: ec2instances.info (MIT, Garret Heaton), snapshot scraped 2017-03-15, from
https://github.com/amiryal/ec2instances.info @ 74b2cc0e099aea3b5e9d36de8751cbba13b6af7b
``www/instances.json``, kept gzipped at
``../shared/data/external/cloud-prices/aws-ec2instances-2017-03/instances.json.gz``
(see that folder's ``SOURCE.md``). The 2017 prices match the era of those datasets; there are
no post-2017 types (c5, m5, r5, ...).

Columns: ``node_type``; ``vcpu``; ``memory_gb`` (GiB, as the source gives it);
``hourly_price_usd`` = Linux on-demand $/h in us-east-1 (``pricing["us-east-1"]["linux"]
["ondemand"]``), empty when the snapshot has none (f1 types); ``source``.

Usage (from the repository root)::

    python scripts/build_node_types.py [--source instances.json.gz] [--out node_types.csv]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = (
    REPO.parent / "shared/data/external/cloud-prices/aws-ec2instances-2017-03/instances.json.gz"
)
DEFAULT_OUT = REPO / "autofe" / "warehouse" / "node_types.csv"
COLUMNS = ("node_type", "vcpu", "memory_gb", "hourly_price_usd", "source")
SOURCE_TAG = "ec2instances.info 2017-03 (MIT), us-east-1 linux on-demand"
REGION, OS = "us-east-1", "linux"


def on_demand_price(instance: dict[str, Any]) -> str:
    """The us-east-1 Linux on-demand $/h as the source writes it, or "" when it has none.

    >>> on_demand_price({"pricing": {"us-east-1": {"linux": {"ondemand": "0.398"}}}})
    '0.398'
    >>> on_demand_price({"pricing": {"us-west-2": {}}})
    ''
    """
    raw = instance.get("pricing", {}).get(REGION, {}).get(OS, {}).get("ondemand")
    try:
        return raw if raw is not None and float(raw) > 0 else ""
    except ValueError:  # the scrape writes "N/A" for a few unpriced cells
        return ""


def node_type_row(instance: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """One CSV row; fails loudly on a type without positive vCPU or memory."""
    name = str(instance["instance_type"])
    vcpu, memory = int(instance["vCPU"]), float(instance["memory"])
    if vcpu <= 0 or memory <= 0:
        raise ValueError(f"{name}: vCPU {vcpu} / memory {memory} not positive")
    return name, str(vcpu), str(memory), on_demand_price(instance), SOURCE_TAG


def build(source: Path, out: Path) -> int:
    """Write the CSV sorted by node type; returns the number of rows."""
    with gzip.open(source, "rt", encoding="utf-8") as f:
        instances = json.load(f)
    rows = sorted(node_type_row(i) for i in instances)
    names = [r[0] for r in rows]
    if len(set(names)) != len(names):
        raise ValueError(f"{source}: duplicate instance types")
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    count = build(args.source, args.out)
    print(f"wrote {count} node types to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
