"""The table files a mapping names, and each one's columns and rows as DuckDB reads them."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import duckdb

from autofe.errors import ConfigError, IngestError, first_line
from autofe.ingest.run_table.mapping import CsvOptions, RunTableMapping, RunTableSpec
from autofe.special_file import special_file

TABLE_SUFFIXES = frozenset({".gz", ".zst", ".csv", ".tsv", ".txt", ".parquet", ".pq"})


def resolve_tables(mapping: RunTableMapping, table_path: Path | None = None) -> list[Path]:
    """The table files to ingest: ``table_path`` if given, else every match of ``files``.

    Raises:
        ConfigError: ``table_path`` is not a file, or a ``files`` pattern matches nothing.
    """
    if table_path is not None:
        if not table_path.is_file():
            what = special_file(table_path) or "is not a file"
            raise ConfigError(f"{mapping.path}: table_path {table_path} {what}")
        return [table_path]
    base = mapping.path.parent
    found: list[Path] = []
    for pattern in mapping.spec.files:
        hits = sorted(Path(p).resolve() for p in glob.glob(str(base / pattern)))
        hits = [p for p in hits if p.is_file()]
        if not hits:
            raise ConfigError(f"{mapping.path}: files: no file matches {pattern!r} (from {base})")
        found.extend(hits)
    return list(dict.fromkeys(found))


def read_table(spec: RunTableSpec, path: Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one table file, in file order (DuckDB reads and types it).

    Raises:
        IngestError: DuckDB cannot read the file.
    """
    con = duckdb.connect()
    try:
        rel = _relation(con, spec, path)
        return list(rel.columns), rel.fetchall()
    except duckdb.Error as exc:
        raise IngestError(str(path), f"cannot read table: {first_line(exc)}") from exc
    finally:
        con.close()


def is_parquet(spec: RunTableSpec, path: Path) -> bool:
    if spec.format is not None:
        return spec.format == "parquet"
    return path.suffix.lower() in (".parquet", ".pq")


def _relation(
    con: duckdb.DuckDBPyConnection, spec: RunTableSpec, path: Path
) -> duckdb.DuckDBPyRelation:
    if is_parquet(spec, path):
        return con.read_parquet(str(path))
    rel = _read_csv(con, spec.csv, path, None)
    column = spec.submit_time.column
    if spec.submit_time.format and column in rel.columns:
        # DuckDB would sniff (and might misread, e.g. day/month) the times; the format decides.
        rel = _read_csv(con, spec.csv, path, {column: "VARCHAR"})
    return rel


def _read_csv(
    con: duckdb.DuckDBPyConnection, opts: CsvOptions, path: Path, dtype: dict[str, str] | None
) -> duckdb.DuckDBPyRelation:
    kwargs: dict[str, Any] = {"header": opts.header, "skiprows": opts.skip_rows}
    if opts.delimiter is not None:
        kwargs["delimiter"] = opts.delimiter
    if dtype:
        kwargs["dtype"] = dtype
    return con.read_csv(str(path), **kwargs)


def first_data_line(spec: RunTableSpec, path: Path) -> int:
    """1-based line of the first data row (Parquet: row numbers); assumes one record a line."""
    if is_parquet(spec, path):
        return 1
    return spec.csv.skip_rows + (2 if spec.csv.header else 1)


def file_stem(path: Path) -> str:
    """The table's name without table or compression suffixes: the ``{_file}`` placeholder.

    >>> file_stem(Path("bell/grep.spark.csv")), file_stem(Path("P8_kmeans.csv.gz"))
    ('grep.spark', 'P8_kmeans')
    """
    name = path.name
    while Path(name).suffix.lower() in TABLE_SUFFIXES:
        name = Path(name).stem
    return name
