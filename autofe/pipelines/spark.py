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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, Literal

from autofe.errors import ConfigError, Untranspilable
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
from autofe.warehouse.feature_store import Materialized, write_feature
from autofe.warehouse.parquet_tables import (
    duckdb_select,
    read_manifest,
    spark_schema,
    write_manifest,
)
from autofe.warehouse.tables import TABLES, Table

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'autofe[spark]'"
LOOPBACK = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
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
    return {**defaults, **settings.conf, **PINNED_SPARK_CONF}


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


@dataclass(frozen=True)
class Refusal:
    """A feature not computed on Spark: at which stage and why.

    ``transpile``: no faithful Spark SQL (the rules); ``plan``: Spark cannot plan the
    translation (e.g. a correlated subquery it does not support); ``run``: it failed running.
    """

    name: str
    stage: Stage
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "stage": self.stage, "reason": self.reason}


@dataclass(frozen=True)
class SparkFeatures:
    """Values per feature name and run id, the features refused, and the SQL that ran."""

    values: dict[str, dict[str, Value]]
    refused: list[Refusal]
    spark_sql: dict[str, str]
    runs: frozenset[str]
    """Run ids of the tables' runs: the denominator of a feature's coverage."""
    seconds: dict[str, float]

    def as_dict(self) -> dict[str, object]:
        return {
            "computed": sorted(self.values),
            "refused": [r.as_dict() for r in self.refused],
            "runs": len(self.runs),
            "seconds": self.seconds,
        }


def materialize_on_spark(
    specs: Sequence[FeatureSpec],
    tables: Path,
    settings: SparkSettings,
    *,
    session: Any | None = None,
    run_ids: Sequence[str] | None = None,
) -> SparkFeatures:
    """Compute gated features on Spark over the Parquet tables ``spark_ingest`` wrote.

    The caller gates the features first (``autofe.pipelines.materialize`` does): translation
    checks faithfulness, not leakage. A feature that cannot be translated faithfully, that
    Spark cannot plan, or that fails, is listed in ``refused`` with the reason; the others'
    values equal DuckDB's (``tests/pipelines/test_spark.py``).

    Args:
        specs: the features.
        tables: a folder written by :func:`spark_ingest`.
        settings: Spark master and configuration (ignored when ``session`` is given).
        session: an open SparkSession to use and leave running.
        run_ids: compute only these runs (as ``compute_values`` does), else every run.

    Raises:
        ConfigError: ``tables`` is no table folder, or Spark cannot start.
    """
    read_manifest(tables)
    started = time.perf_counter()
    with (
        driver_lost_is_an_error(settings, "computing features"),
        _session(settings, session) as spark,
        _quiet_query_errors(spark),
    ):
        register_tables(spark, tables)
        runs = frozenset(str(r[0]) for r in spark.sql("SELECT run_id FROM runs").collect())
        values, refused, queries, seconds = {}, [], {}, {}
        for spec in specs:
            begun = time.perf_counter()
            outcome = _feature(spark, spec, run_ids)
            seconds[spec.name] = round(time.perf_counter() - begun, 3)
            if isinstance(outcome, Refusal):
                refused.append(outcome)
            else:
                queries[spec.name], values[spec.name] = outcome
    seconds["total"] = round(time.perf_counter() - started, 3)
    return SparkFeatures(values, refused, queries, runs, seconds)


def register_tables(spark: Any, tables: Path) -> None:
    """Each queryable warehouse table as a temporary view, read with the warehouse's schema."""
    for t in TABLES:
        if t.name not in NOT_QUERYABLE:
            frame = spark.read.schema(spark_schema(t)).parquet(str(tables / t.name))
            frame.createOrReplaceTempView(t.name)


def _feature(
    spark: Any, spec: FeatureSpec, run_ids: Sequence[str] | None
) -> Refusal | tuple[str, dict[str, Value]]:
    try:
        duck_sql = spec.sql if run_ids is None else restricted(parse_query(spec), run_ids)
        query = to_spark_sql(duck_sql)
    except (Untranspilable, ConfigError) as exc:
        return Refusal(spec.name, "transpile", str(exc))
    errors = _analysis_errors()
    try:
        frame = spark.sql(query)  # parses and analyses: a plan refusal shows here
    except errors as exc:
        return Refusal(spec.name, "plan", jvm_message(exc))
    try:
        table = frame.toArrow()
    except _driver_lost_errors():
        raise  # not this feature's failure: every later one would fail the same way
    except Exception as exc:  # a runtime failure of one feature does not stop the others
        return Refusal(spec.name, "run", jvm_message(exc))
    return _values(spec, query, table)


def _values(spec: FeatureSpec, query: str, table: Any) -> Refusal | tuple[str, dict[str, Value]]:
    if table.num_columns < 2:
        return Refusal(
            spec.name, "run", f"returns {table.num_columns} column(s), not (run_id, value)"
        )
    ids, cells = table.column(0).to_pylist(), table.column(1).to_pylist()
    values = {str(r): plain(v) for r, v in zip(ids, cells, strict=True) if r is not None}
    if len(values) < sum(r is not None for r in ids):
        # DuckDB keeps whichever row comes last, which depends on its scan order
        return Refusal(spec.name, "run", "returns several rows for one run")
    return query, values


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


def write_spark_features(
    features: SparkFeatures, specs: Sequence[FeatureSpec], store: Path
) -> list[Materialized]:
    """Store every computed feature in the feature store (``features.duckdb`` format).

    Coverage is the share of the tables' runs with a non-null value, as the DuckDB path counts
    it. Each feature replaces its stored values in one transaction.

    Raises:
        WarehouseError: the store cannot be written.
    """
    by_name = {s.name: s for s in specs}
    stored = []
    for name, values in features.values.items():
        covered = sum(1 for run, v in values.items() if v is not None and run in features.runs)
        coverage = covered / len(features.runs) if features.runs else 0.0
        stored.append(write_feature(store, by_name[name], list(values.items()), coverage))
    return stored
