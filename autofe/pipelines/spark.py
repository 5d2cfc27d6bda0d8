"""The Spark engine: ``autofe ingest`` and feature materialisation on Apache Spark.

The only module that imports pyspark (``tests/test_layering.py``). Two jobs:

* :func:`spark_ingest` parses event logs in parallel on the executors, with the same parser
  and row builders as the DuckDB ingest (:mod:`autofe.ingest.log_rows`), while the driver
  ingests the workspace JSON (:mod:`autofe.ingest.plan`); every warehouse table is
  written as a Parquet dataset.
* :func:`materialize_on_spark` translates each feature from DuckDB SQL to Spark SQL
  (:func:`autofe.sandbox.transpile.to_spark_sql`), refusing what it cannot translate
  faithfully, and runs it over those datasets; :func:`write_spark_features` stores the
  values in the feature store as ``autofe mcp``'s materialize tool does.

Settings are standard Spark configuration (:class:`SparkSettings`). A few Spark settings decide
what SQL computes (ANSI mode, UTC, ...): they are pinned (``PINNED_SPARK_CONF``), and a
different value for one of them is refused rather than silently giving other numbers.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import reduce
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, Literal

import duckdb

from autofe.errors import ConfigError, Untranspilable, WarehouseError
from autofe.featurespec import FeatureSpec
from autofe.ingest.log_rows import TableRow, issue_rows, log_rows, source_digest
from autofe.ingest.plan import IngestPlan, PlannedLog, plan_ingest
from autofe.modeling.compute import parse_query, plain
from autofe.modeling.dataset import Value
from autofe.sandbox.rewrite import restricted
from autofe.sandbox.spark_rules import PINNED_SPARK_CONF
from autofe.sandbox.transpile import to_spark_sql
from autofe.schema import IngestIssue
from autofe.warehouse.catalog import NOT_QUERYABLE
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.feature_store import Materialized, open_store
from autofe.warehouse.parquet_tables import (
    duckdb_select,
    read_manifest,
    spark_schema,
    write_manifest,
)
from autofe.warehouse.tables import TABLES, Table
from autofe.warehouse.write import transaction

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'autofe[spark]'"
LOOPBACK = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
SHUFFLE_PARTITIONS_PER_CORE = 8
"""Shuffle partitions per core of a ``local[N]`` master, unless the user sets them. Spark's 200
suit a cluster; on one machine each exchange then writes and schedules 200 small tasks, a cost
that does not shrink with the data. The example catalog on ``local[2]`` with 16 instead of 200:
371.7 s → 321.7 s at 100 k runs, 1,289.2 s → 1,035.5 s at 1 M (docs/results.md, session 31)."""
MERGED_PARTITIONS = {
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "4m",
}
"""For a ``local[N]`` master, unless the user sets them: adaptive execution merges small shuffle
partitions up to 4 MB each. By default it merges them by the cores (``parallelismFirst``), so a
shuffle of a million narrow rows (tens of MB) ran as one task per core, each holding hundreds
of thousands of rows in the heap: a batch of the example's eleven ratio features at 1 M runs
ran the 1 GB driver out of heap. With the 4 MB target it takes 52.6 s; not merging at all
avoided it too, but cost 24 % at 100 k runs, where most shuffles are small (docs/results.md,
session 33)."""
JVM_START_S = 60.0
"""Allowance for launching Spark's JVM, on top of ``connect_timeout_s``, before giving up."""
EXIT_ON_OOM = "-XX:+ExitOnOutOfMemoryError"
DRIVER_MEMORY_DEFAULT = "1g"
REPLACED_ON_KEY = ("jobs", "runs")
"""Tables whose event-log rows replace a same-key row from the workspace, as the DuckDB
ingest's ``INSERT OR REPLACE`` (event logs are stored after the workspace JSON)."""


@dataclass(frozen=True)
class SparkSettings:
    """Where and how Spark runs: its master URL and any ``spark.*`` settings."""

    master: str = "local[2]"
    conf: dict[str, str] = field(default_factory=dict)
    app_name: str = "autofe"
    connect_timeout_s: float = 30.0
    """How long to wait for an executor to run a first task before giving up on the master."""


# --------------------------------------------------------------------------- session


