"""The feature store: materialised feature values, one DuckDB file beside the warehouse.

A separate file because the warehouse is held read-only by the sandbox, and DuckDB cannot also
hold a writer on the same file in the same process. Values are stored per ``(feature_id,
run_id)``: numbers (and booleans as 0/1) in ``value``, text in ``value_text``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from autofe.errors import WarehouseError, first_line
from autofe.featurespec import FeatureSpec
from autofe.warehouse.write import transaction

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS feature_values (feature_id VARCHAR, run_id VARCHAR, "
    "value DOUBLE, value_text VARCHAR, PRIMARY KEY (feature_id, run_id))",
    "CREATE TABLE IF NOT EXISTS features (feature_id VARCHAR PRIMARY KEY, name VARCHAR, "
    'category VARCHAR, value_type VARCHAR, sql VARCHAR, materialized_at TIMESTAMP, "rows" BIGINT, '
    "coverage DOUBLE)",
)

Value = float | str | None


@dataclass(frozen=True)
class Materialized:
    """What was stored for one feature."""

    feature_id: str
    rows: int
    coverage: float


def open_store(path: Path) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the feature store at ``path``.

    Raises:
        WarehouseError: the file cannot be opened (locked by another process, not DuckDB).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(path))
        for ddl in SCHEMA:
            con.execute(ddl)
    except (OSError, duckdb.Error) as exc:
        raise WarehouseError(f"cannot open feature store {path}: {first_line(exc)}") from exc
    return con


def write_feature(
    store: Path, spec: FeatureSpec, rows: Sequence[Sequence[Any]], coverage: float
) -> Materialized:
    """Replace every stored value of ``spec`` with ``rows`` (``(run_id, value)``), atomically.

    Rows without a run id are dropped: they describe no run.

    Raises:
        WarehouseError: the store cannot be opened or written; nothing was changed.
    """
    incoming = _arrow(rows, text=spec.value_type == "VARCHAR")
    con = open_store(store)
    try:
        with transaction(con, f"feature {spec.name} in {store}"):
            con.execute("DELETE FROM feature_values WHERE feature_id = ?", [spec.feature_id])
            con.register("_incoming", incoming)
            try:
                con.execute(
                    "INSERT INTO feature_values SELECT ?, run_id, value, value_text FROM _incoming",
                    [spec.feature_id],
                )
            finally:
                con.unregister("_incoming")
            con.execute(
                "INSERT OR REPLACE INTO features VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    spec.feature_id,
                    spec.name,
                    spec.category,
                    spec.value_type,
                    spec.sql,
                    datetime.now(UTC).replace(tzinfo=None),
                    incoming.num_rows,
                    coverage,
                ],
            )
    finally:
        con.close()
    return Materialized(spec.feature_id, incoming.num_rows, coverage)


def _arrow(rows: Sequence[Sequence[Any]], *, text: bool) -> pa.Table:
    """``(run_id, value)`` rows as an Arrow table: one insert instead of a bind per value."""
    kept = [r for r in rows if r[0] is not None]
    values = [r[1] for r in kept]
    numbers: list[float | None] = [None] * len(kept)
    texts: list[str | None] = [None] * len(kept)
    if text:
        texts = [None if v is None else str(v) for v in values]
    else:
        numbers = [None if v is None else float(v) for v in values]
    return pa.table(
        {
            "run_id": pa.array([str(r[0]) for r in kept], pa.string()),
            "value": pa.array(numbers, pa.float64()),
            "value_text": pa.array(texts, pa.string()),
        }
    )


def read_feature_values(store: Path, feature_id: str) -> dict[str, Value]:
    """A materialised feature's values by run id (text for VARCHAR features, else floats).

    Raises:
        WarehouseError: no store at ``store``, or the feature was never materialised there
            (the message lists what was).
    """
    if not Path(store).is_file():
        raise WarehouseError(f"feature store {store} does not exist: materialize a feature first")
    con = open_store(Path(store))
    try:
        found = con.execute(
            "SELECT value_type FROM features WHERE feature_id = ?", [feature_id]
        ).fetchone()
        if found is None:
            raise WarehouseError(_not_stored(con, store, feature_id))
        column = "value_text" if found[0] == "VARCHAR" else "value"
        rows = con.execute(
            f"SELECT run_id, {column} FROM feature_values WHERE feature_id = ?", [feature_id]
        ).fetchall()
    finally:
        con.close()
    return {str(run_id): value for run_id, value in rows}


def _not_stored(con: duckdb.DuckDBPyConnection, store: Path, feature_id: str) -> str:
    known = con.execute(
        "SELECT name || ' (' || feature_id || ')' FROM features ORDER BY name LIMIT 20"
    ).fetchall()
    listed = ", ".join(str(k[0]) for k in known) or "none"
    return f"feature {feature_id!r} is not materialised in {store}; stored: {listed}"


Column = tuple[NDArray[np.float64], NDArray[np.object_] | None]
"""One feature's values over given runs: the numbers (NaN where none), and the texts where a
run has text instead of a number (None elsewhere), or None when no run has text."""


def read_store_columns(
    store: Path, run_ids: Sequence[str], feature_ids: Sequence[str]
) -> dict[str, Column]:
    """Stored values of ``feature_ids``, each aligned with ``run_ids`` (missing: NaN, None).

    What :func:`read_store_values` returns as a dict per feature, as arrays: read as dicts and
    tuples, a million runs of 70 features took the final fit to 23 GiB (killed); as numbers
    they are 8 bytes a cell, 0.56 GB.

    Raises:
        WarehouseError: no store at ``store``, or it is no feature store.
    """
    if not Path(store).is_file():
        raise WarehouseError(f"feature store {store} does not exist: materialise features first")
    wanted = pa.table(
        {"i": pa.array(range(len(run_ids)), pa.int64()), "run_id": pa.array(run_ids, pa.string())}
    )
    out: dict[str, Column] = {}
    try:
        with duckdb.connect(str(store), read_only=True) as con:
            con.register("wanted", wanted)
            for fid in feature_ids:
                got = con.execute(
                    "SELECT v.value, v.value_text FROM wanted AS w LEFT JOIN feature_values AS v "
                    "ON v.run_id = w.run_id AND v.feature_id = ? ORDER BY w.i",
                    [fid],
                ).fetchnumpy()
                out[fid] = _column(got["value"], got["value_text"])
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot read feature store {store}: {first_line(exc)}") from exc
    return out


def _column(value: Any, text: Any) -> Column:
    numbers = np.ma.getdata(value).astype(np.float64)
    no_number = np.ma.getmaskarray(value)
    numbers[no_number] = np.nan
    has_text = no_number & ~np.ma.getmaskarray(text)
    if not has_text.any():
        return numbers, None
    texts = np.full(len(numbers), None, dtype=object)
    texts[has_text] = np.ma.getdata(text)[has_text]
    return numbers, texts


def read_store_values(store: Path, feature_ids: Sequence[str]) -> dict[str, dict[str, Value]]:
    """Stored values: feature id → run id → ``value`` (number), else ``value_text``.

    The store is read as a file (read-only SQL on its documented tables), not through the tools:
    agents reach tools only over MCP. Ids never materialised map to an empty dict.

    Raises:
        WarehouseError: no store at ``store``, or it is no feature store.
    """
    if not Path(store).is_file():
        raise WarehouseError(f"feature store {store} does not exist: materialise features first")
    try:
        with duckdb.connect(str(store), read_only=True) as con:
            rows = con.execute(
                "SELECT feature_id, run_id, value, value_text FROM feature_values "
                "WHERE list_contains(?, feature_id) ORDER BY feature_id, run_id",
                [list(feature_ids)],
            ).fetchall()
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot read feature store {store}: {first_line(exc)}") from exc
    out: dict[str, dict[str, Value]] = {fid: {} for fid in feature_ids}
    for fid, run_id, number, text in rows:
        out[fid][str(run_id)] = number if number is not None else text
    return out
