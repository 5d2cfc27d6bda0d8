"""Check a derived row against its warehouse table before it is stored: one bad value, one issue.

Workspace JSON is whatever an export, a script or a hand edit wrote: a job name can be an
object, a worker count ``1e300``, a tag a lone UTF-16 surrogate. Such a value used to fail the
whole file's Arrow conversion, or the whole batch. :func:`conform_row` finds it first, so the
record is stored with that column NULL and the report names the record and the column.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from autofe.ingest.eventlog.fields import shown
from autofe.warehouse.tables import table

_INT32 = 1 << 31
_INT64 = 1 << 63
_EXACT = (1 << 53) + 1


def _text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate: JSON allows it, UTF-8 cannot hold it
        return False
    return True


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(value: Any) -> bool:
    if not _text(value):
        return False
    try:
        json.loads(value, parse_constant=_reject_constant)
    except ValueError:
        return False
    return True


def _whole(limit: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and -limit <= v < limit


_ACCEPTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "VARCHAR": (_text, "text"),
    "JSON": (_json, "JSON text"),
    "BIGINT": (_whole(_INT64), "a 64-bit whole number"),
    "INTEGER": (_whole(_INT32), "a 32-bit whole number"),
    # Arrow takes an int as a double only where the double holds it exactly
    "DOUBLE": (lambda v: type(v) is float or _whole(_EXACT)(v), "a number"),
    "BOOLEAN": (lambda v: isinstance(v, bool), "true or false"),
    "TIMESTAMP": (lambda v: isinstance(v, datetime), "a time"),
    "INTEGER[]": (
        lambda v: isinstance(v, list) and all(_whole(_INT32)(x) for x in v),
        "a list of 32-bit whole numbers",
    ),
}


class UnstorableKey(ValueError):
    """A primary-key column cannot hold its value: the row cannot be stored at all."""


def conform_row(name: str, row: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``row`` with every value its column cannot hold set to NULL, and one reason per column.

    >>> row, reasons = conform_row("jobs", {"job_id": "7", "name": {"a": 1}})
    >>> row["name"], reasons
    (None, ["jobs.name cannot hold {'a': 1} (expected text); stored as NULL"])

    Raises:
        UnstorableKey: a primary-key column cannot hold its value.
    """
    spec = table(name)
    fixed = dict(row)
    reasons = []
    for column in spec.columns:
        value = fixed.get(column.name)
        accepts, expected = _ACCEPTS[column.type]
        if value is None or accepts(value):
            continue
        what = f"{name}.{column.name} cannot hold {shown(value)} (expected {expected})"
        if column.name in spec.primary_key:
            raise UnstorableKey(what)
        fixed[column.name] = None
        reasons.append(f"{what}; stored as NULL")
    return fixed, reasons