def session_conf(settings: SparkSettings) -> dict[str, str]:
    """The configuration a session starts with: defaults, then the user's, then the pinned.

    Raises:
        ConfigError: the master URL is not one Spark takes, or the user's conf sets a pinned
            setting to another value.
    """
    if not re.match(r"^(local(\[[0-9*]+(,[0-9]+)?\])?|spark://.+|yarn|k8s://.+)$", settings.master):
        raise ConfigError(
            f"Spark master {settings.master!r}: expected local, local[N], spark://host:port, "
            "yarn or k8s://..."
        )
    clash = {
        k: v
        for k, v in settings.conf.items()
        if str(PINNED_SPARK_CONF.get(k, v)).lower() != str(v).lower()
    }
    if clash:
        key = sorted(clash)[0]
        raise ConfigError(
            f"--conf {key}={clash[key]}: autofe pins {key}={PINNED_SPARK_CONF[key]} because the "
            "translated feature SQL relies on it"
        )
    defaults = {"spark.log.level": "ERROR", "spark.ui.showConsoleProgress": "false"}
    # a driver out of heap exits (an error here) instead of hanging the py4j call it serves
    defaults["spark.driver.extraJavaOptions"] = EXIT_ON_OOM
    # executors run this interpreter unless told otherwise (it has autofe and its deps)
    defaults["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
    if _on_this_machine(settings.master):
        defaults.update(LOOPBACK)
    cores = _local_cores(settings.master)
    if cores is not None:
        defaults["spark.sql.shuffle.partitions"] = str(SHUFFLE_PARTITIONS_PER_CORE * cores)
        defaults.update(MERGED_PARTITIONS)
    return {**defaults, **settings.conf, **PINNED_SPARK_CONF}


def _local_cores(master: str) -> int | None:
    """The cores a ``local`` or ``local[N]`` master runs on; None elsewhere and for
    ``local[*]``, whose count is the machine's: partitions that follow it would make the last
    bits of summed values differ between machines."""
    if master == "local":
        return 1
    found = re.fullmatch(r"local\[([0-9]+)(,[0-9]+)?\]", master)
    return max(1, int(found.group(1))) if found else None


def _on_this_machine(master: str) -> bool:
    return master.startswith("local") or any(h in master for h in ("//127.0.0.1:", "//localhost:"))


def _pyspark() -> Any:
    try:
        import pyspark.sql
    except ImportError as exc:
        raise ConfigError(
            f"the Spark engine needs pyspark, which is not installed: {INSTALL_HINT}"
        ) from exc
    return pyspark.sql


@contextmanager
def spark_session(settings: SparkSettings) -> Iterator[Any]:
    """A Spark session on ``settings.master``, stopped on exit, checked to run a task.

    Raises:
        ConfigError: pyspark is missing (naming the extra to install), the master URL is
            malformed, no executor ran a first task within ``connect_timeout_s`` (master down
            or unreachable, no worker), or the executors cannot import autofe.
    """
    conf = session_conf(settings)
    sql = _pyspark()
    if sql.SparkSession.getActiveSession() is not None:
        raise ConfigError("a Spark session is already running in this process: stop it first")
    check_reachable(settings.master, settings.connect_timeout_s)
    builder = sql.SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = _start(builder, settings, conf["spark.pyspark.python"])
    lost = False
    try:
        check_executors(spark, settings)
        yield spark
    except _driver_lost_errors():
        lost = True
        raise
    finally:
        with suppress(*_driver_lost_errors()):  # a driver that exited has nothing to stop
            spark.stop()
        if lost:
            _forget_lost_driver()


def _forget_lost_driver() -> None:
    """Make sure the lost driver JVM is gone, so a later session here starts a new one.

    pyspark keeps its gateway to the JVM for the life of the process and would hand the dead
    one to every later session.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()  # the JVM's signal to exit
        try:
            proc.wait(timeout=JVM_START_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    SparkContext._gateway = SparkContext._jvm = SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = SparkSession._activeSession = None


def _driver_lost_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JNetworkError  # type: ignore[import-untyped]

    return (Py4JNetworkError, ConnectionError)


@contextmanager
def driver_lost_is_an_error(settings: SparkSettings, what: str) -> Iterator[None]:
    """A driver JVM that went away mid-call becomes a :class:`ConfigError` saying what to do.

    The session starts the driver with ``-XX:+ExitOnOutOfMemoryError``, so a full heap ends
    the JVM (py4j then loses its connection) rather than leaving the call waiting forever,
    as it did at 100x with the default 1 GB heap.
    """
    try:
        yield
    except _driver_lost_errors() as exc:
        memory = settings.conf.get("spark.driver.memory", DRIVER_MEMORY_DEFAULT)
        raise ConfigError(
            f"Spark's driver stopped while {what} ({jvm_message(exc)}); a driver whose heap "
            f"(spark.driver.memory = {memory}) runs out exits: give it more, e.g. "
            "--conf spark.driver.memory=4g"
        ) from exc


def check_reachable(master: str, timeout_s: float) -> None:
    """Fail fast when no standalone master of ``spark://h1:p1[,h2:p2]`` accepts a connection.

    Spark itself retries registering for about a minute before giving up on a dead master.

    Raises:
        ConfigError: naming the master and why each address failed.
    """
    if not master.startswith("spark://"):
        return
    failures = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=min(timeout_s, 10.0)).close()
            return
        except (OSError, ValueError) as exc:
            failures.append(f"{address}: {exc.strerror if isinstance(exc, OSError) else exc}")
    raise ConfigError(f"Spark master {master} is not reachable ({'; '.join(failures)})")


def _start(builder: Any, settings: SparkSettings, python: str) -> Any:
    """``builder.getOrCreate()``, bounded: it blocks while a master does not answer."""
    outcome: dict[str, Any] = {}

    def start() -> None:
        try:
            with _worker_python(python):
                outcome["spark"] = builder.getOrCreate()
        except Exception as exc:  # py4j and pyspark raise many types; all mean "did not start"
            outcome["error"] = exc

    worker = threading.Thread(target=start, name="autofe-spark-start", daemon=True)
    worker.start()
    worker.join(settings.connect_timeout_s + JVM_START_S)
    if "spark" in outcome:
        return outcome["spark"]
    why = jvm_message(outcome["error"]) if "error" in outcome else "no answer in time"
    raise ConfigError(f"cannot start Spark on master {settings.master!r}: {why}")


@contextmanager
def _worker_python(python: str) -> Iterator[None]:
    """PySpark reads the executors' Python from ``PYSPARK_PYTHON`` when the context starts
    (not from ``spark.pyspark.python``): set it for that moment only."""
    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = python
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYSPARK_PYTHON"]
        else:
            os.environ["PYSPARK_PYTHON"] = before


def check_executors(spark: Any, settings: SparkSettings) -> None:
    """Run one task that imports autofe's parser, or fail within ``connect_timeout_s``.

    Without it an unreachable standalone master shows as a job waiting for resources forever.
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def probe() -> None:
        try:
            outcome["ok"] = spark.sparkContext.parallelize([0], 1).map(executor_check).collect()
        except Exception as exc:  # reported below, with the master's name
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=probe, name="autofe-spark-probe", daemon=True).start()
    if not done.wait(settings.connect_timeout_s):
        spark.sparkContext.cancelAllJobs()
        raise ConfigError(
            f"Spark master {settings.master}: no executor ran a task within "
            f"{settings.connect_timeout_s:g} s (is the master up and reachable, with a worker?)"
        )
    if "error" in outcome:
        cause = jvm_message(outcome["error"])
        raise ConfigError(
            f"Spark executors of {settings.master} cannot run autofe ({cause}): install autofe "
            "on the workers, or set spark.pyspark.python to a Python that has it"
        )


