"""The instance catalog: what each instance type is and costs, per cloud, region and market.

One :class:`Offer` per (cloud, region, instance type): hardware facts, the on-demand and spot
hourly prices, and the spot interruption rate. Loading and building it from the public price
snapshots is below; the format is documented in ``docs/scheduler.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from autofe.errors import ScheduleError
from autofe.scheduler.jobs import Market


@dataclass(frozen=True)
class Offer:
    """One instance type in one cloud region, with both markets' prices.

    ``spot_usd_h`` is ``None`` where the catalog has no spot price (that market is not
    offered); ``interruptions_per_h`` is the spot preemption rate per instance-hour.
    """

    cloud: str
    region: str
    instance_type: str
    vcpus: int
    memory_gib: float
    on_demand_usd_h: float
    spot_usd_h: float | None = None
    interruptions_per_h: float = 0.0
    gpu_type: str | None = None
    gpu_count: int = 0

    def price(self, market: Market) -> float | None:
        """Hourly price in ``market``; ``None`` when this offer has no such market.

        >>> Offer("aws", "us-east-1", "m4.large", 2, 8.0, 0.1, 0.03).price("spot")
        0.03
        """
        return self.on_demand_usd_h if market == "on-demand" else self.spot_usd_h


class Catalog:
    """Offers indexed by instance type, in a stable order (cloud, region)."""

    def __init__(self, offers: Iterable[Offer]) -> None:
        self._by_type: dict[str, list[Offer]] = {}
        for offer in sorted(offers, key=lambda o: (o.instance_type, o.cloud, o.region)):
            self._by_type.setdefault(offer.instance_type, []).append(offer)

    def __iter__(self) -> Iterator[Offer]:
        for offers in self._by_type.values():
            yield from offers

    def __len__(self) -> int:
        return sum(len(offers) for offers in self._by_type.values())

    def __contains__(self, instance_type: object) -> bool:
        return instance_type in self._by_type

    def offers(self, instance_type: str, job_id: str | None = None) -> list[Offer]:
        """Every offer of ``instance_type``; unknown types are the caller's error, naming it."""
        try:
            return list(self._by_type[instance_type])
        except KeyError:
            raise ScheduleError(
                f"unknown instance type {instance_type!r}: not in the instance catalog "
                f"({len(self._by_type)} types)",
                job_id,
            ) from None
