"""The spot bid: which max price to ask for, traded against the chance of getting the instance.

A spot request carries a max price; when the market price is above it the request waits (or the
instance is reclaimed). ``acquisition_probability`` reads that chance off observed prices: the
share of price points for the instance type in the region (across its availability zones) at or
below the max price, an empirical CDF. ``choose_bid`` returns the lowest max price whose chance
reaches a target, capped at the on-demand price: paying more than on-demand for spot is never
right (on-demand is then cheaper and cannot be preempted), and AWS's own default max price is the
on-demand price. Since AWS's 2017 pricing change spot instances are interrupted for capacity, not
outbid, so a bid mostly decides whether a request is *filled*, not how often it is preempted;
the preemption hazard stays the catalog's ``interruptions_per_h``.

The prices are ``data/spot_prices.csv``, built by ``scripts/build_spot_prices.py`` from one ~6 h
snapshot of AWS spot prices (2022-05-31, Linux/UNIX); ``docs/scheduler.md`` says what that can
and cannot tell.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

from autofe.errors import ScheduleError

DEFAULT_TARGET = 0.95


@dataclass(frozen=True)
class PriceCurve:
    """Observed spot prices of one type in one region, ascending, with cumulative counts.

    ``cumulative[i]`` is how many price points were at or below ``prices[i]``.
    """

    prices: tuple[float, ...]
    cumulative: tuple[int, ...]

    @classmethod
    def of(cls, points: Iterable[tuple[float, int]]) -> PriceCurve:
        """Fold (price, count) points, in any order, into a curve.

        >>> PriceCurve.of([(0.2, 1), (0.1, 3)])
        PriceCurve(prices=(0.1, 0.2), cumulative=(3, 4))
        """
        prices, cumulative, total = [], [], 0
        for price, count in sorted(points):
            total += count
            prices.append(price)
            cumulative.append(total)
        return cls(tuple(prices), tuple(cumulative))

    def probability(self, max_price: float) -> float:
        """Share of price points at or below ``max_price``.

        >>> PriceCurve.of([(0.1, 3), (0.2, 1)]).probability(0.15)
        0.75
        """
        at_or_below = bisect.bisect_right(self.prices, max_price)
        return self.cumulative[at_or_below - 1] / self.cumulative[-1] if at_or_below else 0.0

    def lowest_price(self, target: float) -> float:
        """The lowest observed price whose share at or below reaches ``target``.

        >>> PriceCurve.of([(0.1, 3), (0.2, 1)]).lowest_price(0.75)
        0.1
        """
        needed = math.ceil(target * self.cumulative[-1] - 1e-9)
        return self.prices[bisect.bisect_left(self.cumulative, needed)]


def price_curve(instance_type: str, region: str) -> PriceCurve | None:
    """The observed price curve of a type in a region; ``None`` without snapshot data."""
    return _curves().get((region, instance_type))


def spot_price_curves() -> dict[tuple[str, str], PriceCurve]:
    """Every observed curve by (region, instance type), for reports and tests (a copy)."""
    return dict(_curves())


def acquisition_probability(instance_type: str, region: str, max_price: float) -> float | None:
    """Chance a spot request at ``max_price`` ($/h) finds the market at or below it.

    ``None`` when the snapshot has no price for the type in the region (then nothing is known,
    which is not the same as 0).
    """
    curve = price_curve(instance_type, region)
    return None if curve is None else curve.probability(max_price)


def choose_bid(
    instance_type: str,
    region: str,
    on_demand_usd_h: float,
    target: float = DEFAULT_TARGET,
    job_id: str | None = None,
) -> float:
    """The lowest max price ($/h) whose acquisition probability reaches ``target``.

    Capped at ``on_demand_usd_h``, which is also the answer when the snapshot has no price for
    the type in the region (AWS's default: bid on-demand, lose only to capacity).

    Raises:
        ScheduleError: ``target`` is outside (0, 1] or the on-demand price is not positive.
    """
    if not 0.0 < target <= 1.0:
        raise ScheduleError(f"bid target {target!r} must be in (0, 1]", job_id)
    if not on_demand_usd_h > 0.0:
        reason = f"on-demand price {on_demand_usd_h!r} of {instance_type} must be positive"
        raise ScheduleError(reason, job_id)
    curve = price_curve(instance_type, region)
    if curve is None:
        return on_demand_usd_h
    return min(curve.lowest_price(target), on_demand_usd_h)


def bid_percent(max_price: float, on_demand_usd_h: float) -> int:
    """The max price as Databricks-on-AWS's ``spot_bid_price_percent`` (of on-demand, 1-100).

    Rounded up so the bid never falls below the chosen price.

    >>> bid_percent(0.0431, 0.1), bid_percent(0.5, 0.1)
    (44, 100)
    """
    return max(1, min(100, math.ceil(100.0 * max_price / on_demand_usd_h - 1e-9)))


@lru_cache(maxsize=1)
def _curves() -> dict[tuple[str, str], PriceCurve]:
    # Read lazily and once: importing the scheduler must not touch files.
    resource = files("autofe.scheduler").joinpath("data", "spot_prices.csv")
    return parse_spot_prices(resource.read_text(encoding="utf-8"))


def parse_spot_prices(text: str) -> dict[tuple[str, str], PriceCurve]:
    """Curves per (region, instance type) from ``spot_prices.csv`` text.

    >>> text = "region,instance_type,spot_usd_h,observations\\nr,t,0.1,2\\nr,t,0.3,2\\n"
    >>> parse_spot_prices(text)[("r", "t")].probability(0.2)
    0.5
    """
    points: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        key = (row["region"], row["instance_type"])
        points.setdefault(key, []).append((float(row["spot_usd_h"]), int(row["observations"])))
    return {key: PriceCurve.of(values) for key, values in points.items()}
