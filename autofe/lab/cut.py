"""A lab workspace as it stood at an earlier moment: only the runs that had finished by then.

The nightly job is about a history that grows: night one sees the workspace up to some day,
night two sees the runs that finished since. Cutting a copy of a finished lab workspace at a
virtual time gives night one's view with real runs, and the full workspace is night two's —
the runs after the cut are then genuinely new to the warehouse. Runs are dropped the way
:func:`autofe.lab.forget.forget_runs` drops them (done mark, cluster record, event logs,
manifest entry, retries), and table statistics taken after the cut go too.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from autofe.errors import ConfigError
from autofe.lab.forget import forget_runs

STATS_FILE = Path("table_stats") / "lab_tables.csv"


@dataclass(frozen=True)
class CutReport:
    """What the cut copy holds."""

    out: Path
    kept: int
    dropped: int


def cut_workspace(src: Path, out: Path, until: datetime) -> CutReport:
    """Copy the lab workspace ``src`` to ``out`` without the runs that ended at or after
    ``until`` (virtual time; naive means UTC).

    Raises:
        ConfigError: ``out`` exists, or ``src`` is not a lab workspace.
    """
    if out.exists():
        raise ConfigError(f"{out} exists; give a new folder to cut into")
    cutoff_ms = _epoch_ms(until)
    ends = _run_ends(src)
    late = sorted(run_id for run_id, end in ends.items() if end >= cutoff_ms)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns(".*"))
    dropped = forget_runs(out, late) if late else []
    _drop_later_stats(out / STATS_FILE, until)
    return CutReport(out, len(ends) - len(dropped), len(dropped))


def _run_ends(root: Path) -> dict[int, int]:
    """Every finished run's end time (epoch ms, virtual) by id."""
    runs = root / "runs"
    if not runs.is_dir():
        raise ConfigError(f"{root} is not a lab workspace (no runs/ folder)")
    return {
        int(path.stem): int(json.loads(path.read_text(encoding="utf-8"))["end_time"])
        for path in runs.glob("*.json")
        if path.stem.isdigit()
    }


def _drop_later_stats(path: Path, until: datetime) -> None:
    """Keep the statistics rows taken before ``until`` (``as_of`` column)."""
    if not path.is_file():
        return
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    kept = [r for r in rows if _aware(datetime.fromisoformat(r["as_of"])) < _aware(until)]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
    writer.writeheader()
    writer.writerows(kept)
    path.write_text(buffer.getvalue(), encoding="utf-8")


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _epoch_ms(moment: datetime) -> int:
    return round(_aware(moment).timestamp() * 1000)