def executor_check(_: int) -> str:
    """Runs on an executor: the parser imports (autofe is installed there)."""
    import autofe.ingest.log_rows

    return autofe.ingest.log_rows.__name__


@contextmanager
def _session(settings: SparkSettings, session: Any | None) -> Iterator[Any]:
    """The caller's session if given (left running), else a new one for this call."""
    if session is not None:
        for key, value in PINNED_SPARK_CONF.items():
            session.conf.set(key, value)
        yield session
        return
    with spark_session(settings) as spark:
        yield spark


def jvm_message(exc: BaseException) -> str:
    """The message of an error without Spark's plans and JVM stack traces.

    For a JVM error wrapped by py4j, the Java exception's message (py4j's own first line only
    says which call failed).

    >>> jvm_message(RuntimeError("An error occurred while calling x.\\n: org.apache.Boom: bad"))
    'org.apache.Boom: bad'
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    java = next((line[2:] for line in lines if line.startswith(": ")), None)
    return java or (lines[0] if lines else type(exc).__name__)


# --------------------------------------------------------------------------- ingest


@dataclass(frozen=True)
class SparkIngestReport:
    """Rows written per warehouse table, where, how long, and what was skipped."""

    out: Path
    tables: dict[str, int]
    seconds: float
    logs: int
    """Event logs parsed on the executors."""
    issues: list[IngestIssue]
    """Inputs skipped whole (missing paths); per-line issues are in ``ingest_issues``."""

    def as_dict(self) -> dict[str, object]:
        return {
            "out": str(self.out),
            "tables": self.tables,
            "seconds": self.seconds,
            "logs": self.logs,
            "issues": [i.as_dict() for i in self.issues],
        }


def spark_ingest(
    paths: Sequence[Path], out: Path, settings: SparkSettings, *, session: Any | None = None
) -> SparkIngestReport:
    """Ingest workspaces, event logs and run tables into one Parquet dataset per table.

    Row counts equal what ``autofe ingest`` stores in DuckDB for the same inputs. ``out`` must
    be reachable at the same path by the driver and every executor (local disk for
    ``local[N]`` or one machine; a shared filesystem for a cluster), and so must the logs.

    Args:
        paths: inputs as ``autofe ingest`` takes them.
        out: folder for ``<table>/`` datasets and their manifest (tables are replaced).
        settings: Spark master and configuration (ignored when ``session`` is given).
        session: an open SparkSession to use and leave running.

    Raises:
        ConfigError: Spark cannot start or reach its executors; a run-table mapping is invalid.
        WarehouseError: the scratch warehouse refused rows.
    """
    started = time.perf_counter()
    if session is None:  # fail before the driver's share of the work, not after it
        session_conf(settings)
        _pyspark()
    out.mkdir(parents=True, exist_ok=True)
    with TemporaryDirectory(prefix="autofe-spark-ingest-") as scratch_dir:
        con = open_warehouse(Path(scratch_dir) / "scratch.duckdb")
        try:
            plan = plan_ingest(con, paths)
            with (
                driver_lost_is_an_error(settings, "writing the tables"),
                _session(settings, session) as spark,
            ):
                counts = _write_tables(spark, con, plan, out)
        finally:
            con.close()
    write_manifest(out, counts)
    seconds = round(time.perf_counter() - started, 3)
    fatal = [i for i in plan.report.issues if i.fatal]
    return SparkIngestReport(out, counts, seconds, len(plan.logs), fatal)


STAGING = "_autofe_staging"
"""Folder under the output for the driver's rows on their way to Spark (removed after)."""


def _write_tables(spark: Any, con: Any, plan: IngestPlan, out: Path) -> dict[str, int]:
    rows = _log_rows_rdd(spark, plan).persist(_storage_level())
    staging = out / STAGING
    staging.mkdir(parents=True, exist_ok=True)
    try:
        counts = {}
        for t in TABLES:
            frame = _table_frame(spark, con, t, rows, staging)
            frame.write.mode("overwrite").parquet(str(out / t.name))
            counts[t.name] = spark.read.parquet(str(out / t.name)).count()
        return counts
    finally:
        rows.unpersist()
        shutil.rmtree(staging, ignore_errors=True)


