"""Build ``autofe/scheduler/data/spot_prices.csv``, the observed AWS spot prices behind bids.

Why a shipped table: ``autofe.scheduler.bid`` turns a max price into an acquisition probability
(and back) offline, and the installed package cannot reach ``../shared``. The CSV is committed
output; this script documents (and repeats) how it was derived from
``../shared/data/external/cloud-prices/aws-spot-price-history/05.tsv.zst`` (ericpauley/
aws-spot-price-history, seed file: the price points of 2022-05-31 18:20-23:59 UTC across the
availability zones of 17 region codes; see that folder's ``SOURCE.md``).

Only ``Linux/UNIX`` rows are kept (Databricks clusters run Linux). The AZ id (``use1-az4``) is
folded to its region (``us-east-1``), and every (region, instance type, price) is one row with
the number of price points observed at that price across the region's AZs and the ~6 h.

Usage (from the repository root)::

    python scripts/build_spot_prices.py [--history FILE] [--out spot_prices.csv]
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import Counter
from pathlib import Path

import zstandard

REPO = Path(__file__).resolve().parents[1]
DEFAULT_HISTORY = (
    REPO.parent
    / "shared"
    / "data"
    / "external"
    / "cloud-prices"
    / "aws-spot-price-history"
    / "05.tsv.zst"
)
DEFAULT_OUT = REPO / "autofe" / "scheduler" / "data" / "spot_prices.csv"
COLUMNS = ("region", "instance_type", "spot_usd_h", "observations")
PRODUCT = "Linux/UNIX"
# AZ-id prefix -> region name (AWS's zone-id scheme: "use1" is us-east-1, "apne1" ap-northeast-1).
AREAS = {
    "use": "us-east",
    "usw": "us-west",
    "euw": "eu-west",
    "euc": "eu-central",
    "eun": "eu-north",
    "apne": "ap-northeast",
    "apse": "ap-southeast",
    "aps": "ap-south",
    "cac": "ca-central",
    "sae": "sa-east",
}


def region_of(az_id: str) -> str:
    """The region of an AZ id, so price points from all of a region's zones pool together.

    >>> region_of("use1-az4"), region_of("apne3-az2")
    ('us-east-1', 'ap-northeast-3')
    """
    code = az_id.split("-")[0]
    area, number = code.rstrip("0123456789"), code.lstrip("abcdefghijklmnopqrstuvwxyz")
    if area not in AREAS or not number:
        raise ValueError(f"unknown AWS availability-zone id {az_id!r}")
    return f"{AREAS[area]}-{number}"


def count_prices(history: Path) -> Counter[tuple[str, str, float]]:
    """Price points per (region, type, price) for Linux/UNIX."""
    text = zstandard.ZstdDecompressor().stream_reader(history.open("rb"))
    counts: Counter[tuple[str, str, float]] = Counter()
    for line in io.TextIOWrapper(text, encoding="utf-8"):
        az_id, instance_type, product, price, _ = line.rstrip("\n").split("\t")
        if product == PRODUCT:
            counts[(region_of(az_id), instance_type, float(price))] += 1
    return counts


def write_table(counts: Counter[tuple[str, str, float]], out: Path) -> None:
    """One sorted row per (region, type, price), so rebuilds diff cleanly."""
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for (region, instance_type, price), n in sorted(counts.items()):
            writer.writerow((region, instance_type, f"{price:g}", n))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=Path, default=DEFAULT_HISTORY)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    counts = count_prices(args.history)
    write_table(counts, args.out)
    points = sum(counts.values())
    pairs = len({(r, t) for r, t, _ in counts})
    print(f"{args.out}: {len(counts)} rows, {points} price points, {pairs} (region, type) pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
