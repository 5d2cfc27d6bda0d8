"""Find the event logs under a path: single files, rolled v2 directories, Databricks parts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Files that sit next to event logs but are never logs themselves.
NOT_LOGS = frozenset(
    {".csv", ".md", ".json", ".toml", ".crc", ".py", ".sql", ".parquet", ".txt", ".yaml", ".yml"}
)
INPROGRESS = ".inprogress"
_V2_PART = re.compile(r"^events_(\d+)_")
_DB_PART = re.compile(r"^eventlog-\d{4}-\d{2}-\d{2}--\d{2}-\d{2}(\.gz|\.zstd|\.zst)?$")


@dataclass(frozen=True)
class LogSource:
    """One application's log: one file, or the ordered parts of a rolled log."""

    parts: tuple[Path, ...]

    @property
    def path(self) -> Path:
        """The path users know the log by (the directory for rolled logs)."""
        first = self.parts[0]
        return first.parent if len(self.parts) > 1 or _is_part(first) else first


def _is_part(p: Path) -> bool:
    return bool(_V2_PART.match(p.name)) or p.name == "eventlog" or bool(_DB_PART.match(p.name))


def rolled_parts(directory: Path) -> tuple[Path, ...] | None:
    """Order the parts of a rolled log directory, or None if it is not one.

    Spark's v2 layout numbers parts ``events_N_<app>``; Databricks rolls ``eventlog-<time>.gz``
    and keeps writing the current ``eventlog`` last.
    """
    names = {p.name: p for p in directory.iterdir() if p.is_file()}
    v2 = sorted((int(m.group(1)), p) for n, p in names.items() if (m := _V2_PART.match(n)))
    if v2 and directory.name.startswith("eventlog_v2_"):
        return tuple(p for _, p in v2)
    db = sorted(p for n, p in names.items() if _DB_PART.match(n))
    if db or "eventlog" in names:
        return (*db, *([names["eventlog"]] if "eventlog" in names else []))
    return None


def find_event_logs(path: Path) -> list[LogSource]:
    """Every event log at or below ``path``, each rolled log as one source."""
    if path.is_file():
        return [LogSource((path,))]
    if not path.is_dir():
        return [LogSource((path,))]  # let the reader report it as unreadable
    parts = rolled_parts(path)
    if parts:
        return [LogSource(parts)]
    found: list[LogSource] = []
    children = sorted(path.iterdir())
    names = {c.name for c in children}
    for child in children:
        if child.name.startswith(".") or child.suffix.lower() in NOT_LOGS:
            continue
        if child.name.endswith(INPROGRESS) and child.name.removesuffix(INPROGRESS) in names:
            continue  # the finished log supersedes what was written while it ran
        found.extend(find_event_logs(child))
    return found
