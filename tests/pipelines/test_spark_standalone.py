"""The Spark engine against a real standalone cluster: a master and a worker started here.

Both come from the pyspark installation (``bin/spark-class ...deploy.master.Master`` and
``...deploy.worker.Worker``) as subprocesses on free loopback ports, and are stopped after the
module. The example workspace is ingested on the cluster (its executors, separate JVMs started by
the worker, parse the logs) and a share of the example run's features is computed there; both
must equal DuckDB's. An unreachable master fails within the connect timeout.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from parity import differences

from autofe.config import example_workspace
from autofe.errors import ConfigError
from autofe.feature_catalog import load_catalog
from autofe.modeling.compute import compute_values
from autofe.pipelines.spark import SparkSettings, materialize_on_spark, spark_ingest, spark_session
from autofe.sandbox.session import Sandbox
from autofe.warehouse.docs import table_counts

pytestmark = pytest.mark.slow

CATALOG = Path(__file__).resolve().parents[1] / "fixtures" / "catalogs" / "ex8"
CLUSTER_START_S = 90.0
CONF = {
    "spark.ui.enabled": "false",
    "spark.executor.memory": "1g",
    "spark.cores.max": "2",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def spark_class(*args: str, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One Spark daemon, in its own process group (its executors are its children)."""
    import pyspark

    command = [str(Path(pyspark.__file__).parent / "bin" / "spark-class"), *args]
    with log.open("wb") as out:
        return subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def wait_for_worker(webui: int, master: subprocess.Popen[bytes], log: Path) -> dict[str, object]:
    deadline = time.monotonic() + CLUSTER_START_S
    while time.monotonic() < deadline:
        assert master.poll() is None, log.read_text()[-2000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as answer:
                state: dict[str, object] = json.load(answer)
            if int(str(state.get("aliveworkers", 0))) >= 1:
                return state
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no worker registered within {CLUSTER_START_S:g} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def daemon_env(root: Path) -> dict[str, str]:
    import pyspark

    return {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(root / "work"),
        "SPARK_LOG_DIR": str(root),
    }


def start_master(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int, int]:
    port, webui = free_port(), free_port()
    master = spark_class(
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui)),
        log=root / "master.log",
        env=env,
    )
    return master, port, webui


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (2 cores, 2 GiB) on loopback; yields the master URL."""
    root = tmp_path_factory.mktemp("standalone")
    env = daemon_env(root)
    master, port, webui = start_master(root, env)
    host = ("--host", "127.0.0.1")
    url = f"spark://127.0.0.1:{port}"
    worker = spark_class(
        "org.apache.spark.deploy.worker.Worker",
        *(*host, "--webui-port", str(free_port()), "--cores", "2", "--memory", "2g", url),
        log=root / "worker.log",
        env=env,
    )
    try:
        wait_for_worker(webui, master, root / "master.log")
        yield url
    finally:
        stop(worker)
        stop(master)


def test_ingest_and_features_on_a_standalone_cluster(
    cluster: str, example_warehouse: Path, tmp_path: Path
) -> None:
    settings = SparkSettings(master=cluster, conf=CONF, app_name="autofe-standalone-test")
    started = time.perf_counter()
    report = spark_ingest([example_workspace()], tmp_path / "tables", settings)
    assert report.tables == table_counts(example_warehouse)
    specs = load_catalog(CATALOG)[::12]  # one in twelve: a spread of categories, bounded time
    found = materialize_on_spark(specs, tmp_path / "tables", settings)
    computed = [s for s in specs if s.name in found.values]
    assert computed and all(r.reason for r in found.refused)
    with Sandbox.open(example_warehouse) as sandbox:
        duck = compute_values(sandbox, computed)
    wrong = {name: differences(duck[name], found.values[name])[:3] for name in duck}
    assert {name: d for name, d in wrong.items() if d} == {}
    print(
        json.dumps(
            {
                "ingest_s": report.seconds,
                "features": len(specs),
                "computed": len(computed),
                "materialize_s": found.seconds["total"],
                "total_s": round(time.perf_counter() - started, 1),
            }
        )
    )


def test_an_unreachable_master_fails_within_the_timeout() -> None:
    dead = f"spark://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with (
        pytest.raises(ConfigError, match=rf"Spark master {dead} is not reachable"),
        spark_session(SparkSettings(master=dead, connect_timeout_s=5)),
    ):
        pass
    assert time.monotonic() - started < 5


def test_a_master_without_workers_fails_within_the_connect_timeout(tmp_path: Path) -> None:
    """The master answers, but no executor ever runs a task: an error, not a wait forever."""
    master, port, webui = start_master(tmp_path, daemon_env(tmp_path))
    try:
        deadline = time.monotonic() + CLUSTER_START_S
        while not _answers(webui) and time.monotonic() < deadline:
            time.sleep(0.5)
        settings = SparkSettings(master=f"spark://127.0.0.1:{port}", conf=CONF, connect_timeout_s=5)
        started = time.monotonic()
        with (
            pytest.raises(ConfigError, match=r"no executor ran a task within 5 s"),
            spark_session(settings),
        ):
            pass
        assert time.monotonic() - started < 60  # the JVM's start plus the 5 s
    finally:
        stop(master)


def _answers(webui: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2):
            return True
    except OSError:
        return False
