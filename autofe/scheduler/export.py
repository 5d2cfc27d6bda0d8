"""Plans made actionable: a Databricks ``runs/submit`` payload or a Kubernetes Job manifest.

A :class:`~autofe.scheduler.jobs.Plan` says which shape, cloud, region and market a job runs
on; the request's ``task`` object (in the jobs file, beside ``shapes``) says what runs::

    "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py",
             "parameters": ["--day", "2024-04-01"], "image": "ghcr.io/acme/etl:1.2"}
    "task": {"type": "notebook", "notebook_path": "/Repos/etl/daily",
             "base_parameters": {"day": "2024-04-01"}}
    "task": {"type": "sql", "warehouse_id": "8f3c", "file": "/Workspace/q/daily.sql"}

Conventions (``docs/scheduler.md``, Hand-off): a shape of N nodes is one driver and N - 1
workers on Databricks, and N pods of one Indexed Job on Kubernetes (one pod per node, its
requests a fixed share of the node). The deadline becomes the run's timeout; the spot fallback
count becomes the Job's ``backoffLimit``. Both payloads are plain dicts of JSON values, checked
in the tests against the Databricks SDK's and the Kubernetes client's models.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from autofe.errors import ConfigError, ScheduleError
from autofe.scheduler.bid import bid_percent, choose_bid
from autofe.scheduler.catalog import Catalog, Offer
from autofe.scheduler.jobfile import parse_jobs
from autofe.scheduler.jobs import JobRequest, Plan, Tier
from autofe.scheduler.plan import plan_jobs

Format = Literal["databricks", "k8s"]
FORMATS: tuple[Format, ...] = ("databricks", "k8s")
TaskKind = Literal["spark_python", "notebook", "sql"]
TASK_KINDS: tuple[TaskKind, ...] = ("spark_python", "notebook", "sql")

CLOUDS = {"aws": "aws", "azure": "azure", "azure-databricks": "azure", "gcp": "gcp"}
"""Catalog cloud names → the attribute family Databricks and the node labels use."""

DATABRICKS_AVAILABILITY = {
    # cloud: (on-demand, spot without fallback, spot with fallback)
    "aws": ("ON_DEMAND", "SPOT", "SPOT_WITH_FALLBACK"),
    "azure": ("ON_DEMAND_AZURE", "SPOT_AZURE", "SPOT_WITH_FALLBACK_AZURE"),
    "gcp": ("ON_DEMAND_GCP", "PREEMPTIBLE_GCP", "PREEMPTIBLE_WITH_FALLBACK_GCP"),
}

SPOT_NODES: Mapping[str, tuple[dict[str, str], list[dict[str, str]]]] = {
    # cloud: (node selector, tolerations) that put a pod on spot capacity
    "aws": ({"karpenter.sh/capacity-type": "spot"}, []),
    "gcp": (
        {"cloud.google.com/gke-spot": "true"},
        [{"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true",
          "effect": "NoSchedule"}],
    ),
    "azure": (
        {"kubernetes.azure.com/scalesetpriority": "spot"},
        [{"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
          "effect": "NoSchedule"}],
    ),
}  # fmt: skip
ON_DEMAND_NODES: Mapping[str, dict[str, str]] = {"aws": {"karpenter.sh/capacity-type": "on-demand"}}
"""Only Karpenter labels on-demand nodes; on GKE and AKS "not spot" is the untainted default."""


@dataclass(frozen=True)
class Task:
    """What a job runs: a Python file, a notebook or a SQL file, and (Kubernetes) an image."""

    kind: TaskKind
    path: str
    parameters: tuple[str, ...] = ()
    named_parameters: Mapping[str, str] = field(default_factory=dict)
    warehouse_id: str | None = None
    image: str | None = None
    command: tuple[str, ...] = ()
    spark_version: str | None = None


@dataclass(frozen=True)
class ExportSettings:
    """Site conventions the plan does not decide (all documented in ``docs/scheduler.md``)."""

    spark_version: str = "15.4.x-scala2.12"
    first_on_demand: int = 1
    """Databricks nodes kept on demand before spot ones: 1 keeps the driver off spot."""
    aws_spot_bid_price_percent: int = 100
    aws_spot_bid_target: float | None = None
    """Acquisition probability to bid for on AWS (``autofe.scheduler.bid``): the percent becomes
    the lowest observed spot price reaching it, of the offer's on-demand price; ``None`` keeps
    ``aws_spot_bid_price_percent`` (100: AWS's default, bid on-demand)."""
    azure_spot_bid_max_price: float = -1.0
    """-1: bid up to the on-demand price, so Azure never evicts for price alone."""
    namespace: str = "default"
    queue: str | None = None
    """Kueue LocalQueue; ``None``: one queue per budget account, named after it."""
    priority_classes: Mapping[Tier, str] = field(
        default_factory=lambda: {t: f"autofe-{t.lower()}" for t in ("P0", "P1", "P2", "P3")}
    )
    cpu_share: float = 0.9
    memory_share: float = 0.85
    """Of the node's vCPU and memory a pod requests: the rest is the kubelet's and daemons'."""
    retries: int = 0
    """``backoffLimit`` when the plan has no spot fallback count (on demand: a failure is real)."""
    ttl_after_finished_s: int = 86400


def read_task(job: JobRequest, item: Mapping[str, Any]) -> Task:
    """The ``task`` object of one job's item in a jobs document.

    Raises:
        ScheduleError: no task, or a malformed one (naming the job and the field).
    """
    raw = item.get("task")
    if not isinstance(raw, dict):
        kinds = ", ".join(TASK_KINDS)
        raise ScheduleError(
            f"no 'task' object to export (give one with 'type': {kinds})", job.job_id
        )
    kind = raw.get("type")
    if kind not in TASK_KINDS:
        raise ScheduleError(f"task type {kind!r} is not one of {', '.join(TASK_KINDS)}", job.job_id)
    path_key = {"spark_python": "python_file", "notebook": "notebook_path", "sql": "file"}[kind]
    return Task(
        kind=kind,
        path=_text(raw.get(path_key), f"task.{path_key}", job.job_id),
        parameters=_texts(raw.get("parameters") if kind == "spark_python" else [], job.job_id),
        named_parameters=_named(raw, kind, job.job_id),
        warehouse_id=_optional_text(raw.get("warehouse_id"), "task.warehouse_id", job.job_id),
        image=_optional_text(raw.get("image"), "task.image", job.job_id),
        command=_texts(raw.get("command") or [], job.job_id, "task.command"),
        spark_version=_optional_text(raw.get("spark_version"), "task.spark_version", job.job_id),
    )


def export_plan(
    fmt: Format,
    job: JobRequest,
    plan: Plan,
    offer: Offer,
    task: Task,
    start: float,
    settings: ExportSettings | None = None,
    handle: str | None = None,
) -> dict[str, Any]:
    """One plan as the payload of ``fmt``, for a run starting at ``start`` (seconds).

    Args:
        handle: the store's handle; becomes the Databricks idempotency token and a label.

    Raises:
        ScheduleError: a cloud the format cannot express, a task it cannot run, or a deadline
            already passed at ``start`` (naming the job).
    """
    settings = settings or ExportSettings()
    if fmt == "databricks":
        return databricks_run(job, plan, task, start, _with_bid(settings, offer, job), handle)
    return kubernetes_job(job, plan, offer, task, start, settings, handle)


def _with_bid(settings: ExportSettings, offer: Offer, job: JobRequest) -> ExportSettings:
    """Settings whose AWS bid percent is the one ``aws_spot_bid_target`` asks for."""
    target = settings.aws_spot_bid_target
    if target is None or offer.cloud != "aws":
        return settings
    price = choose_bid(offer.instance_type, offer.region, offer.on_demand_usd_h, target, job.job_id)
    percent = bid_percent(price, offer.on_demand_usd_h)
    return replace(settings, aws_spot_bid_price_percent=percent)


def export_jobs(
    fmt: Format,
    jobs: Sequence[JobRequest],
    items: Mapping[str, Mapping[str, Any]],
    plans: Sequence[Plan],
    catalog: Catalog,
    now: float,
    settings: ExportSettings | None = None,
    handles: Sequence[str | None] | None = None,
) -> list[dict[str, Any]]:
    """Every job's payload, each run starting at ``max(now, its submit time)``.

    ``items`` are the jobs' objects as submitted (job id → object), which hold the tasks.

    Raises:
        ScheduleError: see :func:`export_plan` and :func:`read_task` (naming the job).
    """
    handles = handles or [None] * len(jobs)
    return [
        export_plan(
            fmt,
            job,
            plan,
            plan_offer(catalog, plan),
            read_task(job, items[job.job_id]),
            max(now, job.submit),
            settings,
            handle,
        )
        for job, plan, handle in zip(jobs, plans, handles, strict=True)
    ]


def export_document(
    fmt: Format,
    doc: object,
    catalog: Catalog,
    now: float,
    where: str = "jobs",
    settings: ExportSettings | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """Validate a jobs document, plan its jobs (as ``schedule plan`` would), export each.

    Returns:
        (job id, payload) per job, in the document's order.

    Raises:
        ScheduleError: an invalid job or task, or a plan the format cannot express.
    """
    jobs = parse_jobs(doc, catalog, now, where)
    assert isinstance(doc, dict)  # parse_jobs checked
    items = {item["job_id"]: item for item in doc["jobs"]}
    plans = plan_jobs(jobs, catalog, now)
    payloads = export_jobs(fmt, jobs.jobs, items, plans, catalog, now, settings)
    return [(job.job_id, payload) for job, payload in zip(jobs.jobs, payloads, strict=True)]


def parse_format(text: str) -> Format:
    """``--format`` checked.

    >>> parse_format("k8s")
    'k8s'
    """
    for fmt in FORMATS:
        if text == fmt:
            return fmt
    raise ConfigError(f"format {text!r}: use one of {', '.join(FORMATS)}")


def payload_list(fmt: Format, payloads: Sequence[Mapping[str, Any]]) -> str:
    """Several payloads as one text: Databricks bodies as JSON lines (one API call each),
    Kubernetes Jobs as a ``v1`` ``List`` (``kubectl apply -f -`` takes it whole)."""
    if fmt == "databricks":
        return "\n".join(json.dumps(p) for p in payloads)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(payloads)}, indent=2)