def _storage_level() -> Any:
    """Memory, spilling to disk: in local mode the executors' cache is the driver's heap."""
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK


def _driver_rows(spark: Any, con: Any, t: Table, staging: Path) -> Any | None:
    """The scratch warehouse's rows of ``t`` as a frame, or None when it has none.

    They reach Spark as a Parquet file under the output folder, which every executor can read,
    not through ``createDataFrame`` on the driver's heap, which a large workspace's rows fill
    (Spark's default driver heap is 1 GB; docs/spark.md, Scale).
    """
    if not con.execute(f"SELECT count(*) FROM {t.name}").fetchall()[0][0]:
        return None
    path = staging / f"{t.name}.parquet"
    quoted = str(path).replace("'", "''")
    con.execute(f"COPY ({duckdb_select(t)}) TO '{quoted}' (FORMAT parquet)")
    return spark.read.schema(spark_schema(t)).parquet(str(path))


def _log_rows_rdd(spark: Any, plan: IngestPlan) -> Any:
    """Every event log's rows, parsed on the executors; each log's bytes hashed there first.

    Logs with the same content are parsed once (the first by input order), as the DuckDB
    ingest's ledger skips content it has stored.
    """
    sc = spark.sparkContext
    slices = max(1, min(len(plan.logs), sc.defaultParallelism * 4))
    indexed = _balanced(list(enumerate(plan.logs)), slices)
    digests = dict(sc.parallelize(indexed, slices).map(_digest).collect())
    unreadable = [d for d in digests.values() if isinstance(d, IngestIssue)]
    firsts: dict[str, int] = {}
    for index in sorted(digests):
        digest = digests[index]
        if isinstance(digest, str):
            firsts.setdefault(digest, index)
    todo = _balanced([(i, plan.logs[i]) for i in sorted(firsts.values())], slices)
    work = [(planned, digests[i]) for i, planned in todo]
    linkers = sc.broadcast(plan.linkers)
    parsed = sc.parallelize(work, slices).mapPartitions(
        lambda items: _partition_rows(items, linkers.value)
    )
    return parsed.union(sc.parallelize(issue_rows(unreadable), 1))


def _digest(item: tuple[int, PlannedLog]) -> tuple[int, str | IngestIssue]:
    return item[0], source_digest(item[1].source)


def _partition_rows(
    items: Iterator[tuple[PlannedLog, Any]], linkers: list[Any]
) -> Iterator[TableRow]:
    for planned, digest in items:
        link = linkers[planned.workspace] if planned.workspace is not None else None
        yield from log_rows(planned.source, digest, link)


def _balanced(items: list[tuple[int, PlannedLog]], slices: int) -> list[tuple[int, PlannedLog]]:
    """Order logs so Spark's contiguous slices each get a share of the largest ones."""
    by_size = sorted(items, key=lambda item: -_size(item[1]))
    return [item for k in range(slices) for item in by_size[k::slices]]


def _size(planned: PlannedLog) -> int:
    try:
        return sum(p.stat().st_size for p in planned.source.parts)
    except OSError:
        return 0


def _table_frame(spark: Any, con: Any, t: Table, rows: Any, staging: Path) -> Any:
    """The scratch warehouse's rows of ``t`` plus the executors' (those win on the key)."""
    schema = spark_schema(t)
    from_logs = spark.createDataFrame(
        rows.filter(lambda r, n=t.name: r[0] == n).map(lambda r: r[1]), schema
    )
    frame = _driver_rows(spark, con, t, staging)
    if t.name not in REPLACED_ON_KEY or frame is None:
        return from_logs if frame is None else frame.unionByName(from_logs)
    functions, window = _sql_functions()
    ranked = frame.withColumn("_from_logs", functions.lit(0)).unionByName(
        from_logs.withColumn("_from_logs", functions.lit(1))
    )
    order = window.partitionBy(*t.primary_key).orderBy(functions.col("_from_logs").desc())
    first = ranked.withColumn("_rank", functions.row_number().over(order))
    return first.where("_rank = 1").drop("_rank", "_from_logs")


def _sql_functions() -> tuple[Any, Any]:
    from pyspark.sql import Window, functions

    return functions, Window


# --------------------------------------------------------------------------- features


Stage = Literal["transpile", "plan", "run"]
Kind = Literal["long", "double", "bool", "decimal", "text"]

BATCH_FEATURES = 24
"""Features per Spark action: their queries, unioned, are one plan written at once. Few enough
that Spark optimises the plan quickly and a failing feature costs a few reruns of its batch
(halves, down to itself), many enough that a catalog is a handful of actions."""
FEATURE_STAGING = "_autofe_feature_staging"
"""Folder under the tables where the executors leave feature values for the store (removed
after): the tables' folder is the one place the driver and every executor are known to share."""
STAGED_VALUES = (
    ("v_long", "bigint"),
    ("v_double", "double"),
    ("v_bool", "boolean"),
    ("v_text", "string"),
)
"""A staged row is ``feature INT, run_id STRING`` and these columns: one row per feature and
run, the value in the column of its kind, the others NULL."""
KIND_COLUMN: dict[Kind, str] = {
    "long": "v_long",
    "double": "v_double",
    "bool": "v_bool",
    "decimal": "v_text",  # staged as exact decimal text, converted once when read
    "text": "v_text",
}


