"""Exported plans against the schemas they claim: the Databricks SDK's and Kubernetes' models.

Each payload is round-tripped through the official client's models (``databricks-sdk``'s
``SubmitTask`` and the body ``JobsAPI.submit`` would send; ``kubernetes``' ``V1Job``): a field
the model does not know is dropped on the way in, so the round trip must give back exactly the
payload; values are type-checked against the models' annotations (Databricks, whose
dataclasses do not check) or by the models themselves (Kubernetes, pydantic). Offline: the
Jobs API client is given a recorder instead of a connection. Offers come from the shipped
catalog (real prices); plans are built by hand so every market and cloud is covered.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import typing
from typing import Any

import pytest
from databricks.sdk.service.jobs import JobsAPI, SubmitTask
from kubernetes.client import ApiClient, V1Job

from autofe.errors import ScheduleError
from autofe.scheduler.bid import bid_percent, choose_bid
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.export import (
    ExportSettings,
    Task,
    export_plan,
    plan_offer,
    read_task,
)
from autofe.scheduler.jobfile import parse_jobs
from autofe.scheduler.jobs import JobRequest, Market, Placement, Plan, Shape

SPARK = {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py", "parameters": ["--day", "1"]}
IMAGE = "ghcr.io/acme/etl:1.2"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def request(task: dict[str, Any] | None = None, **fields: Any) -> tuple[JobRequest, Task]:
    """One job parsed as a jobs file would be, and its task."""
    item: dict[str, Any] = {
        "job_id": "etl/daily 1",
        "submit": 1000.0,
        "tier": "P1",
        "account": "team a",
        "deadline": 4600.5,
        "shapes": {"m4.xlarge x4": {"p50_s": 900, "low_s": 700, "high_s": 1300}},
        "task": {**SPARK, "image": IMAGE} if task is None else task,
        **fields,
    }
    job = parse_jobs({"jobs": [item]}).jobs[0]
    return job, read_task(job, item)


REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure-databricks": "westus2"}


def plan(
    market: Market = "spot",
    cloud: str = "aws",
    shape: Shape | None = None,
    fallback_after: int | None = 2,
    region: str | None = None,
) -> Plan:
    """A hand-built plan on a real catalog offer (the region: the cloud's in ``REGION``)."""
    placement = Placement(
        shape or Shape("m4.xlarge", 4),
        cloud,
        region or REGION.get(cloud, "nowhere"),
        market,
        fallback_after,
    )
    return Plan("etl/daily 1", placement, 0.31, 0.97, 900.0, 1300.0, 0.05, 0.38)


# ------------------------------------------------------------------------------ Databricks


class Recorder:
    """Stands in for the SDK's ApiClient: keeps the request ``JobsAPI.submit`` would send."""

    def __init__(self) -> None:
        self._cfg = type("Config", (), {"workspace_id": None})()
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def do(self, method: str, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append((method, path, body))
        return {"run_id": 1}


def sdk_body(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What the SDK sends for this payload; an unknown top-level field is a TypeError."""
    recorder = Recorder()
    tasks = [SubmitTask.from_dict(task) for task in payload["tasks"]]
    for task in tasks:
        assert_typed(task)
    JobsAPI(recorder).submit(**{**payload, "tasks": tasks})  # type: ignore[no-untyped-call]
    ((method, path, body),) = recorder.calls
    return f"{method} {path}", body


def assert_typed(value: Any, where: str = "task") -> None:
    """Every set field of an SDK dataclass holds its annotated type (they do not check)."""
    hints = typing.get_type_hints(type(value))
    for f in dataclasses.fields(value):
        field_value = getattr(value, f.name)
        if field_value is not None:
            check_type(field_value, hints[f.name], f"{where}.{f.name}")


def check_type(value: Any, hint: Any, where: str) -> None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        (hint,) = [a for a in args if a is not type(None)]
        check_type(value, hint, where)
    elif origin is list:
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            check_type(item, args[0], f"{where}[{i}]")
    elif origin is dict:
        assert isinstance(value, dict), where
        for key, item in value.items():
            check_type(key, args[0], where)
            check_type(item, args[1], f"{where}.{key}")
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        assert isinstance(value, hint), where
        assert_typed(value, where)
    elif isinstance(hint, type) and issubclass(hint, enum.Enum):
        assert isinstance(value, hint), f"{where}: {value!r} is not a {hint.__name__}"
    elif hint is float:
        assert isinstance(value, int | float) and not isinstance(value, bool), where
    else:
        assert type(value) is hint, f"{where}: {value!r} is not {hint.__name__}"


@pytest.mark.parametrize(
    ("market", "cloud", "shape", "fallback", "availability", "first"),
    [
        ("spot", "aws", "m4.xlarge x4", 2, "SPOT_WITH_FALLBACK", 1),
        ("spot", "aws", "m4.xlarge x4", None, "SPOT", 1),
        ("on-demand", "aws", "m4.xlarge x4", None, "ON_DEMAND", None),
        ("spot", "gcp", "n2-standard-8 x3", 1, "PREEMPTIBLE_WITH_FALLBACK_GCP", 1),
        ("on-demand", "gcp", "n2-standard-8 x3", None, "ON_DEMAND_GCP", None),
        ("spot", "azure-databricks", "Standard_F8s x2", 2, "SPOT_WITH_FALLBACK_AZURE", 1),
        ("on-demand", "azure-databricks", "Standard_F8s x2", None, "ON_DEMAND_AZURE", None),
        ("spot", "aws", "m4.xlarge x1", 2, "SPOT_WITH_FALLBACK", 0),  # the only node is spot
    ],
)
def test_databricks_payloads_survive_the_sdk(
    catalog: Catalog,
    market: Market,
    cloud: str,
    shape: str,
    fallback: int | None,
    availability: str,
    first: int | None,
) -> None:
    job, task = request()
    chosen = plan(market, cloud, Shape.parse(shape), fallback)
    offer = plan_offer(catalog, chosen)
    payload = export_plan("databricks", job, chosen, offer, task, start=1000.0, handle="h" * 70)
    endpoint, body = sdk_body(payload)
    assert endpoint.startswith("POST /api/") and endpoint.endswith("/jobs/runs/submit")
    assert body == payload  # nothing dropped, renamed or re-encoded on the way through
    assert payload["timeout_seconds"] == 3601  # the deadline, 3600.5 s after the start
    assert payload["idempotency_token"] == "h" * 64  # the API's limit
    (submitted,) = payload["tasks"]
    assert submitted["task_key"] == "etl_daily_1"
    assert submitted["spark_python_task"] == {
        "python_file": "dbfs:/jobs/etl.py",
        "parameters": ["--day", "1"],
    }
    cluster = submitted["new_cluster"]
    assert cluster["node_type_id"] == chosen.placement.shape.instance_type
    assert cluster["num_workers"] == chosen.placement.shape.nodes - 1  # one node is the driver
    family = {"aws": "aws", "gcp": "gcp", "azure-databricks": "azure"}[cloud]
    attributes = cluster[f"{family}_attributes"]
    assert [k for k in cluster if k.endswith("_attributes")] == [f"{family}_attributes"]
    assert attributes["availability"] == availability
    assert attributes.get("first_on_demand") == first
    assert cluster["custom_tags"]["autofe_tier"] == "P1"
    assert cluster["custom_tags"]["autofe_account"] == "team a"
    assert ("spark_conf" in cluster) is (chosen.placement.shape.nodes == 1)


def test_notebook_and_sql_tasks(catalog: Catalog) -> None:
    notebook = {"type": "notebook", "notebook_path": "/Repos/etl/daily"}
    job, task = request({**notebook, "base_parameters": {"day": "2024-04-01"}})
    chosen = plan()
    payload = export_plan("databricks", job, chosen, plan_offer(catalog, chosen), task, 1000.0)
    assert sdk_body(payload)[1] == payload
    assert payload["tasks"][0]["notebook_task"] == {
        "notebook_path": "/Repos/etl/daily",
        "base_parameters": {"day": "2024-04-01"},
    }
    sql = {"type": "sql", "file": "/Workspace/q.sql", "warehouse_id": "8f3c"}
    job, task = request({**sql, "parameters": {"day": "1"}}, deadline=None)
    payload = export_plan("databricks", job, chosen, plan_offer(catalog, chosen), task, 1000.0)
    assert sdk_body(payload)[1] == payload
    (submitted,) = payload["tasks"]
    assert "new_cluster" not in submitted  # SQL runs on the warehouse, not a job cluster
    assert submitted["sql_task"] == {
        "warehouse_id": "8f3c",
        "file": {"path": "/Workspace/q.sql"},
        "parameters": {"day": "1"},
    }
    assert "timeout_seconds" not in payload  # no deadline: no timeout


# ------------------------------------------------------------------------------ Kubernetes


def round_trip(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest through the client's (pydantic, strict) V1Job model and back to JSON."""
    job = V1Job.from_dict(manifest)
    out: dict[str, Any] = ApiClient().sanitize_for_serialization(job)  # type: ignore[no-untyped-call]
    return out


SPOT_AWS = {"karpenter.sh/capacity-type": "spot"}
SPOT_GKE = {"cloud.google.com/gke-spot": "true"}
SPOT_AKS = {"kubernetes.azure.com/scalesetpriority": "spot"}


@pytest.mark.parametrize(
    ("market", "cloud", "shape", "selector"),
    [
        ("spot", "aws", "p2.xlarge x2", SPOT_AWS),
        ("on-demand", "aws", "m4.xlarge x4", {"karpenter.sh/capacity-type": "on-demand"}),
        ("spot", "gcp", "a2-highgpu-1g x1", SPOT_GKE),
        ("on-demand", "gcp", "n2-standard-8 x3", {}),
        ("spot", "azure-databricks", "Standard_F8s x2", SPOT_AKS),
    ],
)
def test_kubernetes_jobs_survive_the_client(
    catalog: Catalog,
    market: Market,
    cloud: str,
    shape: str,
    selector: dict[str, str],
) -> None:
    job, task = request()
    chosen = plan(market, cloud, Shape.parse(shape), 3)
    offer = plan_offer(catalog, chosen)
    manifest = export_plan("k8s", job, chosen, offer, task, start=1000.0, handle="ab12")
    assert round_trip(manifest) == manifest
    meta, spec = manifest["metadata"], manifest["spec"]
    assert DNS_LABEL.match(meta["name"]) and len(meta["name"]) <= 63
    labels = {**meta["labels"], **spec["template"]["metadata"]["labels"]}
    assert all(LABEL_VALUE.match(v) and len(v) <= 63 for v in labels.values()), labels
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "team_a"  # the account's queue
    assert meta["annotations"]["autofe.dev/job-id"] == "etl/daily 1"
    assert spec["suspend"] is True and spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"] == chosen.placement.shape.nodes
    assert spec["activeDeadlineSeconds"] == 3601
    assert spec["backoffLimit"] == (3 if market == "spot" else 0)
    pod = spec["template"]["spec"]
    assert pod["priorityClassName"] == "autofe-p1"
    assert pod["nodeSelector"] == {
        "node.kubernetes.io/instance-type": chosen.placement.shape.instance_type,
        "topology.kubernetes.io/region": REGION[cloud],
        **selector,
    }
    tolerated = {(t["key"], t["value"], t["effect"]) for t in pod.get("tolerations", [])}
    if cloud == "aws" or market == "on-demand":
        assert tolerated == set()  # Karpenter does not taint spot nodes; on demand is default
    else:
        assert tolerated == {(*next(iter(selector.items())), "NoSchedule")}
    (container,) = pod["containers"]
    assert container["command"] == ["spark-submit", "dbfs:/jobs/etl.py", "--day", "1"]
    requests = container["resources"]["requests"]
    assert int(requests["cpu"].removesuffix("m")) == int(offer.vcpus * 1000 * 0.9)
    assert int(requests["memory"].removesuffix("Mi")) == int(offer.memory_gib * 1024 * 0.85)
    assert requests.get("nvidia.com/gpu") == (str(offer.gpu_count) if offer.gpu_count else None)


def test_site_settings_name_the_queue_and_priority_classes(catalog: Catalog) -> None:
    job, task = request(tier="P0")
    chosen = plan("on-demand")
    settings = ExportSettings(
        queue="batch",
        namespace="jobs",
        retries=2,
        priority_classes={"P0": "critical", "P1": "high", "P2": "normal", "P3": "low"},
    )
    manifest = export_plan("k8s", job, chosen, plan_offer(catalog, chosen), task, 1000.0, settings)
    assert round_trip(manifest) == manifest
    assert manifest["metadata"]["namespace"] == "jobs"
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "batch"
    assert manifest["spec"]["template"]["spec"]["priorityClassName"] == "critical"
    assert manifest["spec"]["backoffLimit"] == 2  # on demand: the site's retries


def test_a_wrong_type_is_refused_by_the_kubernetes_model() -> None:
    """The check has teeth: the model refuses a count given as text."""
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"backoffLimit": "3"}}
    with pytest.raises(ValueError, match="backoffLimit"):
        V1Job.from_dict(manifest)


def test_the_type_check_catches_what_the_sdk_lets_through() -> None:
    task = SubmitTask.from_dict(
        {"task_key": "t", "new_cluster": {"num_workers": "3", "node_type_id": "m4.xlarge"}}
    )
    with pytest.raises(AssertionError, match="num_workers"):
        assert_typed(task)


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("task", "fmt", "message"),
    [
        ({"python_file": "x.py"}, "databricks", "task type None is not one of"),
        ({"type": "spark_python"}, "databricks", "task.python_file must be a non-empty string"),
        ({"type": "spark_python", "python_file": "x.py", "parameters": [1]}, "databricks",
         "task.parameters must be a list of strings"),
        ({"type": "sql", "file": "q.sql"}, "databricks", "a sql task needs 'warehouse_id'"),
        ({"type": "spark_python", "python_file": "x.py"}, "k8s", "needs 'task.image'"),
        ({"type": "notebook", "notebook_path": "/n", "image": IMAGE}, "k8s",
         "a notebook task on Kubernetes needs 'task.command'"),
    ],
)  # fmt: skip
def test_bad_tasks_name_the_job(
    catalog: Catalog, task: dict[str, Any], fmt: Any, message: str
) -> None:
    chosen = plan()
    with pytest.raises(ScheduleError, match=re.escape(message)) as info:
        job, parsed = request(task)
        export_plan(fmt, job, chosen, plan_offer(catalog, chosen), parsed, 1000.0)
    assert info.value.job_id == "etl/daily 1"


