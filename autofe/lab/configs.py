"""Cluster configurations a run draws, the node types they stand for, and their prices.

A lab run is a Databricks *single-node* job cluster (``num_workers`` 0, ``spark.master``
``local[N]``): the driver does all the work, as local PySpark does. The node type is a real
Azure Databricks node type; one local core stands for four of its vCPUs (4-vCPU types run
``local[1]``, 8-vCPU types ``local[2]``), because this machine has 2 cores.

Prices: Azure Databricks "Jobs Compute" premium tier, West US 2, VM + DBU pay-as-you-go
(``TotalPricePerHour``), from NVIDIA spark-rapids-tools' ``premium-databricks-azure-catalog.json``
(Apache-2.0, commit 6e03887121d9eaa57401d54b84f326b73642351d).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

PRICE_SOURCE = (
    "NVIDIA/spark-rapids-tools premium-databricks-azure-catalog.json "
    "(Jobs Compute premium, westus2, Apache-2.0)"
)
SPARK_VERSION = "lab-pyspark-4.x"


@dataclass(frozen=True)
class NodeType:
    """An Azure Databricks node type with its catalog facts."""

    node_type_id: str
    vcpus: int
    memory_mb: int
    hourly_price_usd: float

    @property
    def local_cores(self) -> int:
        return max(1, self.vcpus // 4)


NODE_TYPES: tuple[NodeType, ...] = (
    NodeType("Standard_F4s", 4, 8192, 0.349),
    NodeType("Standard_DS3_v2", 4, 14336, 0.454),
    NodeType("Standard_D4ds_v5", 4, 16384, 0.526),
    NodeType("Standard_F8s", 8, 16384, 0.698),
    NodeType("Standard_D8s_v3", 8, 32768, 0.834),
    NodeType("Standard_DS4_v2", 8, 28672, 0.908),
)
DRIVER_MEMORY = ("1g", "2g")
SHUFFLE_PARTITIONS = (4, 8, 32, 200)
BROADCAST_THRESHOLD = ("-1", "1048576", "10485760")
SPOT_SHARE = 0.3
SPOT_LOSS_SHARE = 0.4


@dataclass(frozen=True)
class ClusterConfig:
    """One drawn cluster configuration; ``spot_loss`` injects a node loss on the first attempt."""

    node: NodeType
    driver_memory: str
    shuffle_partitions: int
    aqe: bool
    broadcast_threshold: str
    spot: bool = False
    spot_loss: bool = False

    @property
    def master(self) -> str:
        return f"local[{self.node.local_cores}]"

    def spark_conf(self) -> dict[str, str]:
        """The Spark confs this configuration sets (all strings, as ``spark_conf`` holds)."""
        return {
            "spark.databricks.cluster.profile": "singleNode",
            "spark.master": self.master,
            "spark.driver.memory": self.driver_memory,
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.sql.adaptive.enabled": str(self.aqe).lower(),
            "spark.sql.autoBroadcastJoinThreshold": self.broadcast_threshold,
        }


def draw_config(rng: random.Random) -> ClusterConfig:
    """A random configuration; spot clusters sometimes lose their node.

    >>> draw_config(random.Random(1)) == draw_config(random.Random(1))
    True
    """
    spot = rng.random() < SPOT_SHARE
    return ClusterConfig(
        node=rng.choice(NODE_TYPES),
        driver_memory=rng.choice(DRIVER_MEMORY),
        shuffle_partitions=rng.choice(SHUFFLE_PARTITIONS),
        aqe=rng.random() < 0.5,
        broadcast_threshold=rng.choice(BROADCAST_THRESHOLD),
        spot=spot,
        spot_loss=spot and rng.random() < SPOT_LOSS_SHARE,
    )


def sweep_configs() -> list[ClusterConfig]:
    """The candidate grid of a configuration sweep: the choices a job owner actually weighs.

    The cheapest 4-vCPU and 8-vCPU node (one vs two local cores, twice the price) crossed with
    three shuffle settings: 4 or 32 partitions, or the default 200 with AQE coalescing. Driver
    memory stays at 2g so a sweep point's runs share one JVM.

    >>> len(sweep_configs())
    6
    """
    nodes = (NODE_TYPES[0], NODE_TYPES[3])
    shuffles = ((4, False), (32, False), (200, True))
    return [
        ClusterConfig(node, "2g", partitions, aqe, "10485760")
        for node in nodes
        for partitions, aqe in shuffles
    ]


def cluster_spec(config: ClusterConfig) -> dict[str, Any]:
    """The ``new_cluster`` spec of a configuration, as the Clusters API writes it.

    >>> cluster_spec(sweep_configs()[0])["num_workers"]
    0
    """
    availability = "SPOT_AZURE" if config.spot else "ON_DEMAND_AZURE"
    return {
        "spark_version": SPARK_VERSION,
        "node_type_id": config.node.node_type_id,
        "driver_node_type_id": config.node.node_type_id,
        "num_workers": 0,
        "azure_attributes": {"availability": availability, "first_on_demand": 0},
        "spark_conf": config.spark_conf(),
        "custom_tags": {
            "ResourceClass": "SingleNode",
            "lab_hourly_price_usd": f"{config.node.hourly_price_usd:.3f}",
            "lab_price_source": PRICE_SOURCE,
        },
    }


def node_types_json() -> dict[str, Any]:
    """``clusters/list-node-types`` output for the lab's node types."""
    return {
        "node_types": [
            {"node_type_id": n.node_type_id, "num_cores": float(n.vcpus), "memory_mb": n.memory_mb}
            for n in NODE_TYPES
        ]
    }