def payload_name(fmt: Format, job_id: str) -> str:
    """The file one payload is written to: the task key or the Job's name, plus ``.json``.

    >>> payload_name("databricks", "etl/daily"), payload_name("k8s", "etl")
    ('etl_daily.json', 'autofe-etl-cd22d001.json')
    """
    return f"{_task_key(job_id) if fmt == 'databricks' else k8s_name(job_id)}.json"


# ------------------------------------------------------------------------------ Databricks


def databricks_run(
    job: JobRequest,
    plan: Plan,
    task: Task,
    start: float,
    settings: ExportSettings,
    handle: str | None = None,
) -> dict[str, Any]:
    """The ``POST /api/2.2/jobs/runs/submit`` body: one task on a new job cluster."""
    submit_task: dict[str, Any] = {"task_key": _task_key(job.job_id), **_databricks_task(task)}
    if task.kind == "sql":
        if task.warehouse_id is None:
            raise ScheduleError(
                "a sql task needs 'warehouse_id' (SQL runs on a warehouse)", job.job_id
            )
    else:
        submit_task["new_cluster"] = databricks_cluster(job, plan, task, settings)
    payload: dict[str, Any] = {"run_name": job.job_id, "tasks": [submit_task]}
    timeout = timeout_seconds(job, start)
    if timeout is not None:
        payload["timeout_seconds"] = timeout
    if handle is not None:
        payload["idempotency_token"] = handle[:64]
    return payload