@dataclass(frozen=True)
class Refusal:
    """A feature not computed on Spark: at which stage and why.

    ``transpile``: no faithful Spark SQL (the rules); ``plan``: Spark cannot plan the
    translation (e.g. a correlated subquery it does not support), or its value is of a type
    the feature store does not hold; ``run``: it failed running, or returned several rows
    for one run.
    """

    name: str
    stage: Stage
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "stage": self.stage, "reason": self.reason}


@dataclass(frozen=True)
class Staged:
    """One computed feature's values as the executors left them: where, of what kind, and
    their counts (rows as the executors wrote them; coverage as the driver read them)."""

    index: int
    kind: Kind
    batch: Path
    rows: int
    """Rows with a run id."""
    covered: int
    """Runs of the tables with a non-null value."""

    @property
    def folder(self) -> Path:
        return self.batch / f"feature={self.index}"


class StagedValues(Mapping[str, dict[str, Value]]):
    """Computed features' values by name and run id, read from their staged Parquet one
    feature at a time on access: the driver never holds a catalog's values.

    The staging folder is removed by :meth:`discard`, at the latest when this is collected.
    """

    def __init__(self, staged: dict[str, Staged], root: Path | None = None) -> None:
        self.staged = staged
        self._remove = weakref.finalize(self, _remove_staging, root) if root else None

    def __getitem__(self, name: str) -> dict[str, Value]:
        staged = self.staged[name]
        rows = []
        if staged.folder.is_dir():
            with duckdb.connect() as con:
                rows = con.execute(
                    f"SELECT run_id, {KIND_COLUMN[staged.kind]} FROM {_parquet(staged.folder)}"
                ).fetchall()
        _check_read(name, staged, len(rows))
        return {str(run): _as_value(staged.kind, value) for run, value in rows}

    def __iter__(self) -> Iterator[str]:
        return iter(self.staged)

    def __len__(self) -> int:
        return len(self.staged)

    def discard(self) -> None:
        """Remove the staged values (reading one afterwards fails)."""
        if self._remove is not None:
            self._remove()


def _check_read(name: str, staged: Staged, rows: int) -> None:
    """Raises WarehouseError unless the driver read every row Spark staged for ``name``: a
    feature is whole or an error, never silently partial."""
    if rows != staged.rows:
        raise WarehouseError(
            f"feature {name}: the driver reads {rows} of the {staged.rows} rows Spark staged in "
            f"{staged.batch} (removed once stored, or a folder the driver and the executors "
            "do not share)"
        )


def _as_value(kind: Kind, value: Any) -> Value:
    """A staged cell as :func:`plain` gives the cell Spark computed.

    >>> _as_value("decimal", "0.10"), _as_value("long", 3), _as_value("text", "2024-03-01")
    (0.1, 3, '2024-03-01')
    """
    if kind == "decimal" and value is not None:
        return float(Decimal(value))
    return plain(value)


