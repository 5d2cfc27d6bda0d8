"""Replicate a warehouse N times in SQL: one big organisation's history from one team's.

Issue #29 needs warehouses of 10⁵ and 10⁶ runs to measure on. ``autofe lab replicate``
copies a lab workspace (event logs that ingest must then parse, hours for a million runs);
this builds the same organisation directly as warehouse rows, each table in a few
``INSERT … SELECT … FROM source.t, range(…)`` statements, so no row passes through Python.

Copy ``k`` (copy 0 is the source, row for row) is another team running the same pipelines:
the ids the warehouse keys on are its own, derived so that each still tells its copy and its
original (the scheme of :mod:`autofe.lab.replicate`):

- run ids and job ids (VARCHAR) that are decimal numbers: ``id + k·S`` (``S``: the power of
  ten above the source's largest such id, one for runs, one for jobs); any other id: ``id-c<k>``;
- application ids ``-c<k>`` (``app_key`` is the application id plus attempt and log digest,
  so the suffix goes right after its application id part);
- job names ``_c<k>``, and the application name ``<run name>-<run id>`` becomes
  ``<run name>_c<k>-<new run id>`` (any other application name gets ``_c<k>``);
- the cluster id an application ran on (its ``clusterId`` tag) gets ``-c<k>`` wherever it
  occurs in ``spark_properties``, ``databricks_tags`` and ``source_path``.

JSON: ``jobs.definition`` gets the new job name at its top-level ``name`` (through
``json_merge_patch``, so a copy's text is compact JSON); ``applications.spark_properties`` gets the
new application and cluster ids wherever they occur, and the new run id and application name
at ``spark.databricks.job.runId`` and ``spark.app.name`` (matched in the text form ingest
writes, ``json.dumps``). No feature reads those two columns today; the catalog's features read
``runs.parameters`` (run parameters such as a date window, no ids: left as is) and
``cluster_configs.spark_conf`` (shared). Also left as the source wrote them: plan and stage
text (a lab run's ``/scratch/<run id>/`` folder in a plan keeps its original id), the epoch
times inside ``spark_properties``, ``applications.content_hash`` (the hash of the one log the
rows came from), and every other value.

Shared, copied once: ``cluster_configs`` (ids derived from content), ``table_stats`` (the
tables everyone reads), and ingest's bookkeeping (``ingested_files``, ``ingest_issues``: the
inputs the source was built from; no copy was ever a file). A table is per copy when one of
its columns is a run, job, or application id (:func:`is_per_copy`).

Times are not shifted by default: the copies run concurrently, so each job's history keeps
its length and the organisation runs N times as many jobs. ``shift_seconds`` moves every
timestamp of copy ``k``'s rows by ``k·shift_seconds``; shared tables keep theirs, so a
feature reading ``table_stats`` as of a shifted run's submission may see other snapshots.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from autofe.errors import ConfigError, WarehouseError, first_line
from autofe.warehouse.connect import BULK_MEMORY_LIMIT, open_warehouse, schema_fingerprint
from autofe.warehouse.tables import TABLES, Column, Table

log = logging.getLogger(__name__)

BATCH = 512
"""Copies per INSERT: a million-run build logs its progress in steps of ~250,000 runs."""

_NUMERIC_ID = "0|[1-9][0-9]{0,17}"
"""A canonical decimal id: offset as a number (``007`` stays text, so no two ids meet)."""
_CLUSTER = (
    "coalesce(json_extract_string(databricks_tags, '$.clusterId'), json_extract_string("
    "spark_properties, '$.\"spark.databricks.clusterUsageTags.clusterId\"'))"
)
_K = "c.k"


@dataclass(frozen=True)
class WarehouseReplica:
    """What a replica holds and what building it took."""

    out: Path
    source: Path
    copies: int
    shift_seconds: float
    run_stride: int
    job_stride: int
    rows_before: Mapping[str, int]
    rows_after: Mapping[str, int]
    seconds: float


@dataclass(frozen=True)
class _Plan:
    """How copy ``c.k`` rewrites a column: the id strides and the time shift."""

    run_stride: int
    job_stride: int
    shift_us: int


# --------------------------------------------------------------------------- id expressions


def numeric_id_sql(column: str, stride: int) -> str:
    """SQL for copy ``c.k``'s id: ``id + k·stride`` for a decimal id, else ``id-c<k>``.

    >>> con = __import__("duckdb").connect()
    >>> sql = numeric_id_sql("id", 10_000)
    >>> con.execute(f"SELECT {sql} FROM (VALUES ('1001'), ('app-7'), ('007'), (NULL)) t(id), "
    ...             "(SELECT 2) c(k)").fetchall()
    [('21001',), ('app-7-c2',), ('007-c2',), (None,)]
    """
    return (
        f"CASE WHEN regexp_full_match({column}, '{_NUMERIC_ID}') "
        f"THEN CAST(CAST({column} AS HUGEINT) + {_K} * {stride} AS VARCHAR) "
        f"ELSE {suffixed_sql(column)} END"
    )


def suffixed_sql(column: str, sep: str = "-") -> str:
    """SQL for a cluster or application id (``-c<k>``) or a name (``_c<k>``) of copy ``c.k``."""
    return f"{column} || '{sep}c' || {_K}"


def app_key_sql(column: str) -> str:
    """SQL for an ``app_key`` (``<app id>[:<attempt>]@<digest>``): ``-c<k>`` after the app id.

    >>> con = __import__("duckdb").connect()
    >>> con.execute(f"SELECT {app_key_sql('a')} FROM (VALUES ('local-1@ab'), ('app-2:1@cd'), "
    ...             "('x')) t(a), (SELECT 3) c(k)").fetchall()
    [('local-1-c3@ab',), ('app-2-c3:1@cd',), ('x-c3',)]
    """
    app_id = f"regexp_extract({column}, '^[^:@]*')"
    return f"{suffixed_sql(app_id)} || substr({column}, length({app_id}) + 1)"


def app_name_sql(plan: _Plan) -> str:
    """SQL for ``applications.app_name``: ``<run name>-<run id>`` keeps its shape with new ids.

    >>> con = __import__("duckdb").connect()
    >>> con.execute(f"SELECT {app_name_sql(_Plan(10_000, 1_000, 0))} FROM (VALUES "
    ...             "('etl-1001', '1001'), ('shell', '1002')) t(app_name, run_id), "
    ...             "(SELECT 1) c(k)").fetchall()
    [('etl_c1-11001',), ('shell_c1',)]
    """
    name, run = "app_name", "run_id"
    stem = f"left({name}, length({name}) - length({run}) - 1)"
    return (
        f"CASE WHEN suffix({name}, '-' || {run}) "
        f"THEN {suffixed_sql(stem, '_')} || '-' || {numeric_id_sql(run, plan.run_stride)} "
        f"ELSE {suffixed_sql(name, '_')} END"
    )


def _replaced(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new`` where ``old`` is known (a NULL id keeps it)."""
    return f"CASE WHEN coalesce({old}, '') = '' THEN {text} ELSE replace({text}, {old}, {new}) END"


