"""Values as the Jobs and Clusters APIs write them: epoch ms with 0 for "not yet", ids as numbers.

Every workspace file is whatever an export, a script or a hand edit wrote, so each reader takes
``Any`` and returns None (or an empty object) for what it cannot use.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autofe.errors import IngestError
from autofe.ingest.eventlog.fields import MAX_EPOCH_MS

Json = dict[str, Any]
SOURCE = "workspace"
"""The ``source`` of every row a workspace adds."""


def epoch_ms(value: Any) -> int | None:
    """An API epoch-ms value; the Jobs API writes 0 for "not yet" (e.g. end of a running run).

    >>> [epoch_ms(v) for v in (1707850685000, 0, None, "x", 1e300, float("nan"))]
    [1707850685000, None, None, None, None, None]
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not (0 < value <= MAX_EPOCH_MS):  # also NaN, which Python's json reads
        return None
    return int(value)


def utc_time(ms: int | None) -> datetime | None:
    """Epoch ms to the naive UTC timestamp the warehouse stores.

    >>> utc_time(1707850685000), utc_time(10**18)
    (datetime.datetime(2024, 2, 13, 18, 58, 5), None)
    """
    if ms is None or not 0 <= ms <= MAX_EPOCH_MS:  # a sum of two API values can overflow
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def id_text(value: Any) -> str | None:
    """An id as text (the API writes ids as numbers, the warehouse keys are strings)."""
    return None if value is None or value == "" else str(value)


def dicts_of(value: Any) -> list[Json]:
    """The objects of a JSON list (anything else in it is skipped); none for a non-list."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def dict_of(value: Any) -> Json:
    """A JSON object, or an empty one for anything else (so ``.get`` chains never fail)."""
    return value if isinstance(value, dict) else {}


_PAGINATION = frozenset({"has_more", "next_page_token", "prev_page_token"})


def records(content: Any, list_key: str, path: Path) -> list[Any]:
    """The objects of a list response (``{"jobs": [...]}``, a bare array) or one get response.

    Raises:
        IngestError: the content is neither.
    """
    if isinstance(content, dict):
        if list_key in content:
            if not isinstance(content[list_key], list):
                raise IngestError(str(path), f"{list_key!r} is not a list")
            return list(content[list_key])
        return [] if set(content) <= _PAGINATION else [content]
    if isinstance(content, list):
        return content
    raise IngestError(str(path), f"expected a JSON object or a {list_key!r} list")
