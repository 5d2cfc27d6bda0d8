"""Daily table-statistics snapshots: what a run submitted that day can see, from Parquet footers."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from autofe.lab.data import SKEWED, TABLES, growth_cutoff, table_dir
from autofe.lab.table_stats import write_table_stats


def fake_data(root: Path, sf: float) -> None:
    """Every lab table with one file; lineitem with one partition per month of 1997-1998."""
    for table in (*TABLES, *SKEWED):
        folder = table_dir(root, sf, table)
        if table == "lineitem":
            for year, month in [(1997, m) for m in range(1, 13)] + [(1998, 1)]:
                part = folder / f"l_shipmonth={year}-{month:02d}-01"
                part.mkdir(parents=True)
                pq.write_table(pa.table({"x": list(range(month))}), part / "part-0.parquet")
        else:
            folder.mkdir(parents=True)
            pq.write_table(pa.table({"x": [1, 2, 3]}), folder / "part-0.parquet")


def test_snapshots_follow_the_growth_cutoff(tmp_path: Path) -> None:
    fake_data(tmp_path / "data", 0.5)
    path = write_table_stats(tmp_path / "ws", tmp_path / "data", (0.5,), days=3)
    rows = list(csv.DictReader(path.read_text().splitlines()))
    assert len(rows) == 3 * (len(TABLES) + len(SKEWED))
    lineitem = [r for r in rows if r["table"] == "tpch_sf0.5.lineitem"]
    assert [r["as_of"][:10] for r in lineitem] == ["2024-03-01", "2024-03-02", "2024-03-03"]
    # day 0 sees months up to 1997-01 only; the last day sees every partition written
    assert growth_cutoff(0, 3).isoformat() == "1997-01-01"
    assert (lineitem[0]["rows"], lineitem[0]["files"], lineitem[0]["partitions"]) == ("1", "1", "1")
    assert lineitem[-1]["files"] == "13" and int(lineitem[-1]["rows"]) == sum(range(1, 13)) + 1
    assert int(lineitem[0]["bytes"]) < int(lineitem[1]["bytes"])
    nation = next(r for r in rows if r["table"] == "tpch_sf0.5.nation")
    assert (nation["rows"], nation["partitions"]) == ("3", "0")
