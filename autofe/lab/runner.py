"""Run one planned lab run in its own Spark application on local PySpark.

Timing (the label ``execution_duration``): from the moment the session is ready to the end
of the job's last action, i.e. registering the input views (Parquet footer and partition
listing), the SQL statements or the PySpark ``run`` function, and the action that forces the
work (a ``noop`` write for queries). Session start-up, including a JVM launch when one was
needed, is ``setup_duration``; stopping the session is not measured. With ``prime`` a tiny
query (a Parquet read and a shuffled aggregate) runs before the clock starts and counts as
setup: a fresh JVM's class loading and first JIT would otherwise add seconds to every run's
execution (2–3 s measured on light jobs: docs/lab.md), a cost no job parameter explains.

One JVM serves consecutive runs while the driver memory stays the same (``local[N]`` and the
``spark.sql.*`` confs may change between sessions of one JVM); a different driver memory
shuts the gateway down and launches a new JVM. ``generate`` orders runs by driver memory to
keep those restarts few.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
import zstandard
from sqlglot import exp

from autofe.errors import ConfigError, first_line
from autofe.lab.data import growth_cutoff, partition_column, table_dir
from autofe.lab.plan import RunSpec

log = logging.getLogger(__name__)

_PARAM = re.compile(r"\$\{(\w+)\}")


@dataclass(frozen=True)
class Outcome:
    """What one run measured. Times are ms; ``real_start_ms`` is the wall clock at submit."""

    result_state: str
    real_start_ms: int
    setup_ms: int
    execution_ms: int
    message: str = ""


def substitute(script: str, params: dict[str, str]) -> str:
    """Replace ``${name}`` placeholders.

    >>> substitute("SELECT * FROM t WHERE d >= '${start}'", {"start": "1995-01-01"})
    "SELECT * FROM t WHERE d >= '1995-01-01'"

    Raises:
        ConfigError: a placeholder has no parameter.
    """

    def value(match: re.Match[str]) -> str:
        if match.group(1) not in params:
            raise ConfigError(f"script parameter ${{{match.group(1)}}} has no value")
        return params[match.group(1)]

    return _PARAM.sub(value, script)


def is_query(statement: str) -> bool:
    """A statement whose result must be forced by an action (a query, not a command).

    >>> is_query("WITH a AS (SELECT 1) SELECT * FROM a"), is_query("INSERT INTO t SELECT 1")
    (True, False)
    """
    return isinstance(sqlglot.parse_one(statement, read="spark"), exp.Query)


# Local Spark must talk to itself on loopback only, never on the machine's network address.
LOOPBACK = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


class SparkHost:
    """Starts one Spark session per run, reusing the JVM while the driver memory allows.

    With ``fresh_jvm`` every run gets its own JVM, as a Databricks job cluster does: execution
    is JIT-cold every time instead of faster the later a run comes in a long-lived JVM.
    """

    def __init__(self, fresh_jvm: bool = False, prime: bool = False) -> None:
        self._driver_memory: str | None = None
        self._fresh_jvm = fresh_jvm
        self.prime = prime
        self.jvm_launches = 0

    def start(self, conf: dict[str, str], app_name: str) -> Any:
        from pyspark.sql import SparkSession

        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM reads it at launch
        memory = conf["spark.driver.memory"]
        if self._driver_memory is not None and (self._fresh_jvm or self._driver_memory != memory):
            self.close()
        if self._driver_memory is None:
            self.jvm_launches += 1
        self._driver_memory = memory
        builder = SparkSession.builder.appName(app_name).master(conf["spark.master"])
        for key, value in {**LOOPBACK, **conf}.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()

    def close(self) -> None:
        """Shut the gateway and its JVM down, so the next session launches a fresh JVM."""
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        if gateway is not None:
            gateway.shutdown()
            proc = getattr(gateway, "proc", None)
            if proc is not None and proc.stdin is not None:
                proc.stdin.close()
                proc.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None
        self._driver_memory = None


def run_once(
    spec: RunSpec,
    host: SparkHost,
    log_dir: Path,
    data_root: Path,
    days: int,
    scratch: Path,
    cluster_id: str,
) -> Outcome:
    """Run ``spec`` in a new Spark application whose event log is written to ``log_dir``."""
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    conf = {
        **spec.config.spark_conf(),
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": log_dir.resolve().as_uri(),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.compress": "false",
        "spark.eventLog.includeTaskMetricsAccumulators": "false",
        "spark.databricks.job.runId": str(spec.run_id),
        "spark.databricks.clusterUsageTags.clusterId": cluster_id,
    }
    real_start = int(time.time() * 1000)
    started = time.perf_counter()
    spark = host.start(conf, f"{spec.job.name}-{spec.run_id}")
    if host.prime:
        _prime(spark, table_dir(data_root, spec.scale_factor, "nation"))
    ready = time.perf_counter()
    params = {**spec.params, "scratch": scratch.resolve().as_posix()}
    state, message = "SUCCESS", ""
    timer = _node_loss(spark, spec) if spec.config.spot_loss else None
    try:
        _register_tables(spark, spec, data_root, days)
        _execute(spark, spec, params)
    except Exception as exc:  # a failed run is data: record it with its message
        state, message = "FAILED", _failure_reason(exc, timer)
    finished = time.perf_counter()
    if timer is not None:
        timer.cancel()
    spark.stop()
    _name_event_log(log_dir, spec.submit_ms)
    shutil.rmtree(scratch, ignore_errors=True)
    setup_ms, exec_ms = round((ready - started) * 1000), round((finished - ready) * 1000)
    return Outcome(state, real_start, setup_ms, exec_ms, message)


def _prime(spark: Any, parquet: Path) -> None:
    """Load the classes and JIT the paths every job uses: a Parquet scan, codegen, a shuffle."""
    spark.read.parquet(parquet.as_posix()).count()
    keys = spark.range(0, 100_000, numPartitions=2).selectExpr("id % 7 AS k")
    keys.groupBy("k").count().collect()


def _node_loss(spark: Any, spec: RunSpec) -> threading.Timer:
    """Cancel every Spark job shortly after the work starts: the spot node was reclaimed."""
    import random

    delay = random.Random(f"loss:{spec.run_id}").uniform(0.3, 1.5)
    timer = threading.Timer(delay, spark.sparkContext.cancelAllJobs)
    timer.daemon = True
    timer.start()
    return timer


def _failure_reason(exc: BaseException, timer: threading.Timer | None) -> str:
    if timer is not None and timer.finished.is_set():
        return "Spot instance reclaimed: driver node lost (injected by autofe lab)"
    return first_line(exc)[:500]


def _register_tables(spark: Any, spec: RunSpec, data_root: Path, days: int) -> None:
    """Temp views over the Parquet tables; fact tables only up to the day's growth cutoff."""
    cutoff = growth_cutoff(spec.day, days).isoformat()
    for table in spec.job.tables:
        frame = spark.read.parquet(table_dir(data_root, spec.scale_factor, table).as_posix())
        column = partition_column(table)
        if column is not None:
            frame = frame.where(f"{column} <= DATE '{cutoff}'")
        frame.createOrReplaceTempView(table)


