"""The virtual calendar: submit times for runs that actually execute now.

Runs execute one after another on this machine, but the workspace records them as if they
were submitted over ``days`` virtual days starting at :data:`CALENDAR_START`. Event logs keep
Spark's real wall-clock times; ``lab.json`` records, per run, the offset between the two.
"""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta

CALENDAR_START = datetime(2024, 3, 1, tzinfo=UTC)
"""Virtual day 0, midnight UTC."""

_HOUR_MS = 3_600_000
_DAY_MS = 24 * _HOUR_MS


def day_start_ms(day: int) -> int:
    """Epoch ms of midnight UTC of virtual ``day``.

    >>> day_start_ms(1) - day_start_ms(0)
    86400000
    """
    return int(CALENDAR_START.timestamp() * 1000) + day * _DAY_MS


def virtual_date(day: int) -> date:
    """The calendar date of virtual ``day``.

    >>> virtual_date(0).isoformat()
    '2024-03-01'
    """
    return (CALENDAR_START + timedelta(days=day)).date()


def submit_ms(rng: random.Random, schedule: str, day: int, job_hour: int) -> int:
    """A submit time on ``day`` that fits the job's schedule.

    Scheduled jobs fire at their own hour (``hourly`` ones at a random hour of the day) a few
    seconds after the minute, as Databricks' scheduler does; ``adhoc`` ones at any second.

    >>> r = random.Random(0)
    >>> (submit_ms(r, "daily", 2, 3) - day_start_ms(2)) // 3_600_000
    3
    """
    if schedule == "adhoc":
        return day_start_ms(day) + rng.randrange(_DAY_MS)
    hour = rng.randrange(24) if schedule == "hourly" else job_hour
    return day_start_ms(day) + hour * _HOUR_MS + rng.randrange(1_000, 20_000)