def _with_cluster(column: str) -> str:
    return _replaced(column, "_cluster_id", suffixed_sql("_cluster_id"))


def spark_properties_sql(plan: _Plan) -> str:
    """SQL for ``applications.spark_properties`` with the copy's cluster, app and run ids."""
    text = _with_cluster("spark_properties")
    text = _replaced(text, "app_id", suffixed_sql("app_id"))
    for key, old, new in (
        ("spark.app.name", "app_name", app_name_sql(plan)),
        ("spark.databricks.job.runId", "run_id", numeric_id_sql("run_id", plan.run_stride)),
    ):
        text = _replaced(text, _json_pair(key, old), _json_pair(key, new))
    return text


def _json_pair(key: str, value: str) -> str:
    """SQL for the text ``"key": "value"`` as ``json.dumps`` (ingest) writes it."""
    return f"'\"{key}\": ' || to_json({value})"


def definition_sql() -> str:
    """SQL for ``jobs.definition``: the Jobs API settings with the copy's job name."""
    name = "json_extract_string(definition, '$.name')"
    patch = f"json_merge_patch(definition, json_object('name', {suffixed_sql(name, '_')}))"
    return f"CASE WHEN {name} IS NULL THEN definition ELSE {patch} END"


# --------------------------------------------------------------------------- per column