def _execute(spark: Any, spec: RunSpec, params: dict[str, str]) -> None:
    if spec.job.kind == "pyspark":
        namespace: dict[str, Any] = {}
        exec(compile(spec.script, f"<lab job {spec.job.name}>", "exec"), namespace)
        namespace["run"](spark, params)
        return
    for statement in _statements(substitute(spec.script, params)):
        frame = spark.sql(statement)
        if is_query(statement):
            frame.write.format("noop").mode("overwrite").save()


def _statements(script: str) -> list[str]:
    """The statements of a SQL script, split at ``;`` tokens (not inside strings), verbatim.

    >>> _statements("SELECT ';' AS x; SELECT 2")
    ["SELECT ';' AS x", 'SELECT 2']
    """
    from sqlglot.tokenizer_core import TokenType

    cuts = [
        t.start
        for t in sqlglot.tokenize(script, read="spark")
        if t.token_type == TokenType.SEMICOLON
    ]
    bounds = zip([-1, *cuts], [*cuts, len(script)], strict=True)
    return [part for a, b in bounds if (part := script[a + 1 : b].strip())]


def _name_event_log(log_dir: Path, virtual_ms: int) -> None:
    """Deliver Spark's ``<app_id>`` file as cluster log delivery does: a rolled, compressed part.

    Databricks delivers ``eventlog-<yyyy-mm-dd--hh-mm>.gz`` parts; the lab names the part by the
    run's virtual start and compresses it with zstd level 19 (which ingest reads like ``.gz``),
    because the shipped workspace must stay small.
    """
    files = [p for p in log_dir.iterdir() if p.is_file() and not p.name.startswith(".")]
    for crc in log_dir.glob(".*.crc"):
        crc.unlink()
    if len(files) != 1:
        return
    stamp = time.strftime("%Y-%m-%d--%H-%M", time.gmtime(virtual_ms / 1000))
    target = log_dir / f"eventlog-{stamp}.zstd"
    partial = target.with_name("." + target.name)
    partial.write_bytes(zstandard.ZstdCompressor(level=19).compress(files[0].read_bytes()))
    partial.rename(target)
    files[0].unlink()