def databricks_cluster(
    job: JobRequest, plan: Plan, task: Task, settings: ExportSettings
) -> dict[str, Any]:
    """``new_cluster``: the plan's node type and count, its market as the cloud's attributes."""
    shape = plan.placement.shape
    cluster: dict[str, Any] = {
        "spark_version": task.spark_version or settings.spark_version,
        "node_type_id": shape.instance_type,
        "num_workers": shape.nodes - 1,
        "custom_tags": _tags(job, plan),
    }
    if shape.nodes == 1:
        # Databricks' documented single-node cluster: the driver runs the executors
        cluster["spark_conf"] = {
            "spark.databricks.cluster.profile": "singleNode",
            "spark.master": "local[*, 4]",
        }
        cluster["custom_tags"]["ResourceClass"] = "SingleNode"
    cloud = _cloud(plan, job.job_id)
    cluster[f"{cloud}_attributes"] = _market_attributes(cloud, plan, settings)
    return cluster


def _market_attributes(cloud: str, plan: Plan, settings: ExportSettings) -> dict[str, Any]:
    on_demand, spot, fallback = DATABRICKS_AVAILABILITY[cloud]
    placement = plan.placement
    if placement.market == "on-demand":
        return {"availability": on_demand}
    # the driver stays on demand unless it is the only node: a one-node spot plan is spot
    first = min(settings.first_on_demand, placement.shape.nodes - 1)
    attributes: dict[str, Any] = {
        "availability": spot if placement.fallback_after is None else fallback,
        "first_on_demand": first,
    }
    if cloud == "aws":
        attributes["spot_bid_price_percent"] = settings.aws_spot_bid_price_percent
    elif cloud == "azure":
        attributes["spot_bid_max_price"] = settings.azure_spot_bid_max_price
    return attributes


