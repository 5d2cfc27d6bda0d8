"""The reported actuals the dashboard draws: the tail of ``HOME/actuals.jsonl``, scored.

``POST /v1/actuals`` appends one JSON object per finished run: its real ``duration_s`` and,
when this server had predicted that run, the p50 and the 80 % / 90 % interval bounds it served
(``predicted_low_80`` ..., absent from records written before they were kept). The file only
grows, so a page reads its last lines (seeking from the end) and counts the rest without
parsing them: a page costs the same with a year of actuals as with a day's.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CHART_POINTS = 2000
"""The latest actuals drawn: more points than this overlap on a 900-pixel-wide chart."""
ROLLING_RUNS = 50
"""Default window of the rolling MAPE and coverage, in matched actuals: the degradation
trigger's (``TriggerSettings.window``, which the dashboard passes)."""
_BLOCK = 1 << 16


@dataclass(frozen=True)
class Actual:
    """One reported actual and what the server had predicted for it (None: not remembered)."""

    at: float
    """POSIX seconds: when the run finished, or when it was reported if that is not given."""
    reported: float
    run_id: str
    job_id: str
    duration_s: float
    p50_s: float | None
    low_80: float | None
    high_80: float | None
    model_version: str | None


@dataclass(frozen=True)
class Rolling:
    """Rolling MAPE and 80 % coverage after each matched actual, in report order (``at``:
    when each run finished, as on the actuals chart)."""

    at: tuple[float, ...]
    mape: tuple[float, ...]
    coverage_at: tuple[float, ...]
    coverage_80: tuple[float, ...]


@dataclass(frozen=True)
class ActualsTail:
    """The latest actuals (oldest first), how many lines the file has, and what was skipped."""

    lines: int
    actuals: tuple[Actual, ...]
    skipped: int
    """Unreadable lines among those read (a torn last line, a hand-edited one)."""
    rolling: Rolling

    @property
    def matched(self) -> int:
        return sum(a.p50_s is not None for a in self.actuals)


def read_actuals_tail(
    path: Path, points: int = CHART_POINTS, window: int = ROLLING_RUNS
) -> ActualsTail:
    """The last ``points`` actuals of ``path`` and their rolling scores (a missing file: none).

    ``window - 1`` more lines are read than drawn, so the first drawn point's rolling score
    already has its whole window behind it.
    """
    if not path.is_file():
        return ActualsTail(0, (), 0, rolling_scores((), window))
    lines, total = tail_lines(path, points + window - 1)
    parsed = [parse_actual(line) for line in lines if line.strip()]
    valid = [a for a in parsed if a is not None]
    rolling = rolling_scores(valid, window)
    shown = valid[-points:] if points else []
    hidden = valid[: len(valid) - len(shown)]
    return ActualsTail(total, tuple(shown), len(parsed) - len(valid), _drop(rolling, hidden))


def _drop(rolling: Rolling, hidden: Sequence[Actual]) -> Rolling:
    """The rolling scores of the shown actuals only (the hidden ones filled their windows)."""
    matched = sum(a.p50_s is not None for a in hidden)
    bounded = sum(a.p50_s is not None and a.low_80 is not None for a in hidden)
    return Rolling(
        rolling.at[matched:],
        rolling.mape[matched:],
        rolling.coverage_at[bounded:],
        rolling.coverage_80[bounded:],
    )


def tail_lines(path: Path, n: int) -> tuple[list[str], int]:
    """The last ``n`` lines of ``path`` and its number of lines, reading blocks from the end.

    Counting newlines is a byte scan; only the tail is decoded.
    """
    lines, position, tail = _tail(path, n)
    with path.open("rb") as handle:
        total = _count_newlines(handle, position) + tail.count(b"\n")
    if tail and not tail.endswith(b"\n"):
        total += 1  # a last line without its newline (torn, or being appended) is a line
    return lines, total


def last_lines(path: Path, n: int) -> list[str]:
    """The last ``n`` lines of ``path`` without counting the rest: what a check after every
    request can afford on a file that grows for a year."""
    return _tail(path, n)[0]


