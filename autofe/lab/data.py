"""TPC-H data for the lab: generated once per scale factor, partitioned by month, plus skew.

``tpchgen-cli`` writes one Parquet file per table; :func:`prepare_data` rewrites the two
fact tables partitioned by month (``lineitem`` by ``l_shipmonth``, ``orders`` by
``o_ordermonth``, DATE partitions holding the first day of the month) so a date-range
predicate on the partition column prunes files. ``lineitem_skew`` and ``orders_skew`` are
copies whose join keys (``l_partkey``/``l_suppkey``, ``o_custkey``) are Zipf distributed.

Growth: the fact tables grow day by day over the virtual calendar. On virtual day ``d`` a
run sees only the months up to :func:`growth_cutoff` (a partition filter, so the older data
is the whole table on the last day and about two thirds of it on day 0).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from autofe.errors import ConfigError

log = logging.getLogger(__name__)

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")
PARTITION_COLUMNS = {
    "lineitem": ("l_shipdate", "l_shipmonth"),
    "orders": ("o_orderdate", "o_ordermonth"),
}
SKEWED = {
    "lineitem_skew": ("lineitem", ("l_partkey", "l_suppkey")),
    "orders_skew": ("orders", ("o_custkey",)),
}
KEY_DOMAIN = {"l_partkey": "part", "l_suppkey": "supplier", "o_custkey": "customer"}
ZIPF_S = 1.3
"""Zipf exponent of the skewed join keys: the hottest key holds a quarter to a third of the rows."""
GROWTH_FIRST = date(1997, 1, 1)
GROWTH_LAST = date(1998, 12, 1)
_DONE = ".complete"


@dataclass(frozen=True)
class DataReport:
    """Where the data of each scale factor lies and how long generating it took."""

    root: Path
    seconds: dict[float, float]


def sf_dir(root: Path, scale_factor: float) -> Path:
    """Folder of one scale factor's tables.

    >>> sf_dir(Path("d"), 0.01).as_posix()
    'd/sf=0.01'
    """
    return root / f"sf={scale_factor:g}"


def table_dir(root: Path, scale_factor: float, table: str) -> Path:
    return sf_dir(root, scale_factor) / table


def partition_column(table: str) -> str | None:
    """The month partition column of a (possibly skewed) fact table.

    >>> partition_column("lineitem_skew"), partition_column("nation")
    ('l_shipmonth', None)
    """
    base = SKEWED[table][0] if table in SKEWED else table
    return PARTITION_COLUMNS[base][1] if base in PARTITION_COLUMNS else None


def growth_cutoff(day: int, days: int) -> date:
    """Last month visible on virtual ``day`` of ``days``: grows linearly to the full table.

    >>> growth_cutoff(0, 10), growth_cutoff(9, 10)
    (datetime.date(1997, 1, 1), datetime.date(1998, 12, 1))
    """
    span = (GROWTH_LAST.year - GROWTH_FIRST.year) * 12 + GROWTH_LAST.month - GROWTH_FIRST.month
    months = round(span * day / max(1, days - 1))
    total = GROWTH_FIRST.month - 1 + months
    return date(GROWTH_FIRST.year + total // 12, total % 12 + 1, 1)


def prepare_data(root: Path, scale_factors: tuple[float, ...], seed: int) -> DataReport:
    """Generate (or reuse) the tables of every scale factor under ``root``.

    Raises:
        ConfigError: ``tpchgen-cli`` is not installed or fails.
    """
    seconds: dict[float, float] = {}
    for sf in scale_factors:
        started = time.perf_counter()
        if not _built_with(sf_dir(root, sf), seed):
            _build(root, sf, seed)
        seconds[sf] = round(time.perf_counter() - started, 3)
    return DataReport(root, seconds)


def _build(root: Path, sf: float, seed: int) -> None:
    out = sf_dir(root, sf)
    shutil.rmtree(out, ignore_errors=True)
    raw = out / ".raw"
    _tpchgen(raw, sf)
    for table in TABLES:
        _write(_read(raw / f"{table}.parquet"), out / table, table)
    rng = np.random.default_rng(_seed_int(f"{seed}:skew:{sf:g}"))
    for name, (base, keys) in SKEWED.items():
        table = _read(raw / f"{base}.parquet")
        for key in keys:
            domain = pq.read_metadata(raw / f"{KEY_DOMAIN[key]}.parquet").num_rows
            table = table.set_column(
                table.schema.get_field_index(key), key, _zipf(rng, domain, table.num_rows)
            )
        _write(table, out / name, base)
    shutil.rmtree(raw)
    (out / _DONE).write_text(f"{seed}\n")
    log.info("TPC-H sf=%g ready in %s", sf, out)


def _built_with(out: Path, seed: int) -> bool:
    """Cached tables are reused only if built with this seed (the skewed keys depend on it)."""
    marker = out / _DONE
    return marker.is_file() and marker.read_text().strip() == str(seed)


def _tpchgen(raw: Path, sf: float) -> None:
    exe = shutil.which("tpchgen-cli") or _venv_tool("tpchgen-cli")
    if exe is None:
        raise ConfigError("tpchgen-cli is not installed: pip install 'autofe[lab]'")
    cmd = [exe, "parquet", "-s", f"{sf:g}", "-o", str(raw), "-q", "--overwrite"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ConfigError(f"tpchgen-cli failed for sf={sf:g}: {done.stderr.strip()[:300]}")


def _venv_tool(name: str) -> str | None:
    import sys

    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.is_file() else None


def _read(path: Path) -> pa.Table:
    """A table with Arrow string views cast to plain strings, which every reader accepts."""
    table = pq.read_table(path)
    fields = [
        pa.field(f.name, pa.string()) if f.type == pa.string_view() else f.remove_metadata()
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def _write(table: pa.Table, out: Path, base: str) -> None:
    if base not in PARTITION_COLUMNS:
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out / "part-0.parquet")
        return
    source, column = PARTITION_COLUMNS[base]
    table = table.append_column(column, pc.floor_temporal(table[source], unit="month"))
    ds.write_dataset(
        table,
        out,
        format="parquet",
        partitioning=ds.partitioning(pa.schema([(column, pa.date32())]), flavor="hive"),
        existing_data_behavior="delete_matching",
    )


def _zipf(rng: np.random.Generator, domain: int, n: int) -> pa.Array:
    """``n`` keys in 1..domain, Zipf(``ZIPF_S``) over a shuffled key order (hot keys vary).

    Vectorised inverse-CDF sampling: a 60-million-row lineitem takes seconds and ~1 GB, where
    drawing key by key in Python took minutes and a dozen GB.

    >>> keys = _zipf(np.random.default_rng(0), 1000, 10_000).to_numpy()
    >>> bool(keys.min() >= 1 and keys.max() <= 1000), int(np.bincount(keys).max()) > 2000
    (True, True)
    """
    keys = rng.permutation(np.arange(1, domain + 1, dtype=np.int64))
    cum = np.cumsum(1.0 / np.arange(1, domain + 1, dtype=np.float64) ** ZIPF_S)
    picks = np.searchsorted(cum, rng.random(n) * cum[-1], side="right")
    return pa.array(keys[np.minimum(picks, domain - 1)], type=pa.int64())


def _seed_int(text: str) -> int:
    """A stable 64-bit seed from a string (Python's hash() is salted per process)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