def _databricks_task(task: Task) -> dict[str, Any]:
    if task.kind == "spark_python":
        body: dict[str, Any] = {"python_file": task.path}
        if task.parameters:
            body["parameters"] = list(task.parameters)
        return {"spark_python_task": body}
    if task.kind == "notebook":
        body = {"notebook_path": task.path}
        if task.named_parameters:
            body["base_parameters"] = dict(task.named_parameters)
        return {"notebook_task": body}
    body = {"warehouse_id": task.warehouse_id, "file": {"path": task.path}}
    if task.named_parameters:
        body["parameters"] = dict(task.named_parameters)
    return {"sql_task": body}


def _task_key(job_id: str) -> str:
    """Databricks task keys allow letters, digits, ``_`` and ``-`` (at most 100).

    >>> _task_key("etl/daily 1")
    'etl_daily_1'
    """
    return re.sub(r"[^\w-]", "_", job_id)[:100] or "task"


def _tags(job: JobRequest, plan: Plan) -> dict[str, str]:
    """Cluster tags reach the cloud bill, so spend can be split by account and tier there."""
    return {
        "autofe_job": job.job_id[:256],
        "autofe_account": job.account[:256],
        "autofe_tier": job.tier,
        "autofe_market": plan.placement.market,
    }


# ------------------------------------------------------------------------------ Kubernetes