_Rule = Callable[[_Plan], str]

_BY_NAME: dict[str, _Rule] = {
    "run_id": lambda p: numeric_id_sql("run_id", p.run_stride),
    "app_id": lambda p: suffixed_sql("app_id"),
    "app_key": lambda p: app_key_sql("app_key"),
}
_BY_TABLE: dict[tuple[str, str], _Rule] = {
    ("jobs", "job_id"): lambda p: numeric_id_sql("job_id", p.job_stride),
    ("runs", "job_id"): lambda p: numeric_id_sql("job_id", p.job_stride),
    ("jobs", "name"): lambda p: suffixed_sql("name", "_"),
    ("jobs", "definition"): lambda p: definition_sql(),
    ("applications", "app_name"): app_name_sql,
    ("applications", "spark_properties"): spark_properties_sql,
    ("applications", "databricks_tags"): lambda p: _with_cluster("databricks_tags"),
    ("applications", "source_path"): lambda p: _with_cluster("source_path"),
}
_IDS = frozenset({"run_id", "app_id", "app_key"})
"""Columns whose presence makes a table per copy (with the job id of ``jobs`` and ``runs``)."""


def is_per_copy(t: Table) -> bool:
    """Whether every copy gets its own rows of ``t`` (else it is shared, copied once).

    >>> from autofe.warehouse.tables import table
    >>> is_per_copy(table("stages")), is_per_copy(table("jobs")), is_per_copy(table("table_stats"))
    (True, True, False)
    """
    return any(c.name in _IDS or (t.name, c.name) in _BY_TABLE for c in t.columns)


def column_sql(t: Table, c: Column, plan: _Plan) -> str:
    """SQL for one column of copy ``c.k``'s rows of ``t``."""
    rule = _BY_TABLE.get((t.name, c.name)) or _BY_NAME.get(c.name)
    if rule is not None:
        return rule(plan)
    if c.type == "TIMESTAMP" and plan.shift_us:
        return f'"{c.name}" + to_microseconds({_K} * {plan.shift_us})'
    return f'"{c.name}"'


def copies_sql(t: Table, plan: _Plan, first: int, stop: int) -> str:
    """One INSERT of copies ``first`` … ``stop - 1`` of every row of ``source.t``."""
    names = ", ".join(f'"{c.name}"' for c in t.columns)
    values = ",\n  ".join(column_sql(t, c, plan) for c in t.columns)
    rows = f"source.{t.name}"
    if t.name == "applications":  # the cluster id, read once per row, not once per use
        rows = f"(SELECT *, {_CLUSTER} AS _cluster_id FROM source.applications)"
    return (
        f"INSERT INTO {t.name} ({names})\nSELECT\n  {values}\n"
        f"FROM range({first}, {stop}) AS c(k), {rows}"
    )


# --------------------------------------------------------------------------- the warehouse


def _check_source(source: Path) -> dict[str, int]:
    """Rows per table of the warehouse at ``source``.

    Raises:
        ConfigError: ``source`` is missing, not a DuckDB file, or no warehouse of this schema.
    """
    if not source.is_file():
        raise ConfigError(f"{source}: no such warehouse file")
    try:
        with duckdb.connect(str(source), read_only=True) as con:
            found = con.execute("SELECT fingerprint FROM warehouse_meta").fetchall()
            if not found or found[0][0] != schema_fingerprint():
                raise ConfigError(
                    f"{source}: warehouse schema {found[0][0] if found else 'unknown'} is not "
                    f"this autofe's {schema_fingerprint()}: ingest it again"
                )
            return {t.name: _count(con, t.name) for t in TABLES}
    except duckdb.Error as exc:
        raise ConfigError(f"{source}: cannot open as a warehouse: {first_line(exc)}") from exc


