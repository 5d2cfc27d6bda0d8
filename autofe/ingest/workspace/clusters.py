"""Cluster configurations: a cluster spec's id, spot policy and ``cluster_configs`` row."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from autofe.ingest.workspace.api_values import SOURCE, Json, dict_of
from autofe.ingest.workspace.catalog import Catalog
from autofe.warehouse.ledger import hash_bytes

_CONFIG_KEYS = (
    "spark_version",
    "node_type_id",
    "driver_node_type_id",
    "num_workers",
    "autoscale",
    "aws_attributes",
    "azure_attributes",
    "gcp_attributes",
    "spark_conf",
    "instance_pool_id",
    "driver_instance_pool_id",
    "runtime_engine",
    "enable_elastic_disk",
)


def _config_content(spec: Mapping[str, Any]) -> Json:
    """The part of a cluster spec that shapes performance and cost, normalised.

    Identity and state fields (cluster_id, name, state, driver/executor instances) are left
    out, so a ``clusters/get`` of an all-purpose cluster and an equal ``new_cluster`` agree.
    """
    content = {k: spec[k] for k in _CONFIG_KEYS if spec.get(k) not in (None, {}, "")}
    if content.get("autoscale"):
        content.pop("num_workers", None)  # clusters/get reports the current size there
    if "node_type_id" in content:
        content.setdefault("driver_node_type_id", content["node_type_id"])  # API default
    return content


def config_id(spec: Mapping[str, Any]) -> str:
    """Stable id of a cluster configuration: a hash of its normalised content.

    >>> a = {"node_type_id": "m5.xlarge", "num_workers": 2, "cluster_name": "etl"}
    >>> config_id(a) == config_id({"num_workers": 2, "node_type_id": "m5.xlarge"})
    True
    >>> config_id(a) == config_id({"node_type_id": "m5.xlarge", "num_workers": 3})
    False
    """
    canonical = json.dumps(_config_content(spec), sort_keys=True, default=str)
    return "dbx-" + hash_bytes(canonical.encode())[:16]


def spot_policy(spec: Mapping[str, Any]) -> str | None:
    """on_demand | spot | spot_with_fallback from the cloud attributes (NULL if not stated).

    >>> spot_policy({"aws_attributes": {"availability": "SPOT_WITH_FALLBACK"}})
    'spot_with_fallback'
    >>> spot_policy({"azure_attributes": {"availability": "SPOT_AZURE"}})
    'spot'
    >>> spot_policy({"gcp_attributes": {"availability": "ON_DEMAND_GCP"}})
    'on_demand'
    >>> spot_policy({"num_workers": 2}) is None
    True
    """
    for key in ("aws_attributes", "azure_attributes", "gcp_attributes"):
        availability = str(dict_of(spec.get(key)).get("availability") or "").upper()
        if "FALLBACK" in availability:
            return "spot_with_fallback"
        if availability.startswith(("SPOT", "PREEMPTIBLE")):
            return "spot"
        if availability.startswith("ON_DEMAND"):
            return "on_demand"
    if dict_of(spec.get("gcp_attributes")).get("use_preemptible_executors"):
        return "spot"
    return None


def config_row(spec: Mapping[str, Any], cat: Catalog) -> Json:
    content = _config_content(spec)
    auto = dict_of(content.get("autoscale"))
    vcpu, memory_gb = cat.node_specs.get(str(content.get("node_type_id")), (None, None))
    return {
        "config_id": config_id(spec),
        "node_type": content.get("node_type_id"),
        "driver_node_type": content.get("driver_node_type_id"),
        "vcpu_per_node": vcpu,
        "memory_gb_per_node": memory_gb,
        "num_workers": content.get("num_workers"),
        "autoscale_min": auto.get("min_workers"),
        "autoscale_max": auto.get("max_workers"),
        "spot_policy": spot_policy(content),
        "spark_version": content.get("spark_version"),
        "spark_conf": json.dumps(content["spark_conf"]) if content.get("spark_conf") else None,
        "hourly_price": None,
        "source": SOURCE,
    }