def _tail(path: Path, n: int) -> tuple[list[str], int, bytes]:
    """The last ``n`` lines, the offset where the bytes read begin, and those bytes."""
    with path.open("rb") as handle:
        position = handle.seek(0, os.SEEK_END)
        tail = b""
        while position > 0 and tail.count(b"\n") <= n:
            step = min(_BLOCK, position)
            position -= step
            handle.seek(position)
            tail = handle.read(step) + tail
    lines = tail.decode("utf-8", errors="replace").splitlines()
    if position > 0:
        lines = lines[1:]  # the first is the end of a line that began before the block
    return (lines[-n:] if n else []), position, tail


def _count_newlines(handle: Any, stop: int) -> int:
    count = 0
    while handle.tell() < stop:
        count += handle.read(min(1 << 20, stop - handle.tell())).count(b"\n")
    return count


def parse_actual(line: str) -> Actual | None:
    """One line as an :class:`Actual`, or None when it is not a valid record.

    >>> a = parse_actual('{"run_id": "r", "job_id": "7", "duration_s": 12.5, '
    ...                  '"reported_at": "2025-01-02T03:04:05+00:00", "predicted_p50_s": 10}')
    >>> a.duration_s, a.p50_s, a.low_80, a.at == a.reported
    (12.5, 10.0, None, True)
    >>> parse_actual('{"run_id": "r", "duration_s": -1}') is None, parse_actual('{"ru') is None
    (True, True)
    """
    try:
        data = json.loads(line)
        reported = _seconds(data["reported_at"])
        finished = _seconds(data["finished_at"]) if data.get("finished_at") else reported
        duration = _positive(data["duration_s"])
        low, high = (
            _positive(data.get("predicted_low_80")),
            _positive(data.get("predicted_high_80")),
        )
        version = data.get("model_version")
        return Actual(
            at=finished,
            reported=reported,
            run_id=str(data["run_id"]),
            job_id=str(data.get("job_id", "")),
            duration_s=_required(duration),
            p50_s=_positive(data.get("predicted_p50_s")),
            low_80=low if high is not None else None,
            high_80=high if low is not None else None,
            model_version=None if version is None else str(version),
        )
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None


def rolling_scores(actuals: Sequence[Actual], window: int = ROLLING_RUNS) -> Rolling:
    """MAPE over the last ``window`` actuals with a prediction, and the share of the last
    ``window`` with an 80 % interval that fell inside it, after each one (fewer at the start).

    >>> def a(t, d, p, lo=None, hi=None):
    ...     return Actual(t, t, "r", "j", d, p, lo, hi, "v")
    >>> r = rolling_scores([a(1, 10, 12, 8, 11), a(2, 10, 10), a(3, 10, 5, 4, 6)], window=2)
    >>> r.mape, r.coverage_80
    ((0.2, 0.1, 0.25), (1.0, 0.5))
    """
    matched = [a for a in actuals if a.p50_s is not None]
    errors = [abs(_required(a.p50_s) - a.duration_s) / a.duration_s for a in matched]
    bounded = [a for a in matched if a.low_80 is not None and a.high_80 is not None]
    hits = [float(_required(a.low_80) <= a.duration_s <= _required(a.high_80)) for a in bounded]
    return Rolling(
        tuple(a.at for a in matched),
        _rolling_mean(errors, window),
        tuple(a.at for a in bounded),
        _rolling_mean(hits, window),
    )


def _rolling_mean(values: Sequence[float], window: int) -> tuple[float, ...]:
    out = []
    total = 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(round(total / min(i + 1, window), 6))
    return tuple(out)


def _seconds(stamp: Any) -> float:
    """POSIX seconds of an ISO 8601 time (UTC when it names no zone)."""
    moment = datetime.fromisoformat(str(stamp))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _positive(value: Any) -> float | None:
    """A positive finite number (not a boolean), else None."""
    if value is None or isinstance(value, bool):
        return None
    number = float(value)
    return number if math.isfinite(number) and number > 0 else None


def _required(value: float | None) -> float:
    if value is None:
        raise ValueError("a required number is missing or not positive")
    return value