def _count(con: duckdb.DuckDBPyConnection, name: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {name}").fetchone()
    return int(row[0]) if row else 0


def _stride(con: duckdb.DuckDBPyConnection, column: str, tables: list[str]) -> int:
    """The power of ten above every decimal ``column`` id in ``tables`` of the source.

    ``id + k·stride`` then never meets another copy's id (nor the original's).
    """
    union = " UNION ALL ".join(f"SELECT {column} AS id FROM source.{t}" for t in tables)
    row = con.execute(
        f"SELECT max(CAST(id AS HUGEINT)) FROM ({union}) "
        f"WHERE regexp_full_match(id, '{_NUMERIC_ID}')"
    ).fetchone()
    largest = int(row[0]) if row and row[0] is not None else 0
    return int(10 ** len(str(largest)))


def _plan(con: duckdb.DuckDBPyConnection, shift_seconds: float) -> _Plan:
    run_tables = [t.name for t in TABLES if any(c.name == "run_id" for c in t.columns)]
    return _Plan(
        run_stride=_stride(con, "run_id", run_tables),
        job_stride=_stride(con, "job_id", ["jobs", "runs"]),
        shift_us=round(shift_seconds * 1_000_000),
    )


def _fill(con: duckdb.DuckDBPyConnection, plan: _Plan, copies: int) -> None:
    """Every table of the replica: copy 0 and the shared tables as they are, then the copies."""
    for t in TABLES:
        names = ", ".join(f'"{c.name}"' for c in t.columns)
        con.execute(f"INSERT INTO {t.name} ({names}) SELECT {names} FROM source.{t.name}")
        if not is_per_copy(t):
            continue
        for first in range(1, copies, BATCH):
            started = time.perf_counter()
            con.execute(copies_sql(t, plan, first, min(first + BATCH, copies)))
            log.info("%s: copies %d+ in %.1f s", t.name, first, time.perf_counter() - started)


def _build(source: Path, partial: Path, copies: int, shift_seconds: float) -> _Plan:
    con = open_warehouse(partial)
    try:
        con.execute("SET enable_progress_bar = false")
        # Rows keep no order a reader relies on; keeping it serialises the INSERT, and the
        # reordering at checkpoint leaves a 100k-run replica's file 40 % free blocks.
        con.execute("SET preserve_insertion_order = false")
        # DuckDB's default (80 % of RAM) let a 1 M-run build reach 8.4 GiB resident
        con.execute(f"SET memory_limit = '{BULK_MEMORY_LIMIT}'")
        quoted = str(source).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS source (READ_ONLY)")
        plan = _plan(con, shift_seconds)
        _fill(con, plan, copies)
        con.execute("DETACH source")
        con.execute("CHECKPOINT")
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot replicate {source}: {first_line(exc)}") from exc
    finally:
        con.close()
    return plan


def _remove(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)


def replicate_warehouse(
    source: Path, out: Path, copies: int, shift_seconds: float = 0.0
) -> WarehouseReplica:
    """Write a new warehouse ``out`` holding ``copies`` distinct copies of ``source``.

    Built in ``<out>.partial`` and linked to ``out`` only when complete (never over an existing
    file), so ``out`` is either whole or absent. The source is only ever read.

    Raises:
        ConfigError: ``copies`` < 1, ``out`` exists, or ``source`` is missing or no warehouse of
            this schema.
        WarehouseError: DuckDB failed while writing (the partial file is removed).
    """
    if copies < 1:
        raise ConfigError(f"{source}: copies must be at least 1, got {copies}")
    if not math.isfinite(shift_seconds):
        raise ConfigError(f"{source}: shift_seconds must be a finite number, got {shift_seconds}")
    if out.exists() or out.is_symlink():
        raise ConfigError(f"{out} exists; give a new file for the replica")
    started = time.perf_counter()
    before = _check_source(source)
    partial = out.with_name(out.name + ".partial")
    _remove(partial)  # an interrupted build of this same replica
    try:
        plan = _build(source, partial, copies, shift_seconds)
        os.link(partial, out)  # fails, rather than replaces, if out appeared meanwhile
    except FileExistsError:
        _remove(partial)
        raise ConfigError(f"{out} exists; give a new file for the replica") from None
    except BaseException:
        _remove(partial)
        raise
    partial.unlink()
    with duckdb.connect(str(out), read_only=True) as con:
        after = {t.name: _count(con, t.name) for t in TABLES}
    return WarehouseReplica(
        out, source, copies, shift_seconds, plan.run_stride, plan.job_stride,
        before, after, round(time.perf_counter() - started, 3),
    )  # fmt: skip
