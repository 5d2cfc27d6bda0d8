"""The instance catalog: what each instance type is and costs, per cloud, region and market.

One :class:`Offer` per (cloud, region, instance type): hardware facts, the on-demand and spot
hourly prices, and the spot interruption rate. Loading (the shipped ``data/catalog.csv`` or a
user's file) is below; ``scripts/build_catalog.py`` builds the shipped file from public price
snapshots; the format, sources and approximations are documented in ``docs/scheduler.md``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from autofe.errors import ConfigError, ScheduleError
from autofe.scheduler.jobs import Market

COLUMNS = (
    "cloud",
    "region",
    "instance_type",
    "vcpus",
    "memory_gib",
    "gpu_type",
    "gpu_count",
    "on_demand_usd_h",
    "spot_usd_h",
    "interruptions_per_h",
    "interruption_class",
    "source",
)

MAXIMUM: Mapping[str, float] = {
    "vcpus": 100_000,
    "memory_gib": 1e6,
    "gpu_count": 1_000,
    "on_demand_usd_h": 1e6,
    "spot_usd_h": 1e6,
    "interruptions_per_h": 3600.0,
}
"""The largest value of each number column (prices in USD per node-hour, one interruption a
second): far above any instance sold, and low enough that a plan's cost of 10 years on 100,000
nodes is a finite number (issue #27)."""


@dataclass(frozen=True)
class Offer:
    """One instance type in one cloud region, with both markets' prices.

    ``spot_usd_h`` is ``None`` where the catalog has no spot price (that market is not
    offered); ``interruptions_per_h`` is the spot preemption rate per instance-hour.
    ``interruption_class`` is the provider's label for that rate (``"<5%"`` of instances
    interrupted per month, ...) and ``source`` names the data the row came from.
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
    interruption_class: str = ""
    source: str = ""

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

    def instance_types(self) -> tuple[str, ...]:
        """Every instance type in the catalog, sorted.

        >>> Catalog([_demo("m4.large", 0.1), _demo("c4.large", 0.1)]).instance_types()
        ('c4.large', 'm4.large')
        """
        return tuple(self._by_type)

    def cheapest_offer(
        self, instance_type: str, market: Market, job_id: str | None = None
    ) -> Offer | None:
        """The region selling ``instance_type`` cheapest in ``market`` (ties: first in cloud,
        region order); ``None`` when no region offers that market (no spot price anywhere).

        Raises:
            ScheduleError: the type is not in the catalog (naming ``job_id``).

        >>> east = _demo("m4.large", 0.10, 0.04, region="us-east-1")
        >>> west = _demo("m4.large", 0.12, 0.03, region="us-west-2")
        >>> catalog = Catalog([east, west])
        >>> catalog.cheapest_offer("m4.large", "on-demand").region
        'us-east-1'
        >>> catalog.cheapest_offer("m4.large", "spot").region
        'us-west-2'
        """
        priced = [
            (p, o) for o in self.offers(instance_type, job_id) if (p := o.price(market)) is not None
        ]
        return min(priced, key=lambda pair: pair[0])[1] if priced else None

    def where(self, cloud: str | None = None, region: str | None = None) -> Catalog:
        """The offers in one cloud and/or region: the part of the catalog a user may use.

        >>> Catalog([_demo("m4.large", 0.1), _demo("n1-standard-2", 0.1, cloud="gcp")]).where(
        ...     cloud="gcp"
        ... ).instance_types()
        ('n1-standard-2',)
        """
        return Catalog(
            o
            for o in self
            if (cloud is None or o.cloud == cloud) and (region is None or o.region == region)
        )

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


def _demo(
    instance_type: str,
    on_demand: float,
    spot: float | None = None,
    cloud: str = "aws",
    region: str = "us-east-1",
) -> Offer:
    """A 2-vCPU offer for the examples above."""
    return Offer(cloud, region, instance_type, 2, 8.0, on_demand, spot)


# ------------------------------------------------------------------------------------ loading


def load_catalog(path: Path | None = None) -> Catalog:
    """The instance catalog in ``path``, or the one shipped with autofe when ``None``.

    The shipped ``data/catalog.csv`` is built by ``scripts/build_catalog.py`` from public price
    snapshots; a user's own file (``--catalog FILE``) has the same columns (``COLUMNS``, in any
    order, extra columns ignored). The format is documented in ``docs/scheduler.md``.

    Raises:
        ConfigError: the file cannot be read, a column is missing, or a row is malformed; the
            message names the file, the line and the column.

    >>> load_catalog().cheapest_offer("m4.xlarge", "on-demand").on_demand_usd_h
    0.215
    """
    if path is None:
        return Catalog(_shipped())
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the instance catalog ({exc})") from None
    return Catalog(parse_catalog(text, str(path)))


@lru_cache(maxsize=1)
def _shipped() -> tuple[Offer, ...]:
    # Read lazily and once: importing the scheduler must not touch files.
    resource = files("autofe.scheduler").joinpath("data", "catalog.csv")
    return parse_catalog(resource.read_text(encoding="utf-8"), str(resource))


def parse_catalog(text: str, where: str) -> tuple[Offer, ...]:
    """Parse catalog CSV text; ``where`` names the file in errors.

    Raises:
        ConfigError: a column is missing, a row has the wrong number of fields, a cell is not
            the number its column needs, a (cloud, region, instance type) repeats, or there
            are no rows; the message names ``where``, the line and the column.

    >>> head = ",".join(COLUMNS)
    >>> parse_catalog(f"{head}\\naws,us-east-1,m4.large,2,8,,0,0.1,,,,x\\n", "t.csv")[0].vcpus
    2
    """
    reader = csv.reader(io.StringIO(text))
    header = [name.strip() for name in next(reader, [])]
    missing = [name for name in COLUMNS if name not in header]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        raise ConfigError(f"{where}:1: missing column {names}; a catalog has {', '.join(COLUMNS)}")
    offers: dict[tuple[str, str, str], Offer] = {}
    for fields in reader:
        if not fields:  # the csv module reads a blank line as []
            continue
        row = _cells(header, fields, f"{where}:{reader.line_num}")
        offer = _offer(row)
        key = (offer.cloud, offer.region, offer.instance_type)
        if key in offers:
            raise ConfigError(f"{row.at}: {' / '.join(key)} is listed twice")
        offers[key] = offer
    if not offers:
        raise ConfigError(f"{where}: the instance catalog has no offers")
    return tuple(offers.values())


class _Cells:
    """One row's cells by column name, and where the row is (for error messages)."""

    def __init__(self, cells: Mapping[str, str], at: str) -> None:
        self.cells, self.at = cells, at

    def text(self, column: str, required: bool = False) -> str:
        value = self.cells[column]
        if required and not value:
            raise ConfigError(f"{self.at}: column {column} is empty")
        return value

    def number(self, column: str, minimum: float, strict: bool) -> float:
        """A finite number at least (``strict``: above) ``minimum``, at most the column's
        :data:`MAXIMUM`."""
        value = self.text(column, required=True)
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"{self.at}: column {column}: {value!r} is not a number") from None
        low = not math.isfinite(number) or number < minimum or (strict and number == minimum)
        if low:
            bound = "above" if strict else "at least"
            raise ConfigError(f"{self.at}: column {column}: {value!r} must be {bound} {minimum:g}")
        if number > MAXIMUM[column]:
            raise ConfigError(
                f"{self.at}: column {column}: {value!r} is more than {MAXIMUM[column]:g}"
            )
        return number

    def whole(self, column: str, minimum: int) -> int:
        number = self.number(column, minimum, strict=False)
        if not number.is_integer():
            raise ConfigError(f"{self.at}: column {column}: {self.cells[column]!r} is not whole")
        return int(number)