def _remove_staging(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    with suppress(OSError):
        root.parent.rmdir()  # the shared staging folder, once no other call uses it


def _local(path: Path) -> str:
    """``path`` on the local file system (a mount every executor shares), whatever Spark's
    default file system: the driver reads it with DuckDB. Hadoop escapes the path itself."""
    return f"file://{path.resolve()}"


def _parquet(folder: Path) -> str:
    quoted = str(folder / "*.parquet").replace("'", "''")
    return f"read_parquet('{quoted}')"


@dataclass(frozen=True)
class SparkFeatures:
    """Values per feature name and run id (staged, read on access), the features refused, and
    the SQL that ran. Use as a context manager, or call :meth:`discard`, to remove the staged
    values once stored."""

    values: StagedValues
    refused: list[Refusal]
    spark_sql: dict[str, str]
    runs: int
    """Distinct run ids of the tables' runs: the denominator of a feature's coverage."""
    seconds: dict[str, float]
    """Per feature, its translation and planning; ``batches``: running every batch (with the
    reruns of failed ones); ``counts``: the driver's count of the staged values; ``total``."""

    def as_dict(self) -> dict[str, object]:
        return {
            "computed": sorted(self.values),
            "refused": [r.as_dict() for r in self.refused],
            "runs": self.runs,
            "seconds": self.seconds,
        }

    def discard(self) -> None:
        """Remove the staged values."""
        self.values.discard()

    def __enter__(self) -> SparkFeatures:
        return self

    def __exit__(self, *_: object) -> None:
        self.discard()


@dataclass(frozen=True)
class _Planned:
    """A feature Spark has analysed, in the staged form (:data:`STAGED_VALUES`)."""

    index: int
    name: str
    query: str
    kind: Kind
    frame: Any


def materialize_on_spark(
    specs: Sequence[FeatureSpec],
    tables: Path,
    settings: SparkSettings,
    *,
    session: Any | None = None,
    run_ids: Sequence[str] | None = None,
    batch_features: int = BATCH_FEATURES,
) -> SparkFeatures:
    """Compute gated features on Spark over the Parquet tables ``spark_ingest`` wrote.

    The caller gates the features first (``autofe.pipelines.materialize`` does): translation
    checks faithfulness, not leakage. A feature that cannot be translated faithfully, that
    Spark cannot plan, or that fails, is listed in ``refused`` with the reason; the others'
    values equal DuckDB's (``tests/pipelines/test_spark.py``).

    Every feature Spark can plan runs in one action per ``batch_features`` features: their
    queries unioned in one long form and written as Parquet by the executors into a staging
    folder under ``tables`` (which the driver and the executors must share). The driver
    counts those files with DuckDB, one feature at a time; no value passes through Spark's
    driver. A batch that fails runs again in halves, down to the failing feature, which alone
    is refused.

    Args:
        specs: the features.
        tables: a folder written by :func:`spark_ingest`.
        settings: Spark master and configuration (with ``session``, only whether it sets the
            broadcast threshold, and the driver's memory for an error message).
        session: an open SparkSession to use and leave running.
        run_ids: compute only these runs (as ``compute_values`` does), else every run.
        batch_features: features per Spark action (a write).

    Raises:
        ConfigError: ``tables`` is no table folder, Spark cannot start, or its driver stopped.
    """
    read_manifest(tables)
    started = time.perf_counter()
    root = tables.resolve() / FEATURE_STAGING / uuid.uuid4().hex
    try:
        with (
            driver_lost_is_an_error(settings, "computing features"),
            _session(settings, session) as spark,
            _quiet_query_errors(spark),
            _without_broadcast_joins(spark, settings),
        ):
            register_tables(spark, tables)
            found = _compute(spark, specs, run_ids, tables, root, max(1, batch_features))
    except BaseException:
        _remove_staging(root)
        raise
    found.seconds["total"] = round(time.perf_counter() - started, 3)
    return found


BROADCAST_THRESHOLD = "spark.sql.autoBroadcastJoinThreshold"


@contextmanager
def _without_broadcast_joins(spark: Any, settings: SparkSettings) -> Iterator[None]:
    """Sort-merge joins instead of broadcast ones for the call, unless the user set the threshold.

    A broadcast join collects its small side (up to the threshold, 10 MB by default) into the
    driver, which builds the broadcast there and keeps it until the plan is garbage-collected;
    a batch's plan builds every feature's broadcasts at once. Each is also a Spark job of its
    own.
    """
    if BROADCAST_THRESHOLD in settings.conf:
        yield
        return
    before = spark.conf.get(BROADCAST_THRESHOLD)
    spark.conf.set(BROADCAST_THRESHOLD, "-1")
    try:
        yield
    finally:
        spark.conf.set(BROADCAST_THRESHOLD, before)


def _compute(
    spark: Any,
    specs: Sequence[FeatureSpec],
    run_ids: Sequence[str] | None,
    tables: Path,
    root: Path,
    batch_features: int,
) -> SparkFeatures:
    seconds: dict[str, float] = {}
    planned: list[_Planned] = []
    refused: list[Refusal] = []
    for index, spec in enumerate(specs):
        begun = time.perf_counter()
        outcome = _plan(spark, index, spec, run_ids)
        seconds[spec.name] = round(time.perf_counter() - begun, 3)
        if isinstance(outcome, Refusal):
            refused.append(outcome)
        else:
            planned.append(outcome)
    begun = time.perf_counter()
    written: dict[str, tuple[Path, int]] = {}
    for start in range(0, len(planned), batch_features):
        _run_batch(spark, planned[start : start + batch_features], root, written, refused)
    seconds["batches"] = round(time.perf_counter() - begun, 3)
    begun = time.perf_counter()
    runs, counts = _staged_counts(tables, planned, written)
    staged = _checked(planned, written, counts, refused, root)
    seconds["counts"] = round(time.perf_counter() - begun, 3)
    order = {spec.name: i for i, spec in enumerate(specs)}
    refused.sort(key=lambda r: order[r.name])
    queries = {p.name: p.query for p in planned if p.name in staged}
    return SparkFeatures(StagedValues(staged, root), refused, queries, runs, seconds)


def _checked(
    planned: list[_Planned],
    written: dict[str, tuple[Path, int]],
    counts: dict[int, tuple[int, int, int]],
    refused: list[Refusal],
    root: Path,
) -> dict[str, Staged]:
    """The features written, with their counts; several rows for a run refused.

    Raises:
        ConfigError: the staged files hold fewer rows than the executors wrote (a folder the
            driver does not share with them).
    """
    staged = {}
    for p in planned:
        if p.name not in written:
            continue
        batch, rows = written[p.name]
        seen, ids, covered = counts.get(p.index, (0, 0, 0))
        if seen != rows:
            raise ConfigError(
                f"Spark's executors wrote {rows} rows of feature {p.name} under {root}, and "
                f"read back {seen}: the tables' folder must be one the driver and every "
                "executor share"
            )
        if ids < rows:  # DuckDB keeps whichever row comes last, which depends on its scan order
            refused.append(Refusal(p.name, "run", "returns several rows for one run"))
        else:
            staged[p.name] = Staged(p.index, p.kind, batch, rows, covered)
    return staged


def register_tables(spark: Any, tables: Path) -> None:
    """Each queryable warehouse table as a temporary view, read with the warehouse's schema."""
    for t in TABLES:
        if t.name not in NOT_QUERYABLE:
            frame = spark.read.schema(spark_schema(t)).parquet(str(tables / t.name))
            frame.createOrReplaceTempView(t.name)


def _plan(
    spark: Any, index: int, spec: FeatureSpec, run_ids: Sequence[str] | None
) -> Refusal | _Planned:
    """The feature translated and analysed by Spark (nothing runs), or why it cannot be."""
    try:
        duck_sql = spec.sql if run_ids is None else restricted(parse_query(spec), run_ids)
        query = to_spark_sql(duck_sql)
    except (Untranspilable, ConfigError) as exc:
        return Refusal(spec.name, "transpile", str(exc))
    try:
        frame = spark.sql(query)  # parses and analyses: a plan refusal shows here
    except _analysis_errors() as exc:
        return Refusal(spec.name, "plan", jvm_message(exc))
    fields = frame.schema.fields
    if len(fields) < 2:
        return Refusal(spec.name, "run", f"returns {len(fields)} column(s), not (run_id, value)")
    kind = _kind(fields[1].dataType)
    if kind is None or not _is_run_id(fields[0].dataType):
        field_ = fields[1] if kind is None else fields[0]
        what = "value" if kind is None else "run id"
        return Refusal(
            spec.name,
            "plan",
            f"its {what} is of Spark type {field_.dataType.simpleString()}: the feature store "
            "holds text run ids and numbers, booleans or text",
        )
    return _Planned(index, spec.name, query, kind, _long_form(frame, index, kind))


def _kind(data_type: Any) -> Kind | None:
    """Where a value of ``data_type`` is staged; None for types the store does not hold."""
    from pyspark.sql import types

    if isinstance(data_type, types.BooleanType):
        return "bool"
    if isinstance(data_type, types.IntegralType):
        return "long"
    if isinstance(data_type, types.FloatType | types.DoubleType | types.NullType):
        return "double"
    if isinstance(data_type, types.DecimalType):
        return "decimal"
    text = (types.StringType, types.CharType, types.VarcharType, types.DateType)
    if isinstance(data_type, (*text, types.TimestampNTZType, types.TimestampType)):
        return "text"
    return None


def _is_run_id(data_type: Any) -> bool:
    from pyspark.sql import types

    return isinstance(data_type, types.StringType | types.IntegralType)


def _long_form(frame: Any, index: int, kind: Kind) -> Any:
    """``frame``'s first two columns as staged rows (:data:`STAGED_VALUES`), those with a run
    id."""
    functions, _ = _sql_functions()
    named = frame.toDF(*(f"_c{i}" for i in range(len(frame.columns))))
    value = _staged_value(functions.col("_c1"), frame.schema.fields[1].dataType)
    columns = [
        functions.lit(index).cast("int").alias("feature"),
        functions.col("_c0").cast("string").alias("run_id"),
    ]
    for column, spark_type in STAGED_VALUES:
        cell = value if column == KIND_COLUMN[kind] else functions.lit(None)
        columns.append(cell.cast(spark_type).alias(column))
    return named.select(*columns).where(functions.col("run_id").isNotNull())


def _staged_value(value: Any, data_type: Any) -> Any:
    """A value as staged: date and time as the ISO text :func:`plain` makes of them."""
    from pyspark.sql import types

    if not isinstance(data_type, types.TimestampNTZType | types.TimestampType):
        return value
    functions, _ = _sql_functions()
    micros = functions.date_format(value, "SSSSSS")
    text = functions.concat(
        functions.date_format(value, "yyyy-MM-dd'T'HH:mm:ss"),
        functions.when(micros == "000000", "").otherwise(
            functions.concat(functions.lit("."), micros)
        ),
    )
    # an instant reaches Python in the session's time zone, pinned to UTC
    return (
        functions.concat(text, functions.lit("+00:00"))
        if isinstance(data_type, types.TimestampType)
        else text
    )


def _run_batch(
    spark: Any,
    batch: list[_Planned],
    root: Path,
    written: dict[str, tuple[Path, int]],
    refused: list[Refusal],
) -> None:
    """Write ``batch``'s values under ``root`` in one action, counting each feature's rows as
    they are written; if it fails, each half in its own, down to the failing feature, which is
    refused with Spark's message."""
    from pyspark.sql import Observation

    functions, _ = _sql_functions()
    folder = root / f"batch={batch[0].index}"  # unique among the batches written
    frame = reduce(lambda a, b: a.unionByName(b), (p.frame for p in batch))
    rows = Observation()
    per_feature = (
        functions.count(functions.when(functions.col("feature") == p.index, True)).alias(
            f"f{p.index}"
        )
        for p in batch
    )
    begun = time.perf_counter()
    try:
        frame.observe(rows, *per_feature).write.partitionBy("feature").parquet(_local(folder))
    except _driver_lost_errors():
        raise  # not this batch's failure: every later one would fail the same way
    except Exception as exc:  # a runtime failure of one feature does not stop the others
        shutil.rmtree(folder, ignore_errors=True)
        if len(batch) == 1:
            refused.append(Refusal(batch[0].name, "run", jvm_message(exc)))
            return
        log.info("a batch of %d features failed: running it again in halves", len(batch))
        half = len(batch) // 2
        for part in (batch[:half], batch[half:]):
            _run_batch(spark, part, root, written, refused)
        return
    seconds = time.perf_counter() - begun
    log.info("%d features computed in one Spark write (%.1f s)", len(batch), seconds)
    counted = rows.get
    written.update((p.name, (folder, int(counted[f"f{p.index}"]))) for p in batch)


def _staged_counts(
    tables: Path, planned: list[_Planned], written: dict[str, tuple[Path, int]]
) -> tuple[int, dict[int, tuple[int, int, int]]]:
    """The tables' distinct runs, and per staged feature: rows, distinct run ids, runs of the
    tables with a value.

    Counted by DuckDB on the driver, one feature at a time, from the files the driver reads
    to store them: a count that disagrees with the executors' is a folder they do not share.
    One Spark aggregate over the whole staging (a join and a distinct count over every value of
    the catalog) took 91 s of 1,036 at 1 M runs; the driver counts a feature's million rows
    in a fraction of a second, holding one feature's run ids at a time.
    """
    runs_files = _parquet(tables / "runs")
    counts: dict[int, tuple[int, int, int]] = {}
    has_value = " OR ".join(f"s.{c} IS NOT NULL" for c in sorted(set(KIND_COLUMN.values())))
    with duckdb.connect() as con:
        con.execute(f"CREATE TEMP TABLE known AS SELECT DISTINCT run_id FROM {runs_files}")
        (runs,) = con.execute("SELECT count(*) FROM known").fetchone() or (0,)
        for p in planned:
            if p.name not in written:
                continue
            folder = written[p.name][0] / f"feature={p.index}"
            if not folder.is_dir():
                continue
            row = con.execute(
                f"SELECT count(*), count(DISTINCT s.run_id), "
                f"count(*) FILTER (WHERE k.run_id IS NOT NULL AND ({has_value})) "
                f"FROM {_parquet(folder)} AS s LEFT JOIN known AS k ON k.run_id = s.run_id"
            ).fetchone()
            counts[p.index] = (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)
    return int(runs), counts


def _analysis_errors() -> tuple[type[BaseException], ...]:
    from pyspark.errors import AnalysisException, ParseException

    return (AnalysisException, ParseException)


@contextmanager
def _quiet_query_errors(spark: Any) -> Iterator[None]:
    """Silence the logging of each failed feature query (pyspark's JSON stack trace, the
    JVM's task failure): the refusal itself says what went wrong."""
    logger = logging.getLogger("SQLQueryContextLogger")
    level = logger.level
    jvm_level = spark.sparkContext.getConf().get("spark.log.level", "ERROR")
    logger.setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield
    finally:
        logger.setLevel(level)
        spark.sparkContext.setLogLevel(jvm_level)


# --------------------------------------------------------------------------- feature store

AS_NUMBER: dict[Kind, str] = {
    "long": "CAST(v_long AS DOUBLE)",
    "double": "v_double",
    "bool": "CAST(v_bool AS DOUBLE)",
    "decimal": "CAST(v_text AS DOUBLE)",
    "text": "CAST(v_text AS DOUBLE)",
}
"""A staged value as ``write_feature`` stores a number: ``float()`` of its :func:`plain` form."""
AS_TEXT: dict[Kind, str] = {
    "long": "CAST(v_long AS VARCHAR)",
    # DuckDB spells a DOUBLE as Python's repr does, but for a NaN whose sign bit is set
    "double": "CASE WHEN isnan(v_double) THEN 'nan' ELSE CAST(v_double AS VARCHAR) END",
    "bool": "CASE WHEN v_bool THEN 'True' WHEN NOT v_bool THEN 'False' END",
    "decimal": "CAST(CAST(v_text AS DOUBLE) AS VARCHAR)",
    "text": "v_text",
}
"""A staged value as ``write_feature`` stores text: ``str()`` of its :func:`plain` form."""


def write_spark_features(
    features: SparkFeatures, specs: Sequence[FeatureSpec], store: Path
) -> list[Materialized]:
    """Store every computed feature in the feature store (``features.duckdb`` format).

    DuckDB reads the staged Parquet straight into the store (the values never pass through
    Python). Coverage is the share of the tables' runs with a non-null value, as the DuckDB
    path counts it. Each feature replaces its stored values in one transaction.

    Raises:
        WarehouseError: the store cannot be written, or the driver does not see the values the
            executors staged (a staging folder they do not share).
    """
    by_name = {s.name: s for s in specs}
    con = open_store(store)
    try:
        return [
            _store(con, store, by_name[name], staged, features.runs)
            for name, staged in features.values.staged.items()
        ]
    finally:
        con.close()


def _store(con: Any, store: Path, spec: FeatureSpec, staged: Staged, runs: int) -> Materialized:
    coverage = staged.covered / runs if runs else 0.0
    text = spec.value_type == "VARCHAR"
    number, words = ("NULL", AS_TEXT[staged.kind]) if text else (AS_NUMBER[staged.kind], "NULL")
    with transaction(con, f"feature {spec.name} in {store}"):
        con.execute("DELETE FROM feature_values WHERE feature_id = ?", [spec.feature_id])
        rows = 0
        if staged.folder.is_dir():
            inserted = con.execute(
                f"INSERT INTO feature_values SELECT ?, run_id, {number}, {words} "
                f"FROM {_parquet(staged.folder)}",
                [spec.feature_id],
            ).fetchone()
            rows = int(inserted[0]) if inserted else 0
        _check_read(spec.name, staged, rows)
        con.execute(
            "INSERT OR REPLACE INTO features VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                *(spec.feature_id, spec.name, spec.category, spec.value_type, spec.sql),
                datetime.now(UTC).replace(tzinfo=None),
                rows,
                coverage,
            ],
        )
    return Materialized(spec.feature_id, rows, coverage)
