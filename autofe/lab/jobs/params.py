"""Declarative run-to-run parameters of a lab job: date windows, filters, top-k, thresholds.

Each parameter draws from a ``random.Random`` in a fixed order, so a job's parameters are a pure
function of the generator's state and the virtual day.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal, Protocol

FIRST_DAY = date(1992, 1, 1)
LAST_DAY = date(1998, 12, 31)
# Recurring jobs look back from a moving "today" that walks through the year before 1997-02-01:
# the lab's fact tables grow month by month from 1997-01, so a moving window always finds data.
ANCHOR_START = date(1996, 2, 1)
ANCHOR_DAYS = 366
# Ad-hoc windows end anywhere in TPC-H's order range (late ones may find little data yet).
RANDOM_START = date(1992, 2, 1)
RANDOM_DAYS = (date(1998, 8, 2) - RANDOM_START).days


class Param(Protocol):
    """One parameter (or a few related ones) of a job."""

    def draw(self, rng: random.Random, day: int) -> dict[str, str]:
        """Draw values for the virtual ``day``, keyed by the ``${key}`` placeholder names."""
        ...


def log_uniform_int(rng: random.Random, lo: int, hi: int) -> int:
    """An integer in ``[lo, hi]`` whose logarithm is uniform (short windows are common).

    >>> r = random.Random(0)
    >>> all(1 <= log_uniform_int(r, 1, 365) <= 365 for _ in range(100))
    True
    """
    return min(hi, max(lo, round(math.exp(rng.uniform(math.log(lo), math.log(hi))))))


def anchor(day: int) -> date:
    """The exclusive end of a recurring job's window on virtual ``day``.

    >>> anchor(0), anchor(1), anchor(366)
    (datetime.date(1996, 2, 1), datetime.date(1996, 2, 2), datetime.date(1996, 2, 1))
    """
    return ANCHOR_START + timedelta(days=day % ANCHOR_DAYS)


@dataclass(frozen=True)
class DateWindow:
    """``${start}`` (inclusive), ``${end}`` (exclusive) and ``${days}``, with an optional prefix.

    The length is log-uniform in ``[min_days, max_days]``. ``"moving"`` windows end on the
    virtual day; ``"random"`` ones (ad-hoc analysis) end anywhere in TPC-H's order range.
    """

    min_days: int = 1
    max_days: int = 365
    end: Literal["moving", "random"] = "moving"
    prefix: str = ""

    def draw(self, rng: random.Random, day: int) -> dict[str, str]:
        days = log_uniform_int(rng, self.min_days, self.max_days)
        if self.end == "moving":
            stop = anchor(day)
        else:
            stop = RANDOM_START + timedelta(days=rng.randrange(RANDOM_DAYS))
        start = max(FIRST_DAY, stop - timedelta(days=days))
        p = self.prefix
        return {
            f"{p}start": start.isoformat(),
            f"{p}end": stop.isoformat(),
            f"{p}days": str((stop - start).days),
        }


@dataclass(frozen=True)
class Choice:
    """One value out of ``values``, pasted verbatim (quote it in the script)."""

    key: str
    values: tuple[str, ...]

    def draw(self, rng: random.Random, day: int) -> dict[str, str]:
        return {self.key: rng.choice(self.values)}


@dataclass(frozen=True)
class Subset:
    """Between ``lo`` and ``hi`` distinct values, rendered as a quoted SQL ``IN`` list.

    >>> Subset("m", ("AIR", "RAIL"), 2, 2).draw(random.Random(1), 0)["m"].count("'")
    4
    """

    key: str
    values: tuple[str, ...]
    lo: int = 1
    hi: int = 3

    def draw(self, rng: random.Random, day: int) -> dict[str, str]:
        chosen = sorted(
            rng.sample(self.values, rng.randint(self.lo, min(self.hi, len(self.values))))
        )
        return {self.key: ", ".join("'" + v.replace("'", "''") + "'" for v in chosen)}


@dataclass(frozen=True)
class IntRange:
    """An integer in ``[lo, hi]``, uniform or log-uniform (top-k, thresholds, iterations)."""

    key: str
    lo: int
    hi: int
    log: bool = False

    def draw(self, rng: random.Random, day: int) -> dict[str, str]:
        value = (
            log_uniform_int(rng, self.lo, self.hi) if self.log else rng.randint(self.lo, self.hi)
        )
        return {self.key: str(value)}


@dataclass(frozen=True)
class FloatRange:
    """A decimal number in ``[lo, hi]`` with ``digits`` decimals (money thresholds, rates)."""

    key: str
    lo: float
    hi: float
    digits: int = 2

    def draw(self, rng: random.Random, day: int) -> dict[str, str]:
        return {self.key: f"{rng.uniform(self.lo, self.hi):.{self.digits}f}"}