def _cells(header: list[str], fields: list[str], at: str) -> _Cells:
    if len(fields) != len(header):
        raise ConfigError(f"{at}: expected {len(header)} fields, got {len(fields)}")
    return _Cells(dict(zip(header, (f.strip() for f in fields), strict=True)), at)


def _offer(row: _Cells) -> Offer:
    gpu_type = row.text("gpu_type")
    gpu_count = row.whole("gpu_count", 0) if row.text("gpu_count") else 0
    if bool(gpu_type) != (gpu_count > 0):
        raise ConfigError(
            f"{row.at}: columns gpu_type {gpu_type!r} and gpu_count {gpu_count} disagree"
        )
    spot, hazard = row.text("spot_usd_h"), row.text("interruptions_per_h")
    return Offer(
        cloud=row.text("cloud", required=True),
        region=row.text("region", required=True),
        instance_type=row.text("instance_type", required=True),
        vcpus=row.whole("vcpus", 1),
        memory_gib=row.number("memory_gib", 0.0, strict=True),
        on_demand_usd_h=row.number("on_demand_usd_h", 0.0, strict=True),
        spot_usd_h=row.number("spot_usd_h", 0.0, strict=True) if spot else None,
        interruptions_per_h=row.number("interruptions_per_h", 0.0, strict=False) if hazard else 0.0,
        gpu_type=gpu_type or None,
        gpu_count=gpu_count,
        interruption_class=row.text("interruption_class"),
        source=row.text("source"),
    )