def kubernetes_job(
    job: JobRequest,
    plan: Plan,
    offer: Offer,
    task: Task,
    start: float,
    settings: ExportSettings,
    handle: str | None = None,
) -> dict[str, Any]:
    """A ``batch/v1`` Job: one pod per node of the shape, admitted by Kueue as one workload."""
    nodes = plan.placement.shape.nodes
    spec: dict[str, Any] = {
        "suspend": True,  # Kueue unsuspends the Job once its queue admits it
        "parallelism": nodes,
        "completions": nodes,
        "completionMode": "Indexed",
        "backoffLimit": backoff_limit(plan, settings),
        "ttlSecondsAfterFinished": settings.ttl_after_finished_s,
        "template": {
            "metadata": {"labels": _labels(job, handle)},
            "spec": _pod_spec(job, plan, offer, task, settings),
        },
    }
    timeout = timeout_seconds(job, start)
    if timeout is not None:
        spec["activeDeadlineSeconds"] = timeout
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": k8s_name(job.job_id),
            "namespace": settings.namespace,
            "labels": {
                **_labels(job, handle),
                "kueue.x-k8s.io/queue-name": label_value(settings.queue or job.account),
            },
            "annotations": _annotations(job, plan, handle),
        },
        "spec": spec,
    }


def _pod_spec(
    job: JobRequest, plan: Plan, offer: Offer, task: Task, settings: ExportSettings
) -> dict[str, Any]:
    if task.image is None:
        raise ScheduleError("a Kubernetes export needs 'task.image'", job.job_id)
    selector, tolerations = _node_placement(plan, job.job_id)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "priorityClassName": settings.priority_classes[job.tier],
        "nodeSelector": selector,
        "containers": [
            {
                "name": "job",
                "image": task.image,
                "command": list(task.command or _default_command(task, job.job_id)),
                "env": [{"name": "AUTOFE_JOB_ID", "value": job.job_id}],
                "resources": pod_resources(offer, settings),
            }
        ],
    }
    if tolerations:
        spec["tolerations"] = tolerations
    return spec


def _node_placement(plan: Plan, job_id: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Well-known node labels for type and region, plus the provider's spot selector."""
    placement = plan.placement
    cloud = _cloud(plan, job_id)
    selector = {
        "node.kubernetes.io/instance-type": placement.shape.instance_type,
        "topology.kubernetes.io/region": placement.region,
    }
    if placement.market == "on-demand":
        return {**selector, **ON_DEMAND_NODES.get(cloud, {})}, []
    spot_selector, tolerations = SPOT_NODES[cloud]
    return {**selector, **spot_selector}, [dict(t) for t in tolerations]


def pod_resources(offer: Offer, settings: ExportSettings) -> dict[str, dict[str, str]]:
    """Requests a share of one node (CPU in millicores, memory in MiB); memory and GPUs capped.

    >>> from autofe.scheduler.catalog import Catalog, Offer
    >>> offer = Offer("aws", "us-east-1", "p3.2xlarge", 8, 61.0, 3.06, None, 0.0, "V100", 1)
    >>> resources = pod_resources(offer, ExportSettings())
    >>> resources["requests"]
    {'cpu': '7200m', 'memory': '53094Mi', 'nvidia.com/gpu': '1'}
    >>> resources["limits"]
    {'memory': '53094Mi', 'nvidia.com/gpu': '1'}
    """
    cpu = f"{math.floor(offer.vcpus * 1000 * settings.cpu_share)}m"
    memory = f"{math.floor(offer.memory_gib * 1024 * settings.memory_share)}Mi"
    requests = {"cpu": cpu, "memory": memory}
    limits = {"memory": memory}
    if offer.gpu_count:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(offer.gpu_count)
    return {"requests": requests, "limits": limits}


def backoff_limit(plan: Plan, settings: ExportSettings) -> int:
    """Pod failures the Job absorbs: a spot plan's preemptions before it falls back.

    After that many the Job fails and the scheduler re-plans the job on demand; a node's
    preemption fails its pod, which Kubernetes counts against this limit.
    """
    placement = plan.placement
    if placement.market == "spot" and placement.fallback_after is not None:
        return placement.fallback_after
    return settings.retries


def _default_command(task: Task, job_id: str) -> tuple[str, ...]:
    if task.kind == "spark_python":
        return ("spark-submit", task.path, *task.parameters)
    raise ScheduleError(f"a {task.kind} task on Kubernetes needs 'task.command'", job_id)


def _labels(job: JobRequest, handle: str | None) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/managed-by": "autofe",
        "autofe.dev/job": label_value(job.job_id),
        "autofe.dev/account": label_value(job.account),
        "autofe.dev/tier": job.tier,
    }
    if handle is not None:
        labels["autofe.dev/handle"] = label_value(handle)
    return labels


