"""The reported actuals a degradation check reads: the tail of ``HOME/actuals.jsonl``.

A check runs after every ``POST /v1/actuals``. Parsing the file's last 2,000 lines each time
costs 30–60 ms on two cores (``benchmarks/triggers.py``), a hundred times the append itself;
so the server keeps an :class:`ActualsCursor` that remembers where it stopped and parses only
what was appended since (one line per actual). Other callers (a night, ``autofe triggers
check``) read the tail once with :func:`latest_actuals`.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from autofe.pipelines.serve_ui_actuals import Actual, last_lines, parse_actual

ACTUALS_READ = 2000
"""Latest actuals a check considers: the global window and every job's last runs fit in it."""
BYTES_PER_LINE = 1024
"""What the first read of a cursor takes per line kept (an actuals line is 300–400 bytes)."""


def latest_actuals(path: Path, n: int = ACTUALS_READ) -> list[Actual]:
    """The last ``n`` valid actuals of ``path``, oldest first (a missing file: none)."""
    if not path.is_file():
        return []
    parsed = (parse_actual(line) for line in last_lines(path, n))
    return [a for a in parsed if a is not None]


class ActualsCursor:
    """The latest ``keep`` actuals of one file, brought up to date by reading only the bytes
    appended since the last read, up to the last complete line (a line being written is read
    next time). A file that shrank (rotated, replaced) is read afresh."""

    def __init__(self, path: Path, keep: int = ACTUALS_READ) -> None:
        self.path = path
        self.offset = 0
        self.actuals: deque[Actual] = deque(maxlen=keep)

    def read(self) -> list[Actual]:
        """The latest actuals, oldest first."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            self.offset = 0
            self.actuals.clear()
            return []
        if size < self.offset:
            self.offset = 0
            self.actuals.clear()
        start = self.offset
        if start == 0:
            start = max(0, size - (self.actuals.maxlen or ACTUALS_READ) * BYTES_PER_LINE)
        with self.path.open("rb") as handle:
            handle.seek(start)
            data = handle.read(size - start)
        end = data.rfind(b"\n") + 1
        lines = data[:end].decode("utf-8", errors="replace").splitlines()
        if start > self.offset and start > 0:
            lines = lines[1:]  # the first began before the bytes read
        self.offset = start + end
        for line in lines:
            actual = parse_actual(line)
            if actual is not None:
                self.actuals.append(actual)
        return list(self.actuals)