def test_no_task_past_deadline_and_unknown_places_are_errors(catalog: Catalog) -> None:
    job, task = request()
    with pytest.raises(ScheduleError, match="no 'task' object to export"):
        read_task(job, {"job_id": job.job_id})
    chosen = plan()
    offer = plan_offer(catalog, chosen)
    with pytest.raises(ScheduleError, match=r"deadline 4600\.5 has passed"):
        export_plan("databricks", job, chosen, offer, task, start=4600.0)
    with pytest.raises(ScheduleError, match="cloud 'oci' cannot be exported"):
        export_plan("k8s", job, plan(cloud="oci"), offer, task, start=1000.0)
    with pytest.raises(ScheduleError, match=r"the catalog has no m4\.xlarge in aws/mars-1"):
        plan_offer(catalog, plan(region="mars-1"))


def test_a_bid_target_sets_the_aws_bid_percent_from_the_spot_snapshot(catalog: Catalog) -> None:
    job, task = request()
    chosen = plan("spot", "aws")
    offer = plan_offer(catalog, chosen)
    price = choose_bid(offer.instance_type, offer.region, offer.on_demand_usd_h, 0.95)
    assert price < offer.on_demand_usd_h  # the snapshot prices m4.xlarge in us-east-1
    settings = ExportSettings(aws_spot_bid_target=0.95)
    payload = export_plan("databricks", job, chosen, offer, task, 1000.0, settings)
    attributes = payload["tasks"][0]["new_cluster"]["aws_attributes"]
    assert attributes["spot_bid_price_percent"] == bid_percent(price, offer.on_demand_usd_h) < 100
    assert attributes["spot_bid_price_percent"] / 100 * offer.on_demand_usd_h >= price
    assert sdk_body(payload)[1] == payload
    default = export_plan("databricks", job, chosen, offer, task, 1000.0)
    assert default["tasks"][0]["new_cluster"]["aws_attributes"]["spot_bid_price_percent"] == 100
