"""The feature values of every prediction served: ``HOME/served.jsonl``, appended and read.

The retraining triggers compare the features the model is asked about with those it was
trained on (training-serving skew, as a PSI per feature). Only the server sees the first, so
``autofe serve`` appends one JSON line per prediction: when, which model, which run and job,
and the model's feature values the prediction used (given by name or computed). It is
telemetry, not a record anyone is owed: no fsync, and a line that cannot be written is the
caller's warning, never a failed prediction. The file only grows (a line a prediction), and
the skew trigger reads its end after every night, so the reader seeks from the end and reads
only the blocks that hold the lines asked for
(:func:`~autofe.pipelines.serve_ui_actuals.last_lines`, shared with the dashboard's actuals):
its cost does not grow with the file. It does not count the file's lines either: that byte
scan took 0.54 s on a 500 MB file.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autofe.pipelines.serve_ui_actuals import last_lines

ServedValue = float | str | bool | None


@dataclass(frozen=True)
class Served:
    """One served prediction: when, by which model, for which run, from which values."""

    at_s: float
    """POSIX seconds when it was served."""
    model_version: str | None
    run_id: str | None
    """The run id the request gave (None: it gave none)."""
    job_id: str | None
    features: Mapping[str, ServedValue]
    """The model's feature values the prediction used (None: missing)."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of one line (non-finite numbers as null: the file stays JSON).

        >>> Served(1.5, "v0001", None, "7", {"a": 2, "b": float("nan")}).as_dict()["features"]
        {'a': 2, 'b': None}
        """
        return {
            "at_s": self.at_s,
            "model_version": self.model_version,
            "run_id": self.run_id,
            "job_id": self.job_id,
            "features": {name: _finite(value) for name, value in self.features.items()},
        }


@dataclass(frozen=True)
class ServedTail:
    """The latest served records (oldest first), the lines read and what was skipped."""

    lines: int
    """Lines read from the end (at most the ``n`` asked for): valid records plus skipped.
    Not the file's line count, which would take a scan of the whole file."""
    records: tuple[Served, ...]
    skipped: int
    """Unreadable lines among those read (a torn last line while a server appends, a hand
    edit)."""


class ServedLog:
    """Appends :class:`Served` lines to one file, one whole line per ``write``.

    Each line is written with a single ``os.write`` on a descriptor opened with ``O_APPEND``,
    so lines from several threads (the lock) or several servers on one home (the kernel's
    append) do not interleave. The file is opened for each line rather than held open, so
    moving it away (rotation) starts a new one at the next prediction.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, served: Served) -> None:
        """Append one line (created on first use).

        Raises:
            OSError: the file cannot be opened or written.
        """
        data = (json.dumps(served.as_dict(), separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                written = os.write(fd, data)
                while written < len(data):  # a short write (a full disk, a signal)
                    written += os.write(fd, data[written:])
            finally:
                os.close(fd)


def read_served_tail(path: Path, n: int) -> ServedTail:
    """The records on the last ``n`` lines of ``path`` (a missing file: none), reading only
    the blocks at the file's end that hold them."""
    if not path.is_file():
        return ServedTail(0, (), 0)
    parsed = [parse_served(line) for line in last_lines(path, n) if line.strip()]
    records = tuple(s for s in parsed if s is not None)
    return ServedTail(len(parsed), records, len(parsed) - len(records))


def parse_served(line: str) -> Served | None:
    """One line as a :class:`Served`, or None when it is not a valid record.

    >>> parse_served('{"at_s": 2.5, "model_version": "v1", "run_id": null, "job_id": "7", '
    ...              '"features": {"x": 1, "y": "a", "z": null}}').features
    {'x': 1.0, 'y': 'a', 'z': None}
    >>> parse_served('{"at_s": 2.5, "features": [1]}'), parse_served('{"at_s": 2')
    (None, None)
    """
    try:
        data = json.loads(line)
        at_s = data["at_s"]
        features = data["features"]
        if isinstance(at_s, bool) or not math.isfinite(float(at_s)):
            return None
        if not isinstance(features, dict):
            return None
        return Served(
            at_s=float(at_s),
            model_version=_text(data.get("model_version")),
            run_id=_text(data.get("run_id")),
            job_id=_text(data.get("job_id")),
            features=_values(features),
        )
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None


def _values(features: Mapping[str, Any]) -> dict[str, ServedValue]:
    """Feature values as read: booleans and text as they are, numbers as floats (non-finite:
    None). One loop over exact types: the skew check parses 500 lines of this.
    """
    out: dict[str, ServedValue] = {}
    for name, value in features.items():
        kind = type(value)
        if kind is float:
            out[name] = value if math.isfinite(value) else None
        elif kind is int:
            out[name] = float(value)
        elif value is None or kind is str or kind is bool:
            out[name] = value
        else:
            raise TypeError(f"not a feature value: {value!r}")
    return out


def _finite(value: ServedValue) -> ServedValue:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"not text: {value!r}")
    return value