def _annotations(job: JobRequest, plan: Plan, handle: str | None) -> dict[str, str]:
    """The plan's numbers and the exact job id (labels may have had to shorten it)."""
    notes = {
        "autofe.dev/job-id": job.job_id,
        "autofe.dev/placement": f"{plan.placement.cloud}/{plan.placement.region} "
        f"{plan.placement.shape.key} {plan.placement.market}",
        "autofe.dev/expected-cost-usd": f"{plan.expected_cost_usd:.4f}",
        "autofe.dev/p-deadline": f"{plan.p_deadline:.4f}",
    }
    if handle is not None:
        notes["autofe.dev/handle"] = handle
    return notes


def k8s_name(job_id: str) -> str:
    """A DNS-1123 label (≤ 63) unique per job id: readable prefix plus a hash of the id.

    >>> k8s_name("ETL/Daily_1")
    'autofe-etl-daily-1-c9708815'
    """
    digest = hashlib.sha1(job_id.encode()).hexdigest()[:8]
    stem = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")[:45].strip("-")
    return f"autofe-{stem}-{digest}" if stem else f"autofe-{digest}"


def label_value(text: str) -> str:
    """A valid label value (≤ 63 of ``[A-Za-z0-9_.-]``, alphanumeric at both ends).

    >>> label_value("team a/etl")
    'team_a_etl'
    """
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)


# --------------------------------------------------------------------------------- shared


def plan_offer(catalog: Catalog, plan: Plan) -> Offer:
    """The catalog's offer a plan was priced on (its instance type, cloud and region).

    Raises:
        ScheduleError: the catalog has no such offer (naming the job).
    """
    placement = plan.placement
    for offer in catalog.offers(placement.shape.instance_type, plan.job_id):
        if (offer.cloud, offer.region) == (placement.cloud, placement.region):
            return offer
    raise ScheduleError(
        f"the catalog has no {placement.shape.instance_type} in "
        f"{placement.cloud}/{placement.region}",
        plan.job_id,
    )


def timeout_seconds(job: JobRequest, start: float) -> int | None:
    """Seconds from ``start`` to the deadline (``None`` without one): the run stops there.

    Raises:
        ScheduleError: the deadline is not after ``start``.
    """
    if job.deadline is None:
        return None
    remaining = job.deadline - start
    if remaining < 1:
        raise ScheduleError(
            f"deadline {job.deadline} has passed at the run's start {start}", job.job_id
        )
    return math.ceil(remaining)


def _cloud(plan: Plan, job_id: str) -> str:
    try:
        return CLOUDS[plan.placement.cloud]
    except KeyError:
        raise ScheduleError(
            f"cloud {plan.placement.cloud!r} cannot be exported (known: {', '.join(CLOUDS)})",
            job_id,
        ) from None


def _text(raw: object, what: str, job_id: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ScheduleError(f"{what} must be a non-empty string", job_id)
    return raw


def _optional_text(raw: object, what: str, job_id: str) -> str | None:
    return None if raw is None else _text(raw, what, job_id)


def _texts(raw: object, job_id: str, what: str = "task.parameters") -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise ScheduleError(f"{what} must be a list of strings", job_id)
    return tuple(raw)


def _named(raw: Mapping[str, Any], kind: TaskKind, job_id: str) -> dict[str, str]:
    key = {"notebook": "base_parameters", "sql": "parameters"}.get(kind)
    value = raw.get(key) if key else None
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ScheduleError(f"task.{key} must map names to strings", job_id)
    return {str(k): v for k, v in value.items()}
