"""One cell of a run table as id text, a number, seconds, an attribute value or JSON."""

from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal

UNIT_SECONDS: dict[str, tuple[int, int]] = {
    "s": (1, 1),
    "ms": (1, 1000),
    "us": (1, 1_000_000),
    "min": (60, 1),
    "h": (3600, 1),
}


def cell_text(value: object) -> str:
    """A cell as id text: whole floats lose their ``.0``, booleans are lower case.

    >>> cell_text(4.0), cell_text(0.001), cell_text(True), cell_text("c4.large")
    ('4', '0.001', 'true', 'c4.large')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


def finite_number(value: object) -> float | None:
    """A finite number from a numeric or numeric-text cell, else None.

    >>> [finite_number(v) for v in ("1.5", 3, "n/a", float("nan"), True)]
    [1.5, 3.0, None, None, None]
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def to_seconds(value: float, unit: str) -> float:
    """Convert a duration in ``unit`` (s, ms, us, min, h) to seconds.

    >>> to_seconds(846235, "ms"), to_seconds(1.5, "min"), to_seconds(2, "h")
    (846.235, 90.0, 7200.0)
    """
    num, den = UNIT_SECONDS[unit]
    return value * num / den


def attribute_cell(value: object) -> tuple[float | None, str | None] | None:
    """A cell as (numeric value, text); None when the cell is empty or not a finite number.

    >>> [attribute_cell(v) for v in (3, "sync", True, None, float("nan"))]
    [(3.0, None), (None, 'sync'), (None, 'true'), None, None]
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return None, cell_text(value)
    if isinstance(value, int | float | Decimal):
        number = finite_number(value)
        return None if number is None else (number, None)
    if isinstance(value, datetime | date):
        return None, value.isoformat()
    return None, str(value)


def json_value(value: object) -> object:
    """A cell as JSON: whole numbers stay whole, times become ISO text, NaN becomes null.

    >>> json_value(256), json_value(0.5), json_value(float("nan")), json_value(date(2018, 1, 6))
    (256, 0.5, None, '2018-01-06')
    """
    if isinstance(value, bool | int | str):
        return value
    cell = attribute_cell(value)
    if cell is None:
        return None
    return cell[0] if cell[0] is not None else cell[1]
