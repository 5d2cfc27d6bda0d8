"""Daily table-statistics snapshots of the lab's TPC-H databases, as a catalog would record them.

A real workspace knows its input sizes before a run starts (``DESCRIBE DETAIL``, Unity Catalog
statistics); the lab writes the same facts: for every scale factor, table and virtual day, the
rows, bytes, files and partitions a run submitted that day can see (the growth cutoff applies),
as of that day's 00:00 UTC. Tables are named ``tpch_sf<sf>.<table>``; a run's scale factor is
its ``lab_scale_factor`` tag. Computed from Parquet footers only, so it takes seconds.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

from autofe.lab.clock import day_start_ms
from autofe.lab.data import SKEWED, TABLES, growth_cutoff, partition_column, table_dir

FIELDS = ("table", "as_of", "bytes", "rows", "files", "partitions")


def database(scale_factor: float) -> str:
    """The database name of a scale factor.

    >>> database(3.0), database(0.01)
    ('tpch_sf3', 'tpch_sf0.01')
    """
    return f"tpch_sf{scale_factor:g}"


def write_table_stats(
    out: Path, data_root: Path, scale_factors: Sequence[float], days: int
) -> Path:
    """Write ``out/table_stats/lab_tables.csv`` (atomically) and return its path."""
    target = out / "table_stats" / "lab_tables.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name("." + target.name)
    with partial.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        for sf in scale_factors:
            writer.writerows(_rows(data_root, sf, days))
    partial.replace(target)
    return target


def _rows(data_root: Path, sf: float, days: int) -> Iterator[tuple[object, ...]]:
    files = {t: _files(table_dir(data_root, sf, t)) for t in (*TABLES, *SKEWED)}
    for day in range(days):
        as_of = datetime.fromtimestamp(day_start_ms(day) / 1000, UTC).isoformat()
        cutoff = growth_cutoff(day, days).isoformat()
        for table, parts in files.items():
            visible = [p for p in parts if _visible(p[0], table, cutoff)]
            rows = sum(p[1] for p in visible)
            size = sum(p[2] for p in visible)
            partitions = len({p[0].parent for p in visible}) if partition_column(table) else 0
            yield (f"{database(sf)}.{table}", as_of, size, rows, len(visible), partitions)


def _files(directory: Path) -> list[tuple[Path, int, int]]:
    """(path, rows, bytes) of every Parquet file of a table."""
    return [
        (p, pq.read_metadata(p).num_rows, p.stat().st_size)
        for p in sorted(directory.rglob("*.parquet"))
    ]


def _visible(path: Path, table: str, cutoff: str) -> bool:
    """A month partition ``col=YYYY-MM-DD`` is visible up to the growth cutoff."""
    column = partition_column(table)
    if column is None:
        return True
    value = path.parent.name.removeprefix(f"{column}=")
    return value <= cutoff
