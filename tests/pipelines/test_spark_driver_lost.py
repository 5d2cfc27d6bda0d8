"""A Spark driver whose heap runs out is an error naming the setting to raise, not a hang.

At 100x the example workspace filled the default 1 GB driver heap and the py4j call waited
for an answer that never came (docs/spark.md, "Scale"). The session now starts the driver with
``-XX:+ExitOnOutOfMemoryError``; this test fills a real driver's heap and checks the error.
Its own module: it ends its process's driver (a later session starts a new one).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autofe.errors import ConfigError
from autofe.featurespec import FeatureSpec
from autofe.pipelines.spark import SparkSettings, materialize_on_spark, spark_ingest

pytestmark = pytest.mark.slow

MINI = Path(__file__).resolve().parents[2] / "examples" / "workspaces" / "mini"
SETTINGS = SparkSettings(master="local[1]", conf={"spark.driver.memory": "512m"})
CROSSED = ", ".join(f"n AS n{i}" for i in range(10))
DISTINCT = " + ".join(f"n{i}.k * {6**i}" for i in range(10))
"""A number distinct for each of the 6^10 combinations of the crossed runs."""


def test_driver_out_of_heap_is_a_config_error_naming_driver_memory(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    spark_ingest([MINI], tables, SETTINGS)
    # The executors write feature values to Parquet, so a feature's rows never reach the driver;
    # but local executors share its heap, and an exact median keeps every distinct value of its
    # group on it: the mini workspace's 6 runs crossed ten times give 6^10 = 60 million
    huge = FeatureSpec(
        name="median_of_crossed_runs",
        sql=(
            "WITH n AS (SELECT run_id, row_number() OVER (ORDER BY run_id) AS k FROM runs) "
            f"SELECT n0.run_id, median({DISTINCT}) AS value FROM {CROSSED} GROUP BY n0.run_id"
        ),
        category="static-config",
    )
    with pytest.raises(ConfigError) as caught:
        materialize_on_spark([huge], tables, SETTINGS)
    message = str(caught.value)
    assert message.startswith("Spark's driver stopped while computing features")
    assert "spark.driver.memory = 512m" in message
    assert "--conf spark.driver.memory=4g" in message
    # the process is not left with the dead driver: a new session starts and answers
    assert materialize_on_spark([], tables, SETTINGS).values == {}
