"""The spot bid: acquisition curve from the shipped price snapshot, checked against the raw file."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import zstandard

from autofe.errors import ScheduleError
from autofe.scheduler.bid import (
    acquisition_probability,
    bid_percent,
    choose_bid,
    price_curve,
    spot_price_curves,
)

TYPE, REGION, AZ_PREFIX = "m5.4xlarge", "us-east-1", "use1-"


def _raw_prices(external: Path, instance_type: str, az_prefix: str) -> list[float]:
    """Linux/UNIX price points of one type in one region, straight from the tracker's file."""
    path = external / "cloud-prices" / "aws-spot-price-history" / "05.tsv.zst"
    with path.open("rb") as handle:
        text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(handle), "utf-8")
        rows = [line.rstrip("\n").split("\t") for line in text]
    return [
        float(r[3])
        for r in rows
        if r[0].startswith(az_prefix) and r[1] == instance_type and r[2] == "Linux/UNIX"
    ]


def test_curve_matches_raw_snapshot(external: Path) -> None:
    prices = _raw_prices(external, TYPE, AZ_PREFIX)
    assert len(prices) >= 5
    for price in [*sorted(set(prices)), min(prices) - 0.01, max(prices) + 0.01]:
        share = sum(p <= price for p in prices) / len(prices)
        assert acquisition_probability(TYPE, REGION, price) == pytest.approx(share)


def test_choose_bid_matches_raw_quantile(external: Path) -> None:
    prices = sorted(_raw_prices(external, TYPE, AZ_PREFIX))
    on_demand = 10.0 * prices[-1]
    assert choose_bid(TYPE, REGION, on_demand, target=1.0) == prices[-1]
    assert choose_bid(TYPE, REGION, on_demand, target=1 / len(prices)) == prices[0]
    half = choose_bid(TYPE, REGION, on_demand, target=0.5)
    assert half == prices[(len(prices) + 1) // 2 - 1]


def test_curves_are_monotone_cdfs() -> None:
    curves = spot_price_curves()
    assert len(curves) > 3000
    for curve in curves.values():
        grid = [0.0, *curve.prices, curve.prices[-1] * 2]
        shares = [curve.probability(p) for p in grid]
        assert shares == sorted(shares)
        assert shares[0] == 0.0 and shares[-1] == 1.0


def test_chosen_bid_reaches_target_and_is_lowest() -> None:
    for (region, instance_type), curve in list(spot_price_curves().items())[:500]:
        on_demand = curve.prices[-1] * 3
        for target in (0.5, 0.8, 0.95):
            bid = choose_bid(instance_type, region, on_demand, target)
            reached = acquisition_probability(instance_type, region, bid)
            assert reached is not None and reached >= target - 1e-12
            lower = [p for p in curve.prices if p < bid]
            if lower:
                assert curve.probability(lower[-1]) < target


def test_bid_capped_at_on_demand() -> None:
    curve = price_curve(TYPE, REGION)
    assert curve is not None
    cheap_on_demand = curve.prices[0] / 2
    assert choose_bid(TYPE, REGION, cheap_on_demand, target=0.95) == cheap_on_demand


def test_unknown_type_or_region_bids_on_demand() -> None:
    assert acquisition_probability("no.such-type", REGION, 1.0) is None
    assert choose_bid("no.such-type", REGION, 0.42) == 0.42
    assert choose_bid(TYPE, "mars-north-1", 0.77) == 0.77


@pytest.mark.parametrize(("target", "on_demand"), [(0.0, 1.0), (1.5, 1.0), (0.9, 0.0)])
def test_bad_inputs_name_the_job(target: float, on_demand: float) -> None:
    with pytest.raises(ScheduleError) as info:
        choose_bid(TYPE, REGION, on_demand, target, job_id="etl-7")
    assert info.value.job_id == "etl-7"


def test_bid_percent_rounds_up_within_databricks_range() -> None:
    assert bid_percent(0.3398, 0.768) == 45
    assert bid_percent(0.768, 0.768) == 100
    assert bid_percent(1e-6, 0.768) == 1
